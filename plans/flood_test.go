package plans_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/plans"
)

// floodSource knows the tenants of known and answers them at once; every
// other name is unknown, and its read waits for gate (when set). It counts
// reads and the most that ran at once.
type floodSource struct {
	known map[string]plans.Tenant
	gate  chan struct{}

	reads, now, most atomic.Int64
}

func (s *floodSource) Tenant(_ context.Context, name string) (plans.Tenant, error) {
	s.reads.Add(1)
	if t, ok := s.known[name]; ok {
		return t, nil
	}
	n := s.now.Add(1)
	defer s.now.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	if s.gate != nil {
		<-s.gate
	}
	return plans.Tenant{}, nil
}

func acmeSource() *floodSource {
	return &floodSource{known: map[string]plans.Tenant{"acme": {Limits: map[string]sluice.Limit{"d.k": perMin(7)}}}}
}

// A flood of names never seen, each on its own request, reads the Source
// at most MaxReads at once: a lookup that finds every read slot busy reads
// nothing, answers no tenant limit at once and keeps nothing, so the name
// is read on a later lookup. A tenant held meanwhile is answered without
// waiting, and its refresh past the staleness is not held up by the flood.
func TestFloodOfNewTenantsReadsAtMostMaxReadsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxReads = 8
		src := acmeSource()
		clk := clocktest.New()
		c := plans.NewCache(src, plans.Config{Clock: clk, Staleness: time.Second, MaxReads: maxReads})
		if lim, _ := c.Limit(ctx, "acme", "d.k"); lim.Rate != 7 {
			t.Fatalf("acme: rate %d, want 7", lim.Rate)
		}
		clk.Advance(time.Second / 2) // the flood's records are fresh when acme's is stale
		src.gate = make(chan struct{})
		var wg sync.WaitGroup
		var answered atomic.Int64
		for i := range 1000 {
			wg.Go(func() {
				if _, ok := c.Limit(ctx, fmt.Sprint("flood-", i), "d.k"); ok {
					t.Errorf("flood-%d has a limit", i)
				}
				answered.Add(1)
			})
		}
		synctest.Wait() // every lookup has either returned or is reading
		if got := src.most.Load(); got > maxReads {
			t.Errorf("%d reads at once, want at most %d", got, maxReads)
		}
		if got := answered.Load(); got != 1000-maxReads {
			t.Errorf("%d lookups answered while the reads hang, want %d (the rest answer at once)", got, 1000-maxReads)
		}
		if lim, _ := c.Limit(ctx, "acme", "d.k"); lim.Rate != 7 {
			t.Errorf("acme during the flood: rate %d, want 7", lim.Rate)
		}
		clk.Advance(time.Second / 2)
		before := src.reads.Load()
		if lim, _ := c.Limit(ctx, "acme", "d.k"); lim.Rate != 7 || src.reads.Load() != before+1 {
			t.Errorf("acme past the staleness during the flood: rate %d, %d reads, want 7 and a reread", lim.Rate, src.reads.Load()-before)
		}
		close(src.gate)
		wg.Wait()
		if got := src.reads.Load(); got != before+1 {
			t.Fatalf("%d reads after the flood, want %d", got, before+1)
		}
		for i := range 1000 {
			c.Limit(ctx, fmt.Sprint("flood-", i), "d.k")
		}
		if got, want := src.reads.Load(), before+1+1000-maxReads; got != want {
			t.Errorf("%d reads, want %d: the names read during the flood are kept, the others read now", got, want)
		}
	})
}

// Names the Source does not know are kept for the staleness, like known
// ones, but in a table of their own: a flood of them never pushes out a
// known tenant.
func TestUnknownTenantsDoNotEvictKnownOnes(t *testing.T) {
	src := acmeSource()
	c := plans.NewCache(src, plans.Config{Clock: clocktest.New(), MaxTenants: 3, MaxUnknownTenants: 5})
	c.Limit(ctx, "acme", "d.k")
	for i := range 100 {
		c.Limit(ctx, fmt.Sprint("nobody-", i), "d.k")
	}
	before := src.reads.Load()
	if lim, _ := c.Limit(ctx, "acme", "d.k"); lim.Rate != 7 || src.reads.Load() != before {
		t.Errorf("acme after 100 unknown names: rate %d, %d reads, want 7 from memory", lim.Rate, src.reads.Load()-before)
	}
}

// A failing Source logs one line per interval, however many reads fail,
// and the next line counts the failures since the one before.
func TestFailingSourceLogsOneLinePerInterval(t *testing.T) {
	var buf testlog.Buffer
	clk := clocktest.New()
	src := &countingSource{err: errors.New("database down")}
	c := plans.NewCache(src, plans.Config{Clock: clk, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	for i := range 25 {
		for j := range 10 {
			c.Limit(ctx, fmt.Sprint("t", i, "-", j), "d.k")
		}
		clk.Advance(time.Second)
	}
	if n := src.reads.Load(); n != 250 {
		t.Fatalf("%d reads, want 250", n)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines over 25 s of failures, want 3 (at 0, 10 and 20 s):\n%s", len(lines), buf.String())
	}
	for i, want := range []string{"failures=1 ", "failures=100 ", "failures=100 "} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "database down") {
			t.Errorf("line %d = %s, want %q and the error", i, lines[i], want)
		}
	}
}

