package pgstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/pgstore"
)

// stressQuota is the quota the stress tests race on: small, so that most
// attempts land near or past it.
var stressQuota = sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Hour}

// spendConcurrently runs 16 goroutines of 40 attempts each on key, of
// costs 1 to 4, and calls each (from those goroutines) with every attempt's
// number, cost and result; a failed attempt fails the test.
func spendConcurrently(t *testing.T, s *pgstore.Store, key string, each func(i, cost int, r sluice.Result)) {
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 40 {
				cost := (g+i)%4 + 1
				r, err := s.AllowN(context.Background(), key, stressQuota, cost)
				if err != nil {
					t.Error(err)
					return
				}
				each(i, cost, r)
			}
		})
	}
	wg.Wait()
}

// TestConcurrentMixedCostsReportTheirOwnCounts: many goroutines spending
// costs of 1 to 4 on one quota fill it exactly; every admission reports a
// count no other admission reports (they are serialized on the row), the
// highest of them the ledger's; every refusal reports less room than its
// cost, as nothing is refunded.
func TestConcurrentMixedCostsReportTheirOwnCounts(t *testing.T) {
	s, _ := open(t, clocktest.At(time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC)))
	var mu sync.Mutex
	seen := map[int]bool{}
	top, admitted := 0, 0
	spendConcurrently(t, s, "mixed", func(_, cost int, r sluice.Result) {
		if !r.Allowed {
			if r.Remaining >= cost {
				t.Errorf("cost %d refused with %d remaining and no refund", cost, r.Remaining)
			}
			return
		}
		count := stressQuota.Rate - r.Remaining
		mu.Lock()
		defer mu.Unlock()
		if seen[count] {
			t.Errorf("two admissions report the count %d", count)
		}
		seen[count], top, admitted = true, max(top, count), admitted+cost
	})
	u, err := s.Usage(context.Background(), "mixed")
	if err != nil || len(u) != 1 || u[0].Count != int64(admitted) || admitted != stressQuota.Rate || top != admitted {
		t.Errorf("ledger %+v, %v; admitted %d, highest count reported %d; want all %d", u, err, admitted, top, stressQuota.Rate)
	}
}

// TestConcurrentRefundsKeepTheLedgerExact: admissions racing refunds of
// earlier admissions on a full quota never take the count past the quota
// (the table's CHECK would fail the statement) and leave the ledger at
// exactly what was admitted less what was refunded.
func TestConcurrentRefundsKeepTheLedgerExact(t *testing.T) {
	s, _ := open(t, clocktest.At(time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC)))
	var net, admissions atomic.Int64
	spendConcurrently(t, s, "refunds", func(i, cost int, r sluice.Result) {
		if !r.Allowed {
			return
		}
		admissions.Add(1)
		net.Add(int64(cost))
		if i%2 == 0 {
			if err := s.RefundN(context.Background(), "refunds", stressQuota, cost); err != nil {
				t.Error(err)
				return
			}
			net.Add(-int64(cost))
		}
	})
	u, err := s.Usage(context.Background(), "refunds")
	if err != nil || len(u) != 1 || u[0].Count != net.Load() || u[0].Count > int64(stressQuota.Rate) {
		t.Errorf("ledger %+v, %v; want one period of %d (admitted less refunded), at most %d", u, err, net.Load(), stressQuota.Rate)
	}
	t.Logf("%d admissions, %d units held at the end", admissions.Load(), net.Load())
}
