package algorithm_test

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// t0 is the instant every step table counts from: Unix 1700000040 s, a
// multiple of 60 s, so minute, second and millisecond windows all start at t0.
var t0 = time.Unix(1700000040, 0).UnixNano()

// state is what every algorithm's state type implements.
type state interface {
	Take(now int64, lim sluice.Limit, cost int) sluice.Result
	Refund(now int64, lim sluice.Limit, cost int)
	Expires() int64
}

// kind describes one algorithm to the generic tests.
type kind struct {
	alg   sluice.Algorithm
	fresh func() state
	clone func(state) state // a deep copy that shares nothing with the original
	// buckets, when above 1, makes the kind the sliding window with that
	// many sub-windows (see with).
	buckets uint8
	// moments, when above 0, makes the kind the sliding window with that
	// many means per sub-window (see with).
	moments uint8
}

// name names the kind's subtests: its algorithm's name, and its buckets.
func (k kind) name() string {
	if k.moments > 0 {
		return fmt.Sprintf("%v_buckets_%d_moments_%d", k.alg, k.buckets, k.moments)
	}
	if k.buckets > 1 {
		return fmt.Sprintf("%v_buckets_%d", k.alg, k.buckets)
	}
	return k.alg.String()
}

// with returns lim as the kind decides it: for a bucketed kind with its
// buckets, the period rounded up to a multiple of buckets microseconds
// and the rate cut to sluice.MaxBucketRate.
func (k kind) with(lim sluice.Limit) sluice.Limit {
	if k.buckets > 1 {
		unit := time.Duration(k.buckets) * time.Microsecond
		lim.Buckets = k.buckets
		lim.Period = max((lim.Period+unit-1)/unit*unit, unit)
		lim.Rate = min(lim.Rate, sluice.MaxBucketRate)
	}
	if k.moments > 0 {
		lim.Moments = k.moments
		lim.Rate = min(lim.Rate, sluice.MaxMomentsRate)
	}
	return lim
}

func cloneValue[T any](s state) state {
	c := *any(s).(*T)
	return any(&c).(state)
}

// kindOf returns the kind of alg.
func kindOf(alg sluice.Algorithm) kind {
	for _, k := range kinds {
		if k.alg == alg {
			return k
		}
	}
	panic("no kind for " + alg.String())
}

var kinds = []kind{
	{sluice.TokenBucket, func() state { return new(algorithm.TokenBucket) }, cloneValue[algorithm.TokenBucket], 0, 0},
	{sluice.FixedWindow, func() state { return new(algorithm.FixedWindow) }, cloneValue[algorithm.FixedWindow], 0, 0},
	{sluice.SlidingWindow, func() state { return new(algorithm.SlidingWindow) }, cloneValue[algorithm.SlidingWindow], 0, 0},
	{sluice.SlidingLog, func() state { return new(algorithm.SlidingLog) }, func(s state) state {
		c := s.(*algorithm.SlidingLog).Clone()
		return &c
	}, 0, 0},
	{sluice.LeakyBucket, func() state { return new(algorithm.LeakyBucket) }, cloneValue[algorithm.LeakyBucket], 0, 0},
	{sluice.SlidingWindow, func() state { return new(algorithm.SlidingBuckets) }, cloneValue[algorithm.SlidingBuckets], 4, 0},
	{sluice.SlidingWindow, func() state { return new(algorithm.SlidingMoments) }, func(s state) state {
		c := s.(*algorithm.SlidingMoments).Clone()
		return &c
	}, 4, 3},
}

// outcome is the part of a Result a step table checks.
type outcome struct {
	allowed    bool
	remaining  int
	retryAfter time.Duration
	resetAfter time.Duration
}

func outcomeOf(r sluice.Result) outcome {
	return outcome{r.Allowed, r.Remaining, r.RetryAfter, r.ResetAfter}
}

func (o outcome) String() string {
	verdict := "denied"
	if o.allowed {
		verdict = "allowed"
	}
	return fmt.Sprintf("{%s remaining=%d retry=%v reset=%v}", verdict, o.remaining, o.retryAfter, o.resetAfter)
}

// step is one row of a step table: a request of cost at t0+at, and the
// outcome it must get.
type step struct {
	at   time.Duration
	cost int
	want outcome
}

// ok and no build the expected outcome of an admitted and a denied request.
func ok(remaining int, reset time.Duration) outcome {
	return outcome{allowed: true, remaining: remaining, resetAfter: reset}
}

func no(remaining int, retry, reset time.Duration) outcome {
	return outcome{remaining: remaining, retryAfter: retry, resetAfter: reset}
}

// repeat returns n steps at the same instant and cost whose outcomes want(i)
// gives, i counting from 0.
func repeat(n int, at time.Duration, cost int, want func(i int) outcome) []step {
	steps := make([]step, n)
	for i := range steps {
		steps[i] = step{at, cost, want(i)}
	}
	return steps
}

// run plays steps on s under lim and reports every outcome that differs.
func run(t *testing.T, s state, lim sluice.Limit, steps []step) {
	t.Helper()
	for i, st := range steps {
		res := s.Take(t0+int64(st.at), lim, st.cost)
		if got := outcomeOf(res); got != st.want {
			t.Errorf("step %d: AllowN(t0+%v, %v) = %v, want %v", i, st.at, st.cost, got, st.want)
		}
	}
}

