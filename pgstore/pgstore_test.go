package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/pgstore"
)

// open returns a store on a fresh schema of the shared server, with its
// migrations applied, reading time from clock.
func open(t testing.TB, clock sluice.Clock) (*pgstore.Store, string) {
	t.Helper()
	return openURL(t, pgtest.Schema(t), clock)
}

// openTx begins a transaction on a connection of its own to url and runs
// sql in it with args: the locks it takes are held until the test commits
// the transaction or ends (which rolls it back and closes the connection).
func openTx(t *testing.T, url, sql string, args ...any) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := pgtest.Connect(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
	return tx
}

var hour = sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Hour}

// TestConformance runs the conformance suite on real PostgreSQL for the
// algorithm the store serves, the fixed window; the other algorithms'
// subtests are skipped, as ValidateLimit refuses them
// (TestRefusesAlgorithmsItDoesNotServe). The suite's bad-input part ends on a
// token bucket, so the store's own TestBadInput stands in for it.
func TestConformance(t *testing.T) {
	newStore := func(t *testing.T, clock sluice.Clock) sluice.Limiter {
		if !strings.Contains(t.Name(), "/fixed_window") {
			t.Skip("pgstore serves fixed_window only; ValidateLimit refuses the others")
		}
		s, _ := open(t, clock)
		return s
	}
	t.Run("steps", func(t *testing.T) { storetest.RunSteps(t, newStore, storetest.Options{}) })
	t.Run("keys-independent", func(t *testing.T) { storetest.RunKeysIndependent(t, newStore) })
	t.Run("concurrent-one-key", func(t *testing.T) { storetest.RunConcurrent(t, newStore, 64) })
	t.Run("refund", func(t *testing.T) { storetest.RunRefund(t, newStore) })
	t.Run("peek", func(t *testing.T) { storetest.RunPeek(t, newStore) })
}

// TestRefusesAlgorithmsItDoesNotServe: every algorithm but the fixed window,
// and a period PostgreSQL's microsecond timestamps cannot hold, is refused
// by ValidateLimit without a server and by AllowN, as bad input.
func TestRefusesAlgorithmsItDoesNotServe(t *testing.T) {
	s, _ := open(t, clocktest.New())
	for _, a := range sluice.Algorithms() {
		lim := sluice.Limit{Algorithm: a, Rate: 10, Period: time.Minute, Burst: 10}
		err := pgstore.ValidateLimit(lim)
		if a == sluice.FixedWindow {
			if err != nil {
				t.Errorf("ValidateLimit(%v) = %v, want nil", lim, err)
			}
			continue
		}
		if !errors.Is(err, sluice.ErrInvalidLimit) {
			t.Errorf("ValidateLimit(%v) = %v, want ErrInvalidLimit", lim, err)
		}
		if _, err := s.AllowN(context.Background(), "k", lim, 1); !errors.Is(err, sluice.ErrBadInput) {
			t.Errorf("AllowN under %v: %v, want bad input", lim, err)
		}
	}
	odd := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: 1500 * time.Nanosecond}
	if err := s.ValidateLimit(odd); !errors.Is(err, sluice.ErrInvalidLimit) {
		t.Errorf("ValidateLimit(%v) = %v, want ErrInvalidLimit", odd, err)
	}
}

// TestBadInput: bad keys, costs and limits are errors wrapping the right
// sentinel, never denials; a key of MaxKeyLen bytes of any value (NUL,
// invalid UTF-8) is served, apart from a key it shares a prefix with.
func TestBadInput(t *testing.T) {
	s, _ := open(t, clocktest.New())
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		key  string
		lim  sluice.Limit
		cost int
		want error
	}{
		{"empty key", "", hour, 1, sluice.ErrInvalidKey},
		{"oversized key", strings.Repeat("x", sluice.MaxKeyLen+1), hour, 1, sluice.ErrInvalidKey},
		{"zero cost", "k", hour, 0, sluice.ErrInvalidCost},
		{"negative cost", "k", hour, -3, sluice.ErrInvalidCost},
		{"cost above the quota", "k", hour, 11, sluice.ErrCostExceedsCapacity},
		{"zero rate", "k", sluice.Limit{Algorithm: sluice.FixedWindow, Period: time.Hour}, 1, sluice.ErrInvalidLimit},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := s.AllowN(ctx, tt.key, tt.lim, tt.cost)
			if !errors.Is(err, tt.want) || !errors.Is(err, sluice.ErrBadInput) || r.Allowed {
				t.Errorf("AllowN = %+v, %v; want an error wrapping %v", r, err, tt.want)
			}
			if tt.want == sluice.ErrInvalidKey || tt.want == sluice.ErrInvalidLimit {
				if _, err := s.Peek(ctx, tt.key, tt.lim); !errors.Is(err, tt.want) {
					t.Errorf("Peek: %v, want %v", err, tt.want)
				}
			}
			if err := s.RefundN(ctx, tt.key, tt.lim, tt.cost); !errors.Is(err, tt.want) {
				t.Errorf("RefundN: %v, want %v", err, tt.want)
			}
		})
	}
	long := []byte(strings.Repeat("\x00\xff", sluice.MaxKeyLen/2))
	a, b := string(long), string(long[:len(long)-1])+"x"
	if r, err := s.AllowN(ctx, a, hour, 10); err != nil || !r.Allowed {
		t.Fatalf("AllowN(a key of MaxKeyLen bytes) = %+v, %v", r, err)
	}
	if r, err := s.AllowN(ctx, b, hour, 10); err != nil || !r.Allowed {
		t.Fatalf("AllowN(another key sharing all but its last byte) = %+v, %v; want its own quota", r, err)
	}
}

