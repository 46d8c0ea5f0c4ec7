package failsafe_test

import (
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/memstore"
)

// A failsafe limiter forwards ChargeN to its primary while the breaker is
// closed: settles and debts come out exactly as on the store alone.
func TestSettleForwardsToThePrimary(t *testing.T) {
	newStore := func(t *testing.T, clock sluice.Clock) sluice.Limiter {
		primary := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
		t.Cleanup(func() { primary.Close() })
		l, err := failsafe.New(failsafe.Config{Primary: primary, Logger: slog.New(&logs{}), Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	t.Run("settle", func(t *testing.T) { storetest.RunSettle(t, newStore) })
	t.Run("debt", func(t *testing.T) { storetest.RunDebt(t, newStore, 0) })
}
