package pgstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// stressQuota is the quota the stress tests race on: small, so that most
// attempts land near or past it.
var stressQuota = sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Hour}

// TestConcurrentMixedCostsReportTheirOwnCounts: many goroutines spending
// costs of 1 to 4 on one quota fill it exactly; every admission reports a
// count no other admission reports (they are serialized on the row), the
// highest of them the ledger's; every refusal reports less room than its
// cost, as nothing is refunded.
func TestConcurrentMixedCostsReportTheirOwnCounts(t *testing.T) {
	s, _ := open(t, clocktest.At(time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC)))
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[int]bool{}
	top, admitted := 0, 0
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 40 {
				cost := (g+i)%4 + 1
				r, err := s.AllowN(ctx, "mixed", stressQuota, cost)
				if err != nil {
					t.Error(err)
					return
				}
				if !r.Allowed {
					if r.Remaining >= cost {
						t.Errorf("cost %d refused with %d remaining and no refund", cost, r.Remaining)
					}
					continue
				}
				count := stressQuota.Rate - r.Remaining
				mu.Lock()
				if seen[count] {
					t.Errorf("two admissions report the count %d", count)
				}
				seen[count], top, admitted = true, max(top, count), admitted+cost
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	u, err := s.Usage(ctx, "mixed")
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
	ctx := context.Background()
	var net, admissions atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 40 {
				cost := (g+i)%4 + 1
				r, err := s.AllowN(ctx, "refunds", stressQuota, cost)
				if err != nil {
					t.Error(err)
					return
				}
				if !r.Allowed {
					continue
				}
				admissions.Add(1)
				net.Add(int64(cost))
				if i%2 == 0 {
					if err := s.RefundN(ctx, "refunds", stressQuota, cost); err != nil {
						t.Error(err)
						return
					}
					net.Add(-int64(cost))
				}
			}
		})
	}
	wg.Wait()
	u, err := s.Usage(ctx, "refunds")
	if err != nil || len(u) != 1 || u[0].Count != net.Load() || u[0].Count > int64(stressQuota.Rate) {
		t.Errorf("ledger %+v, %v; want one period of %d (admitted less refunded), at most %d", u, err, net.Load(), stressQuota.Rate)
	}
	t.Logf("%d admissions, %d units held at the end", admissions.Load(), net.Load())
}
