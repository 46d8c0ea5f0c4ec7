package memstore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newStore(t *testing.T, clock sluice.Clock) sluice.Limiter {
	s := memstore.New(memstore.Config{Clock: clock})
	t.Cleanup(func() { s.Close() })
	return s
}

// smallCapacity is the keys a store of smallStore holds.
const smallCapacity = 256

// smallStore makes stores that hold at most smallCapacity keys, for the
// suite's eviction flood.
func smallStore(t *testing.T, clock sluice.Clock) sluice.Limiter {
	s := memstore.New(memstore.Config{Clock: clock, MaxKeys: smallCapacity, Shards: 4, SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.RunWith(t, newStore, storetest.Options{Small: smallStore, SmallCapacity: smallCapacity})
}

func TestSettleLeavesSpentEqualToActualCosts(t *testing.T) { storetest.RunSettle(t, newStore) }

func TestDebtDelaysTheNextRequestByWhatItOwes(t *testing.T) { storetest.RunDebt(t, newStore, 0) }

// TestSlidingLogIsExactAtEveryLimit: the log's decisions are the exact
// definition's at 1, 64, 1000 and 100,000 per minute (it merged entries
// above 64 per period, refusing requests the definition admits).
func TestSlidingLogIsExactAtEveryLimit(t *testing.T) {
	storetest.RunSlidingLogExact(t, newStore, 1, false)
}

// TestCounterKeyKeepsItsUnitsUnderMoments: a key spent under the
// two-window counter and then decided under moments (a rule reloaded with
// the config's default) comes back as spent as the counter counted it.
func TestCounterKeyKeepsItsUnitsUnderMoments(t *testing.T) {
	storetest.RunCounterToMoments(t, newStore)
}

// TestMomentsKeyKeepsItsUnitsUnderTheCounter: the way back, a key spent
// under moments and then decided under the two-window counter (a rule
// reloaded with buckets: 1).
func TestMomentsKeyKeepsItsUnitsUnderTheCounter(t *testing.T) {
	storetest.RunMomentsToCounter(t, newStore)
}

// TestStaleMomentsUnitsDoNotSeedTheCounter: a key moved from moments to
// the two-window counter brings only the units moments still count, none
// of those whose sub-window has left the period.
func TestStaleMomentsUnitsDoNotSeedTheCounter(t *testing.T) {
	storetest.RunStaleMomentsToCounter(t, newStore)
}
