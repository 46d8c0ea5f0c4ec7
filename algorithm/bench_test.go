package algorithm_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// hotLimit is the limit of the benchmarks: 100 per second, burst 100; a
// request every 5 ms is twice the rate, so about half are denied once the
// allowance is spent.
func hotLimit(alg sluice.Algorithm) sluice.Limit {
	return sluice.Limit{Algorithm: alg, Rate: 100, Period: time.Second, Burst: 100}
}

const hotStep = int64(5 * time.Millisecond)

// warm returns a fresh state of k brought to its steady state under
// hotLimit, that limit, and the instant it reached: for the sliding log,
// two periods at the rate, so that its ring has grown to its largest size.
func warm(tb testing.TB, k kind) (lim sluice.Limit, s state, now int64) {
	lim, s, now = k.with(hotLimit(k.alg)), k.fresh(), t0
	for range 2 * lim.Capacity() {
		s.Take(now, lim, 1)
	}
	if l, ok := s.(*algorithm.SlidingLog); ok {
		// One unit every Period/Rate: a unit in every slot of the log.
		for end := now + 2*int64(lim.Period); now < end; now += int64(lim.Period) / int64(lim.Rate) {
			l.Take(now, lim, 1)
		}
		if l.BufLen() < algorithm.LogEntries {
			tb.Fatalf("sliding log ring holds %d after warming, want at least %d", l.BufLen(), algorithm.LogEntries)
		}
	}
	return lim, s, now
}

func BenchmarkTake(b *testing.B) {
	for _, k := range kinds {
		b.Run(k.name(), func(b *testing.B) {
			lim, s, now := warm(b, k)
			b.ReportAllocs()
			for b.Loop() {
				now += hotStep
				s.Take(now, lim, 1)
			}
		})
	}
}

// takeAllocs returns the allocations of a decision on s, warm at now:
// requests of cost 1, 2 and 3 in turn, hotStep apart, a unit of each
// admitted 3 refunded.
func takeAllocs(lim sluice.Limit, s state, now int64) float64 {
	cost := 0
	return testing.AllocsPerRun(1000, func() {
		now += hotStep
		cost = cost%3 + 1
		if s.Take(now, lim, cost).Allowed && cost == 3 {
			s.Refund(now, lim, 1)
		}
	})
}

// TestTakeAllocs checks that a decision on a warm state allocates nothing.
func TestTakeAllocs(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name(), func(t *testing.T) {
			lim, s, now := warm(t, k)
			if allocs := takeAllocs(lim, s, now); allocs != 0 {
				t.Errorf("Take on a warm %v allocates %v times per call, want 0", k.alg, allocs)
			}
		})
	}
}

// TestNoNetHTTP keeps the algorithms free of net/http.
func TestNoNetHTTP(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH to list the dependencies with: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/sluicehq/sluice/algorithm").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net/http" || strings.HasPrefix(dep, "net/http/") {
			t.Errorf("package algorithm depends on %s", dep)
		}
	}
}
