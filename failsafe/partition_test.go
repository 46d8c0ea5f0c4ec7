package failsafe_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// keyedPrimary fails the calls of the keys in bad (as a hot key's calls
// time out) and admits the others, counting calls per outcome.
type keyedPrimary struct {
	bad           func(key string) bool
	failed, asked atomic.Int64
}

func (p *keyedPrimary) AllowN(_ context.Context, key string, _ sluice.Limit, _ int) (sluice.Result, error) {
	if p.bad(key) {
		p.failed.Add(1)
		return sluice.Result{}, context.DeadlineExceeded
	}
	p.asked.Add(1)
	return sluice.Result{Allowed: true, Remaining: 41}, nil
}

func partitionedGroup(t *testing.T, p sluice.Limiter, clock sluice.Clock) *failsafe.Group {
	t.Helper()
	g, err := failsafe.NewGroup(failsafe.Config{Primary: p, Partitions: 16, Threshold: 3,
		Backoff: time.Second, Logger: slog.New(&logs{}), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestHotKeyFailuresLeaveOtherKeysOnThePrimary: one key whose every call
// fails (a hot key timing out) opens its own partition only; a key of
// another partition keeps being decided by the primary, while the hot key
// is answered by the failure mode without calling the primary. With one
// partition (Partitions 1, the old breaker) the same failures send the
// other key to the failure mode too.
func TestHotKeyFailuresLeaveOtherKeysOnThePrimary(t *testing.T) {
	ctx := context.Background()
	for _, parts := range []int{16, 1} {
		t.Run(strconv.Itoa(parts), func(t *testing.T) {
			p := &keyedPrimary{bad: func(k string) bool { return k == "hot" }}
			g, err := failsafe.NewGroup(failsafe.Config{Primary: p, Mode: failsafe.Closed, Partitions: parts, Threshold: 3,
				Backoff: time.Second, Logger: slog.New(&logs{}), Clock: clocktest.New()})
			if err != nil {
				t.Fatal(err)
			}
			cold := "cold"
			for i := 0; failsafe.PartitionOf(g, cold) == failsafe.PartitionOf(g, "hot") && parts > 1; i++ {
				cold = "cold" + strconv.Itoa(i)
			}
			l := g.Limiter(failsafe.Closed)
			for range 100 {
				if _, err := l.Allow(ctx, "hot", lim); !errors.Is(err, failsafe.ErrUnavailable) {
					t.Fatalf("hot key: %v, want ErrUnavailable", err)
				}
			}
			if got := p.failed.Load(); got != 3 {
				t.Errorf("the primary was called %d times for the hot key, want 3 (Threshold): its partition did not open", got)
			}
			refused := 0
			for range 100 {
				res, fellBack, err := l.Decide(ctx, cold, lim, 1)
				if fellBack || err != nil || !res.Allowed {
					refused++
				}
			}
			switch {
			case parts > 1 && (refused != 0 || p.asked.Load() != 100 || !g.Available() || g.OpenPartitions() != 1):
				t.Errorf("%d partitions: the other key was refused %d of 100 times, the primary asked %d times (available %v, open partitions %d); want 0, 100, true, 1",
					parts, refused, p.asked.Load(), g.Available(), g.OpenPartitions())
			case parts == 1 && refused != 100:
				t.Errorf("one breaker: the other key was refused %d of 100 times, want 100 (the check of the test itself)", refused)
			}
		})
	}
}

// TestDeadStoreOpensEveryPartition: a store that fails for every key opens
// the Group's breaker (every key then skips the primary) after at most the
// failures that can spread over the partitions without a quarter of them
// opening, and its probe, once the store is back, closes every partition.
func TestDeadStoreOpensEveryPartition(t *testing.T) {
	ctx := context.Background()
	var down atomic.Bool
	down.Store(true)
	p := &keyedPrimary{bad: func(string) bool { return down.Load() }}
	clock := clocktest.New()
	g := partitionedGroup(t, p, clock)
	l := g.Limiter(failsafe.Open)
	// 16 partitions, quorum 4, Threshold 3: at most 3 open partitions
	// (3 failures each) and 13 with 2 failures before the 4th opens.
	const most = 3*3 + 13*2 + 1
	i := 0
	for ; g.Available() && i < 10_000; i++ {
		l.Allow(ctx, "k"+strconv.Itoa(i), lim)
	}
	if g.Available() || p.failed.Load() > most {
		t.Fatalf("after %d decisions and %d failed calls the Group's breaker is open: %v; want open within %d failed calls", i, p.failed.Load(), !g.Available(), most)
	}
	before := p.failed.Load()
	for j := range 1000 {
		if _, fellBack, _ := l.Decide(ctx, "other"+strconv.Itoa(j), lim, 1); !fellBack {
			t.Fatal("a decision went to the primary while the Group's breaker was open")
		}
	}
	if p.failed.Load() != before {
		t.Fatalf("the open Group still called the primary %d times", p.failed.Load()-before)
	}
	down.Store(false)
	clock.Advance(2 * time.Second)
	if _, fellBack, err := l.Decide(ctx, "probe", lim, 1); fellBack || err != nil {
		t.Fatalf("the probe after the back-off: fell back %v, %v", fellBack, err)
	}
	if !g.Available() || g.OpenPartitions() != 0 {
		t.Fatalf("after a good probe: available %v, %d open partitions; want true, 0", g.Available(), g.OpenPartitions())
	}
	for j := range 100 {
		if _, fellBack, _ := l.Decide(ctx, "k"+strconv.Itoa(j), lim, 1); fellBack {
			t.Fatalf("key k%d still fell back after the store came back", j)
		}
	}
}

// TestPartitionedDecisionsAllocateNothing: hashing the key to its
// partition allocates nothing, breaker closed or a partition open.
func TestPartitionedDecisionsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random; run without -race")
	}
	p := &keyedPrimary{bad: func(k string) bool { return k == "hot" }}
	g := partitionedGroup(t, p, clocktest.New())
	l := g.Limiter(failsafe.Open)
	ctx := context.Background()
	for range 3 {
		l.Allow(ctx, "hot", lim)
	}
	for _, key := range []string{"hot", "cold"} {
		if n := testing.AllocsPerRun(100, func() { l.AllowN(ctx, key, lim, 1) }); n != 0 {
			t.Errorf("%s: %v allocations per decision, want 0", key, n)
		}
	}
}

// TestFlappingPartitionLogsBackOncePerInterval: a hot key whose partition
// opens and closes again and again (its store calls fail, then work, in
// turn) logs "store is back" at most once per LogInterval, not once per
// flap; the decisions of the silent flaps are counted in the next line.
func TestFlappingPartitionLogsBackOncePerInterval(t *testing.T) {
	var bad atomic.Bool
	p := &keyedPrimary{bad: func(string) bool { return bad.Load() }}
	clock := clocktest.New()
	lg := &logs{}
	g, err := failsafe.NewGroup(failsafe.Config{Primary: p, Partitions: 16, Threshold: 3, Backoff: time.Second,
		LogInterval: 10 * time.Second, Logger: slog.New(lg), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	l := g.Limiter(failsafe.Open)
	ctx := context.Background()
	for range 8 { // 8 flaps within 10 s
		bad.Store(true)
		for range 3 {
			l.Allow(ctx, "hot", lim)
		}
		bad.Store(false)
		clock.Advance(time.Second)
		if _, fellBack, _ := l.Decide(ctx, "hot", lim, 1); fellBack {
			t.Fatal("the probe after the back-off fell back")
		}
	}
	if n := lg.count("store is back"); n != 1 {
		t.Errorf("%d 'store is back' lines for 8 flaps within one LogInterval, want 1", n)
	}
	if got := g.FallbackDecisions(); got != 24 {
		t.Errorf("fallback decisions %d, want 24", got)
	}
}

// A negative Partitions or Nodes is refused by name: before, each silently
// became 1 (one breaker for every key, the whole limit to each node), the
// opposite of what a config asking for a split meant. Zero is the default.
func TestNegativePartitionsOrNodesRefused(t *testing.T) {
	p := &keyedPrimary{bad: func(string) bool { return false }}
	for _, cfg := range []failsafe.Config{{Partitions: -16}, {Nodes: -4}} {
		cfg.Primary, cfg.Logger = p, slog.New(&logs{})
		_, err := failsafe.NewGroup(cfg)
		if err == nil || !strings.Contains(err.Error(), "-") {
			t.Errorf("%+v: NewGroup error %v, want a refusal naming the value", cfg, err)
		}
	}
	if _, err := failsafe.NewGroup(failsafe.Config{Primary: p, Logger: slog.New(&logs{})}); err != nil {
		t.Errorf("zero Partitions and Nodes (the defaults): %v", err)
	}
}

// TestTooManyPartitionsRefused: Config.Partitions is the size of a table
// made once per Group, so a Group refuses more than 1024 of them with an
// error that names the figure and the bound, rather than allocate what a
// config asks; 1024 itself is a Group whose keys spread over its
// partitions.
func TestTooManyPartitionsRefused(t *testing.T) {
	p := &keyedPrimary{bad: func(string) bool { return false }}
	for _, n := range []int{1025, 1 << 30} {
		_, err := failsafe.NewGroup(failsafe.Config{Primary: p, Partitions: n, Logger: slog.New(&logs{})})
		if err == nil || !strings.Contains(err.Error(), strconv.Itoa(n)) || !strings.Contains(err.Error(), "1024") {
			t.Errorf("Partitions %d: NewGroup error %v, want a refusal naming %d and the bound 1024", n, err, n)
		}
	}
	g, err := failsafe.NewGroup(failsafe.Config{Primary: p, Partitions: 1024, Logger: slog.New(&logs{})})
	if err != nil {
		t.Fatalf("Partitions 1024: %v", err)
	}
	seen := map[int]bool{}
	for i := range 4096 {
		seen[failsafe.PartitionOf(g, "k"+strconv.Itoa(i))] = true
	}
	if len(seen) < 900 {
		t.Errorf("4096 keys fell in %d of 1024 partitions, want most of them", len(seen))
	}
}
