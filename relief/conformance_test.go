package relief_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/relief"
)

// smallCapacity is the keys each store of smallMem holds, for the suite's
// eviction flood.
const smallCapacity = 256

// smallMem is newMem with a store that holds at most smallCapacity keys.
func smallMem(t testing.TB, clock sluice.Clock) *memstore.Store {
	t.Helper()
	s := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1, MaxKeys: smallCapacity, Shards: 4})
	t.Cleanup(func() { s.Close() })
	return s
}

// A wrapper makes a relief limiter over the in-memory stores that mem
// makes, on clock.
type wrapper func(t *testing.T, clock sluice.Clock, mem func() *memstore.Store) sluice.Limiter

// runOver runs the suite on w over healthy in-memory stores of the default
// size, described by opts, and its eviction flood on w over stores of
// smallCapacity keys each.
func runOver(t *testing.T, w wrapper, opts storetest.Options) {
	opts.Small = func(t *testing.T, clock sluice.Clock) sluice.Limiter {
		return w(t, clock, func() *memstore.Store { return smallMem(t, clock) })
	}
	opts.SmallCapacity = smallCapacity
	storetest.RunWith(t, func(t *testing.T, clock sluice.Clock) sluice.Limiter {
		return w(t, clock, func() *memstore.Store { return newMem(t, clock) })
	}, opts)
}

// cacheOver is an OverLimitCache over a store.
func cacheOver(_ *testing.T, clock sluice.Clock, mem func() *memstore.Store) sluice.Limiter {
	return relief.NewOverLimitCache(mem(), relief.CacheConfig{Clock: clock})
}

// hybridOver is a Hybrid with its default share, the whole limit locally,
// over two stores: the local pass then admits what the global one admits.
// A smaller share denies more by design, which the step tables would not
// describe.
func hybridOver(_ *testing.T, _ sluice.Clock, mem func() *memstore.Store) sluice.Limiter {
	return relief.NewHybrid(mem(), mem(), nil)
}

// batcherOver is a Batcher over a store.
func batcherOver(_ *testing.T, clock sluice.Clock, mem func() *memstore.Store) sluice.Limiter {
	return relief.NewBatcher(mem(), relief.BatchConfig{Clock: clock})
}

// leaserOver is a Batcher with leases of up to half a limit over a store:
// half, so that the suite's small limits (10 and up) get leases.
func leaserOver(_ *testing.T, clock sluice.Clock, mem func() *memstore.Store) sluice.Limiter {
	return relief.NewBatcher(mem(), relief.BatchConfig{LeaseShare: 0.5, Clock: clock})
}

// cacheBatcherOver is an OverLimitCache in front of a Batcher over a store.
func cacheBatcherOver(_ *testing.T, clock sluice.Clock, mem func() *memstore.Store) sluice.Limiter {
	b := relief.NewBatcher(mem(), relief.BatchConfig{Clock: clock})
	return relief.NewOverLimitCache(b, relief.CacheConfig{Clock: clock})
}

// overLimitCache is an OverLimitCache over a healthy in-memory store.
func overLimitCache(t *testing.T, clock sluice.Clock) sluice.Limiter {
	return cacheOver(t, clock, func() *memstore.Store { return newMem(t, clock) })
}

// hybrid is a Hybrid over two healthy in-memory stores (see hybridOver).
func hybrid(t *testing.T, clock sluice.Clock) sluice.Limiter {
	return hybridOver(t, clock, func() *memstore.Store { return newMem(t, clock) })
}

// Every relief wrapper, over a healthy in-memory store, is held to the
// whole conformance suite; over a small store, to its eviction flood.
func TestConformance(t *testing.T) {
	t.Run("OverLimitCache", func(t *testing.T) { runOver(t, cacheOver, storetest.Options{}) })
	t.Run("Hybrid", func(t *testing.T) { runOver(t, hybridOver, storetest.Options{}) })
	// A batch is charged to the store when reserved: an admission reports
	// the store's ResetAfter after the whole batch (storetest.Options.Reserves).
	t.Run("Batcher", func(t *testing.T) {
		runOver(t, batcherOver, storetest.Options{Reserves: true})
	})
	t.Run("Batcher/leases", func(t *testing.T) {
		runOver(t, leaserOver, storetest.Options{Reserves: true})
	})
	// Over-limit cache in front of a batcher, as TestBatchersShareOneGlobalLimit's servers: a
	// remembered denial hides units that racing requests reserved or gave
	// back meanwhile (storetest.Options.HidesUnits).
	t.Run("OverLimitCache+Batcher", func(t *testing.T) {
		runOver(t, cacheBatcherOver, storetest.Options{Reserves: true, HidesUnits: true})
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
