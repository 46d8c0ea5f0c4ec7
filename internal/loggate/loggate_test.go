package loggate_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/loggate"
)

// A flood on many goroutines within one interval writes exactly one line,
// and the gate counts every other: the compare-and-swap lets no second
// line through when two goroutines find the interval over at once. A line
// refused while the first is being let through may be reported by that
// first line rather than the next; none is lost or counted twice, so the
// first line's count and the next interval's line's add up to the lines
// refused.
func TestFloodOnManyGoroutinesLetsOneLineThrough(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	g := &loggate.Gate{Every: time.Hour, Now: func() time.Time { return time.Unix(0, now.Load()) }}
	const workers, each = 8, 1000
	var allowed, reported atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if ok, skipped := g.Allow(); ok {
					allowed.Add(1)
					reported.Add(int64(skipped.N))
				}
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n != 1 {
		t.Errorf("%d lines let through in one interval, want 1", n)
	}
	now.Add(int64(time.Hour))
	ok, skipped := g.Allow()
	if !ok {
		t.Fatal("the next interval's first line was not let through")
	}
	if got, want := reported.Load()+int64(skipped.N), int64(workers*each-1); got != want {
		t.Errorf("lines reported not logged: %d in all, want the %d refused", got, want)
	}
}

// A Gate with no interval (its zero value, or a negative Every) bounds
// nothing and counts nothing.
func TestNoIntervalLetsEveryLineThrough(t *testing.T) {
	for _, every := range []time.Duration{0, -time.Second} {
		g := &loggate.Gate{Every: every}
		for i := range 100 {
			if ok, skipped := g.Allow(); !ok || skipped.N != 0 {
				t.Fatalf("Every %v, line %d: Allow = %v, %+v; want true and nothing skipped", every, i, ok, skipped)
			}
		}
	}
}

// Attrs adds the count of lines not written only when there are some.
func TestSkippedAttrsOnlyWhenLinesWereSkipped(t *testing.T) {
	args := []any{"upstream", "api"}
	if got := (loggate.Skipped{}).Attrs(args); len(got) != 2 {
		t.Errorf("nothing skipped: %v, want the args alone", got)
	}
	since := time.Unix(1, 0)
	got := loggate.Skipped{N: 3, Since: since}.Attrs(args)
	if len(got) != 6 || got[2] != "not_logged" || got[3] != int64(3) || got[4] != "not_logged_since" || got[5] != since {
		t.Errorf("3 skipped: %v, want the args, not_logged 3 and not_logged_since", got)
	}
}

// Past its interval the gate lets the next line through with the count of
// those it held back and when the last line was written; within it, none.
func TestNextIntervalsLineCountsTheLinesHeldBack(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0
	g := &loggate.Gate{Every: 10 * time.Second, Now: func() time.Time { return now }}
	if ok, skipped := g.Allow(); !ok || skipped.N != 0 {
		t.Fatalf("the first line: %v, %+v; want written, nothing skipped", ok, skipped)
	}
	for range 5 {
		now = now.Add(time.Second)
		if ok, _ := g.Allow(); ok {
			t.Fatalf("a line %v after the first, within 10 s, was let through", now.Sub(t0))
		}
	}
	now = t0.Add(10 * time.Second)
	ok, skipped := g.Allow()
	if !ok || skipped.N != 5 || !skipped.Since.Equal(t0) {
		t.Fatalf("the line 10 s on: %v, %+v; want written with 5 skipped since %v", ok, skipped, t0)
	}
	if ok, _ := g.Allow(); ok {
		t.Error("a second line in the new interval was let through")
	}
}