// concat joins step lists.
func concat(lists ...[]step) []step {
	var all []step
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}

// Generators for the property tests.

// periods mixes round periods with arbitrary ones between 1 ms and 10 s.
var periods = rapid.OneOf(
	rapid.SampledFrom([]int64{1e6, 7e6, 1e7, 1e8, 1e9, 3e9, 1e10}),
	rapid.Int64Range(1e6, 1e10),
)

// drawLimit draws a valid limit of algorithm alg: rate 1..20, period 1ms..10s,
// burst 1..20, and for the sliding window CountRejected or not.
func drawLimit(t *rapid.T, alg sluice.Algorithm) sluice.Limit {
	countRejected := alg == sluice.SlidingWindow && rapid.Bool().Draw(t, "countRejected")
	return drawLimitCR(t, alg, countRejected)
}

// drawLimitCR is drawLimit with the given CountRejected.
func drawLimitCR(t *rapid.T, alg sluice.Algorithm, countRejected bool) sluice.Limit {
	lim := sluice.Limit{
		Algorithm:     alg,
		Rate:          rapid.IntRange(1, 20).Draw(t, "rate"),
		Period:        time.Duration(periods.Draw(t, "period")),
		Burst:         rapid.IntRange(1, 20).Draw(t, "burst"),
		CountRejected: countRejected,
	}
	if err := lim.Validate(); err != nil {
		t.Fatalf("drew an invalid limit: %v", err)
	}
	return lim
}

// req is one request of a random sequence.
type req struct {
	at   int64
	cost int
}

func (r req) String() string { return fmt.Sprintf("(t0%+d, %d)", r.at-t0, r.cost) }

// GoString makes rapid's log of a drawn sequence short.
func (r req) GoString() string { return r.String() }

// gapGen returns a generator of gaps between arrivals: many zero, some about
// one emission interval, some up to three periods, some under 2 ms (the
// leaky bucket's millisecond clock).
func gapGen(lim sluice.Limit) *rapid.Generator[int64] {
	p := int64(lim.Period)
	return rapid.OneOf(
		rapid.Just(int64(0)),
		rapid.Just(int64(0)),
		rapid.Int64Range(0, 2*p/int64(lim.Rate)+1),
		rapid.Int64Range(0, 3*p),
		rapid.Int64Range(0, 2e6),
	)
}

// costGen returns a generator of costs between 1 and the limit's capacity,
// biased towards 1.
func costGen(lim sluice.Limit) *rapid.Generator[int] {
	return rapid.OneOf(rapid.Just(1), rapid.IntRange(1, lim.Capacity()))
}

// drawRun draws a limit of alg, then between minN and maxN requests under
// it from a drawn start.
func drawRunK(t *rapid.T, k kind, minN, maxN int) (sluice.Limit, []req) {
	lim := k.with(drawLimit(t, k.alg))
	return lim, drawRequests(t, lim, drawStart(t, lim), minN, maxN)
}

// drawRun is drawRunK for the kind of alg without buckets.
func drawRun(t *rapid.T, alg sluice.Algorithm, minN, maxN int) (sluice.Limit, []req) {
	lim := drawLimit(t, alg)
	return lim, drawRequests(t, lim, drawStart(t, lim), minN, maxN)
}

// drawRequests draws between minN and maxN requests in increasing order of
// time, starting at start.
func drawRequests(t *rapid.T, lim sluice.Limit, start int64, minN, maxN int) []req {
	return requestsGen(lim, start, minN, maxN).Draw(t, "requests")
}

// requestsGen generates between minN and maxN requests in increasing order of
// time, starting at start, as one draw so that a failure prints one line.
// The requests come as a slice of slices (rapid's slices average about five
// elements, too few to fill a bucket twice), which rapid shrinks by deleting
// requests anywhere.
func requestsGen(lim sluice.Limit, start int64, minN, maxN int) *rapid.Generator[[]req] {
	gaps, costs := gapGen(lim), costGen(lim)
	pair := rapid.Custom(func(t *rapid.T) req {
		return req{gaps.Draw(t, "gap"), costs.Draw(t, "cost")}
	})
	chunks := rapid.SliceOfN(rapid.SliceOfN(pair, 1, maxN), min(minN, 1), maxN)
	return rapid.Custom(func(t *rapid.T) []req {
		var reqs []req
		for _, c := range chunks.Draw(t, "chunks") {
			reqs = append(reqs, c...)
		}
		reqs = reqs[:min(len(reqs), maxN)]
		now := start
		for i := range reqs {
			if i > 0 {
				now += reqs[i].at
			}
			reqs[i].at = now
		}
		return reqs
	})
}

// drawStart draws a start instant within one period after t0, so that the
// sequences start anywhere in a window.
func drawStart(t *rapid.T, lim sluice.Limit) int64 {
	return t0 + rapid.Int64Range(0, int64(lim.Period)).Draw(t, "start")
}

// play runs reqs on s and returns the admitted requests and every result.
func play(s state, lim sluice.Limit, reqs []req) (admitted []req, results []sluice.Result) {
	for _, r := range reqs {
		res := s.Take(r.at, lim, r.cost)
		results = append(results, res)
		if res.Allowed {
			admitted = append(admitted, r)
		}
	}
	return admitted, results
}

// floorDiv returns ⌊a/b⌋ for positive b.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