// TestLedgerKeepsEveryPeriod: the usage of a period stays readable after it
// ends, one row per period with its bounds, net of refunds.
func TestLedgerKeepsEveryPeriod(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clock := clocktest.At(start.Add(5 * time.Minute))
	s, _ := open(t, clock)
	ctx := context.Background()
	spend := func(n int) {
		t.Helper()
		if r, err := s.AllowN(ctx, "tenant:7", hour, n); err != nil || !r.Allowed {
			t.Fatalf("AllowN(%d) = %+v, %v", n, r, err)
		}
	}
	spend(3)
	spend(4)
	if err := s.RefundN(ctx, "tenant:7", hour, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	spend(5)
	clock.Advance(3 * time.Hour) // an idle period leaves no row
	spend(1)
	got, err := s.Usage(ctx, "tenant:7")
	if err != nil {
		t.Fatal(err)
	}
	want := []pgstore.Period{
		{Start: start, End: start.Add(time.Hour), Count: 6, Quota: 10},
		{Start: start.Add(time.Hour), End: start.Add(2 * time.Hour), Count: 5, Quota: 10},
		{Start: start.Add(4 * time.Hour), End: start.Add(5 * time.Hour), Count: 1, Quota: 10},
	}
	if len(got) != len(want) {
		t.Fatalf("Usage = %+v, want %+v", got, want)
	}
	for i := range want {
		g := got[i]
		if !g.Start.Equal(want[i].Start) || !g.End.Equal(want[i].End) || g.Count != want[i].Count || g.Quota != want[i].Quota {
			t.Errorf("period %d = %+v, want %+v", i, g, want[i])
		}
	}
}

// TestRefundNeverBelowZero: refunding more than was spent leaves the
// period's count at zero, not below, so the quota is a fresh one's.
func TestRefundNeverBelowZero(t *testing.T) {
	s, _ := open(t, clocktest.New())
	ctx := context.Background()
	if _, err := s.AllowN(ctx, "k", hour, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.RefundN(ctx, "k", hour, 9); err != nil {
		t.Fatal(err)
	}
	if err := s.RefundN(ctx, "never-used", hour, 9); err != nil {
		t.Fatalf("RefundN of an unused key: %v", err)
	}
	u, err := s.Usage(ctx, "k")
	if err != nil || len(u) != 1 || u[0].Count != 0 {
		t.Fatalf("Usage after over-refunding = %+v, %v; want one period of count 0", u, err)
	}
	if r, _ := s.AllowN(ctx, "k", hour, 10); !r.Allowed {
		t.Errorf("after refunding everything, the whole quota is denied")
	}
	if r, _ := s.AllowN(ctx, "k", hour, 1); r.Allowed {
		t.Errorf("refunds raised the quota above a fresh one")
	}
}

// TestLoweredQuotaDeniesAndReportsHonestly: when the quota in force drops
// below what a period has used, a decision is denied with remaining 0 and
// the period's end, and a peek says the key is over its limit.
func TestLoweredQuotaDeniesAndReportsHonestly(t *testing.T) {
	clock := clocktest.At(time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC))
	s, _ := open(t, clock)
	ctx := context.Background()
	if r, err := s.AllowN(ctx, "k", hour, 8); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	low := hour
	low.Rate = 5
	want := sluice.Result{RetryAfter: 45 * time.Minute, ResetAfter: 45 * time.Minute}
	if r, err := s.AllowN(ctx, "k", low, 1); err != nil || r != want {
		t.Errorf("AllowN under the lowered quota = %+v, %v; want %+v", r, err, want)
	}
	if r, err := s.Peek(ctx, "k", low); err != nil || r != want {
		t.Errorf("Peek under the lowered quota = %+v, %v; want %+v", r, err, want)
	}
	if r, err := s.AllowN(ctx, "k", hour, 2); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Errorf("AllowN(2) under the first quota again = %+v, %v; want allowed, remaining 0", r, err)
	}
}

