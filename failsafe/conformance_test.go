package failsafe_test

import (
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/memstore"
)

// overMemory makes failsafe Limiters in mode over a healthy in-memory
// primary (and an in-memory local limiter) on the suite's clock.
func overMemory(mode failsafe.Mode) storetest.NewStore { return overMemoryOf(mode, 0) }

// smallCapacity is the keys each store of overMemoryOf(mode, smallCapacity)
// holds, for the suite's eviction flood.
const smallCapacity = 256

// overMemoryOf is overMemory over stores that hold at most maxKeys keys
// each (0: the default bound).
func overMemoryOf(mode failsafe.Mode, maxKeys int) storetest.NewStore {
	return func(t *testing.T, clock sluice.Clock) sluice.Limiter {
		cfg := memstore.Config{Clock: clock, SweepInterval: -1, MaxKeys: maxKeys}
		if maxKeys > 0 {
			cfg.Shards = 4
		}
		primary := memstore.New(cfg)
		local := memstore.New(cfg)
		t.Cleanup(func() { primary.Close(); local.Close() })
		l, err := failsafe.New(failsafe.Config{
			Primary: primary, Mode: mode, Local: local, Nodes: 2,
			Logger: slog.New(&logs{}), Clock: clock,
		})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

// With a healthy primary, a failsafe Limiter in every mode is held to the
// whole conformance suite, as the store it wraps is: the wrapper adds
// nothing to a decision while the store answers.
func TestConformance(t *testing.T) {
	for _, mode := range everyMode {
		t.Run(mode.String(), func(t *testing.T) {
			storetest.RunWith(t, overMemory(mode), storetest.Options{Small: overMemoryOf(mode, smallCapacity), SmallCapacity: smallCapacity})
		})
	}
}

// A failsafe limiter forwards ChargeN to its primary while the breaker is
// closed: settles and debts come out exactly as on the store alone.
func TestSettleForwardsToThePrimary(t *testing.T) {
	t.Run("settle", func(t *testing.T) { storetest.RunSettle(t, overMemory(failsafe.Open)) })
	t.Run("debt", func(t *testing.T) { storetest.RunDebt(t, overMemory(failsafe.Open), 0) })
}
