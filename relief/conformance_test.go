package relief_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/relief"
)

// overLimitCache is an OverLimitCache over a healthy in-memory store.
func overLimitCache(t *testing.T, clock sluice.Clock) sluice.Limiter {
	return relief.NewOverLimitCache(newMem(t, clock), relief.CacheConfig{Clock: clock})
}

// hybrid is a Hybrid with its default share, the whole limit locally, over
// two healthy in-memory stores: the local pass then admits what the global
// one admits. A smaller share denies more by design, which the step tables
// would not describe.
func hybrid(t *testing.T, clock sluice.Clock) sluice.Limiter {
	return relief.NewHybrid(newMem(t, clock), newMem(t, clock), nil)
}

// Every relief wrapper, over a healthy in-memory store, is held to the
// whole conformance suite.
func TestConformance(t *testing.T) {
	t.Run("OverLimitCache", func(t *testing.T) { storetest.Run(t, overLimitCache) })
	t.Run("Hybrid", func(t *testing.T) { storetest.Run(t, hybrid) })
	// A batch is charged to the store when reserved: an admission reports
	// the store's ResetAfter after the whole batch (storetest.Options.Reserves).
	t.Run("Batcher", func(t *testing.T) {
		storetest.RunWith(t, func(t *testing.T, clock sluice.Clock) sluice.Limiter {
			return relief.NewBatcher(newMem(t, clock), relief.BatchConfig{Clock: clock})
		}, storetest.Options{Reserves: true})
	})
	// Over-limit cache in front of a batcher, as TestBatchersShareOneGlobalLimit's servers: a
	// remembered denial hides units that racing requests reserved or gave
	// back meanwhile (storetest.Options.HidesUnits).
	t.Run("OverLimitCache+Batcher", func(t *testing.T) {
		storetest.RunWith(t, func(t *testing.T, clock sluice.Clock) sluice.Limiter {
			b := relief.NewBatcher(newMem(t, clock), relief.BatchConfig{Clock: clock})
			return relief.NewOverLimitCache(b, relief.CacheConfig{Clock: clock})
		}, storetest.Options{Reserves: true, HidesUnits: true})
	})
}

// The over-limit cache and the hybrid forward ChargeN: settles and debts
// come out exactly as on the store alone.
func TestSettleForwards(t *testing.T) {
	for name, wrap := range map[string]storetest.NewStore{"OverLimitCache": overLimitCache, "Hybrid": hybrid} {
		t.Run(name, func(t *testing.T) {
			t.Run("settle", func(t *testing.T) { storetest.RunSettle(t, wrap) })
			t.Run("debt", func(t *testing.T) { storetest.RunDebt(t, wrap, 0) })
		})
	}
}