// TestDeadlineHonoured: a decision that waits on a row another transaction
// holds returns when its context's deadline passes, with an error wrapping
// context.DeadlineExceeded, not when the lock is released.
func TestDeadlineHonoured(t *testing.T) {
	s, url := open(t, clocktest.New())
	ctx := context.Background()
	if _, err := s.AllowN(ctx, "held", hour, 1); err != nil {
		t.Fatal(err)
	}
	openTx(t, url, "SELECT * FROM sluice_usage FOR UPDATE")
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := s.AllowN(dctx, "held", hour, 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AllowN on a locked row past its deadline: %v, want an error wrapping DeadlineExceeded", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("AllowN returned %v after its deadline of 300ms", d)
	}
}

// TestLedgerExportsPeriodsInOrder: the export lists every key's periods
// that start in the range asked for, in order of their start, with the
// keys as given (any bytes), and stops at the first error its callback
// returns.
func TestLedgerExportsPeriodsInOrder(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clock := clocktest.At(start)
	s, _ := open(t, clock)
	ctx := context.Background()
	for h := range 3 {
		for _, key := range []string{"a", "b\x00\xff"} {
			if r, err := s.AllowN(ctx, key, hour, h+1); err != nil || !r.Allowed {
				t.Fatal(r, err)
			}
		}
		clock.Advance(time.Hour)
	}
	var got []string
	err := s.Ledger(ctx, start.Add(time.Hour), start.Add(3*time.Hour), func(e pgstore.Entry) error {
		got = append(got, fmt.Sprintf("%s %q %d", e.Start.UTC().Format("15:04"), e.Key, e.Count))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || !strings.HasPrefix(got[0], "11:00") || !strings.HasPrefix(got[3], "12:00") ||
		!slices.Contains(got, `11:00 "b\x00\xff" 2`) || !slices.Contains(got, `12:00 "a" 3`) {
		t.Errorf("Ledger(11:00, 13:00) = %q", got)
	}
	stop := errors.New("stop")
	n := 0
	err = s.Ledger(ctx, start, start.Add(3*time.Hour), func(pgstore.Entry) error { n++; return stop })
	if err != stop || n != 1 {
		t.Errorf("Ledger with a callback that fails: %d calls, %v; want 1 call and its error", n, err)
	}
}

// TestSpendCountsInAPeriodTheCallerComputes: a calendar period (15 February
// to 15 March at midnight UTC+1, Berlin's winter time: 28 days, aligned to
// no epoch-based window) is counted and bounded as a window is, and kept in
// the ledger with its own bounds; an empty period and a cost above the
// quota are bad input.
func TestSpendCountsInAPeriodTheCallerComputes(t *testing.T) {
	s, _ := open(t, clocktest.New())
	ctx := context.Background()
	berlin := time.FixedZone("CET", 3600)
	start := time.Date(2026, 2, 15, 0, 0, 0, 0, berlin)
	end := time.Date(2026, 3, 15, 0, 0, 0, 0, berlin)
	for _, tc := range []struct {
		cost, count int64
		admitted    bool
	}{{3, 3, true}, {3, 3, false}, {2, 5, true}} {
		count, ok, err := s.Spend(ctx, "tenant:acme", start, end, 5, tc.cost)
		if err != nil || ok != tc.admitted || count != tc.count {
			t.Fatalf("Spend(%d) = %d, %v, %v; want %d, %v", tc.cost, count, ok, err, tc.count, tc.admitted)
		}
	}
	if err := s.Refund(ctx, "tenant:acme", start, 4); err != nil {
		t.Fatal(err)
	}
	u, err := s.Usage(ctx, "tenant:acme")
	if err != nil || len(u) != 1 || !u[0].Start.Equal(start) || !u[0].End.Equal(end) || u[0].Count != 1 {
		t.Fatalf("Usage = %+v, %v; want the period %v–%v with 1", u, err, start, end)
	}
	if _, _, err := s.Spend(ctx, "k", end, start, 5, 1); !errors.Is(err, sluice.ErrInvalidLimit) {
		t.Errorf("Spend over a period that ends before it starts: %v, want ErrInvalidLimit", err)
	}
	if _, _, err := s.Spend(ctx, "k", start, end, 5, 6); !errors.Is(err, sluice.ErrCostExceedsCapacity) {
		t.Errorf("Spend of 6 on a quota of 5: %v, want ErrCostExceedsCapacity", err)
	}
}