// BenchmarkHeldTenant is one lookup of a tenant whose record is held.
func BenchmarkHeldTenant(b *testing.B) {
	c := plans.NewCache(acmeSource(), plans.Config{Staleness: time.Hour})
	c.Limit(ctx, "acme", "d.k")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Limit(ctx, "acme", "d.k"); !ok {
			b.Fatal("no limit")
		}
	}
}

// BenchmarkFloodOfNewTenants is lookups of a new name each, from many
// goroutines at once, over a Source whose every read takes a millisecond
// (a database's round trip): reads/s is what reaches the Source.
func BenchmarkFloodOfNewTenants(b *testing.B) {
	src := &slowSource{}
	c := plans.NewCache(src, plans.Config{})
	var next atomic.Int64
	b.SetParallelism(32)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Limit(ctx, fmt.Sprint("flood-", next.Add(1)), "d.k")
		}
	})
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(src.reads.Load())/secs, "reads/s")
	b.ReportMetric(float64(b.N)/secs, "lookups/s")
}

// slowSource knows no tenant and takes a millisecond to say so.
type slowSource struct{ reads atomic.Int64 }

func (s *slowSource) Tenant(context.Context, string) (plans.Tenant, error) {
	s.reads.Add(1)
	time.Sleep(time.Millisecond) // the database's round trip, in a benchmark only
	return plans.Tenant{}, nil
}

// A name held in either table costs its own bytes, not those of the string
// it was cut from: a tenant taken from a larger request field (a header of
// up to a megabyte, a token after "Bearer ") must not keep that field alive
// for as long as the name is held, or MaxUnknownTenants would bound entries,
// not memory.
func TestHeldNamesDoNotPinTheStringsTheyWereCutFrom(t *testing.T) {
	const names, field = 64, 1 << 20
	for _, tc := range []struct {
		name string
		src  plans.Source
	}{
		{"unknown", &countingSource{}},
		{"known", &countingSource{t: plans.Tenant{Plan: "p"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := plans.NewCache(tc.src, plans.Config{Clock: clocktest.New()})
			before := heapInUse()
			for i := range names {
				big := fmt.Sprintf("%08d", i) + strings.Repeat("x", field)
				c.Limit(ctx, big[:8], "d.k")
			}
			held := heapInUse() - before
			runtime.KeepAlive(c)
			if held > names*field/4 {
				t.Errorf("%d names of 8 bytes held %d MiB: each pins the %d KiB field it was cut from", names, held>>20, field>>10)
			}
		})
	}
}

// heapInUse is the heap's bytes in use after a collection.
func heapInUse() int {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int(m.HeapInuse)
}

// Invalidate makes a held tenant read again, but as the known tenant it
// is: while a flood of new names holds every read slot, the lookup after
// Invalidate (of that tenant, or of all after a plan's change) still reads
// it and gets its limit, rather than no tenant limit as for a name never
// seen.
func TestInvalidatedTenantIsReadDuringAFlood(t *testing.T) {
	for _, which := range []string{"acme", ""} {
		synctest.Test(t, func(t *testing.T) {
			const maxReads = 8
			src := acmeSource()
			c := plans.NewCache(src, plans.Config{Clock: clocktest.New(), MaxReads: maxReads})
			c.Limit(ctx, "acme", "d.k")
			src.gate = make(chan struct{})
			var wg sync.WaitGroup
			for i := range maxReads {
				wg.Go(func() { c.Limit(ctx, fmt.Sprint("flood-", i), "d.k") })
			}
			synctest.Wait() // every read slot is busy
			c.Invalidate(which)
			before := src.reads.Load()
			if lim, _ := c.Limit(ctx, "acme", "d.k"); lim.Rate != 7 || src.reads.Load() != before+1 {
				t.Errorf("Invalidate(%q) during a flood, then acme: rate %d, %d reads; want 7 from one read", which, lim.Rate, src.reads.Load()-before)
			}
			close(src.gate)
			wg.Wait()
		})
	}
}

// A name held as unknown that this process's admin API then gives a plan
// (Invalidate of that name) is read at once as well, flood or not: the
// change takes effect at once in this process, as Invalidate says.
func TestInvalidatedUnknownNameIsReadDuringAFlood(t *testing.T) {
	for _, held := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) { invalidateUnknownDuringAFlood(t, held) })
	}
}

// invalidateUnknownDuringAFlood gives newco a plan while a flood holds
// every read slot, after a lookup held it as unknown if held, and checks
// that the lookup after Invalidate gets the plan's limit.
func invalidateUnknownDuringAFlood(t *testing.T, held bool) {
	const maxReads = 8
	src := acmeSource()
	c := plans.NewCache(src, plans.Config{Clock: clocktest.New(), MaxReads: maxReads})
	if held {
		if _, ok := c.Limit(ctx, "newco", "d.k"); ok {
			t.Fatal("newco has a limit before it has a plan")
		}
	}
	src.known["newco"] = plans.Tenant{Plan: "p", Limits: map[string]sluice.Limit{"d.k": perMin(5)}}
	src.gate = make(chan struct{})
	var wg sync.WaitGroup
	for i := range maxReads {
		wg.Go(func() { c.Limit(ctx, fmt.Sprint("flood-", i), "d.k") })
	}
	synctest.Wait() // every read slot is busy
	c.Invalidate("newco")
	if lim, _ := c.Limit(ctx, "newco", "d.k"); lim.Rate != 5 {
		t.Errorf("newco (held before: %v) given a plan during a flood, then invalidated: rate %d, want its plan's 5", held, lim.Rate)
	}
	close(src.gate)
	wg.Wait()
}
