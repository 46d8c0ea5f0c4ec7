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

func TestConformance(t *testing.T) { storetest.Run(t, newStore) }

func TestSettleLeavesSpentEqualToActualCosts(t *testing.T) { storetest.RunSettle(t, newStore) }

func TestDebtDelaysTheNextRequestByWhatItOwes(t *testing.T) { storetest.RunDebt(t, newStore, 0) }
