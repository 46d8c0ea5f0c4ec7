package failsafe_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// downable is a store (a memstore) that fails every decision while down.
type downable struct {
	sluice.Limiter
	down atomic.Bool
}

func (d *downable) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if d.down.Load() {
		return sluice.Result{}, errDown
	}
	return d.Limiter.AllowN(ctx, key, lim, cost)
}

// TestLocalModeSpendsAShareOfWhatTheStoreLeft: in Local mode, a key for
// which the store last reported 10 units left gets, while the store is
// down, a share of those 10 (5 with 2 nodes), not a share of the whole
// limit (50): a quota nearly spent before an outage stays nearly spent. A
// key the store never reported on gets the share of the limit; once the
// store's report has expired (its window ended), so does the first key.
func TestLocalModeSpendsAShareOfWhatTheStoreLeft(t *testing.T) {
	clock := clocktest.At(time.Unix(1700000000, 0).Truncate(time.Hour).Add(10 * time.Minute))
	store := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	defer store.Close()
	local := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	defer local.Close()
	p := &downable{Limiter: store}
	l, err := failsafe.New(failsafe.Config{Primary: p, Mode: failsafe.Local, Local: local, Nodes: 2,
		Threshold: 3, Backoff: time.Hour, Logger: slog.New(&logs{}), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Hour}
	for range 90 {
		if r, err := l.Allow(ctx, "spent", lim); err != nil || !r.Allowed {
			t.Fatalf("healthy store: %+v %v", r, err)
		}
	}
	p.down.Store(true)
	admitted := func(key string, n int) (got int, last sluice.Result) {
		for range n {
			r, err := l.Allow(ctx, key, lim)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed {
				got++
			}
			last = r
		}
		return got, last
	}
	if got, last := admitted("spent", 60); got != 5 || last.Allowed || last.RetryAfter <= 0 {
		t.Errorf("the store left 10, 2 nodes: %d admitted while down (last %+v), want 5 then denials with a RetryAfter", got, last)
	}
	if got, _ := admitted("fresh", 60); got != 50 {
		t.Errorf("a key the store never reported on: %d admitted, want the share 50", got)
	}
	clock.Advance(time.Hour) // the store's window, and its report, ended
	if got, _ := admitted("spent", 60); got != 50 {
		t.Errorf("after the store's window ended: %d admitted, want the share 50", got)
	}
}

// TestLearnedAllowanceAllocatesNothing: remembering what the store
// reported allocates nothing on a decision.
func TestLearnedAllowanceAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random; run without -race")
	}
	l := localPartitioned(t)
	ctx := context.Background()
	l.Allow(ctx, "k", lim)
	if n := testing.AllocsPerRun(100, func() { l.Allow(ctx, "k", lim) }); n != 0 {
		t.Errorf("%v allocations per decision, want 0", n)
	}
}

// localPartitioned is a closed breaker in Local mode over a primary that
// admits everything, partitioned 16 ways for 2 nodes, as sluice serve's
// local rules make it; its local store is closed when tb ends.
func localPartitioned(tb testing.TB) *failsafe.Limiter {
	tb.Helper()
	clock := clocktest.New()
	local := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	tb.Cleanup(func() { local.Close() })
	l, err := failsafe.New(failsafe.Config{Primary: &primary{}, Mode: failsafe.Local, Local: local, Nodes: 2,
		Partitions: 16, Logger: slog.New(&logs{}), Clock: clock})
	if err != nil {
		tb.Fatal(err)
	}
	return l
}
