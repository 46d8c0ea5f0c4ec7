package sim

import (
	"encoding/json"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

func byName(t *testing.T, r *Report, a sluice.Algorithm) AlgorithmReport {
	t.Helper()
	for _, x := range r.Algorithms {
		if x.Algorithm == a.String() {
			return x
		}
	}
	t.Fatalf("no %v in report", a)
	return AlgorithmReport{}
}

// TestBoundaryAttack checks the core's documented flaw: a fixed window admits
// exactly 2N within one rolling period, and the sliding log exactly N.
func TestBoundaryAttack(t *testing.T) {
	for _, n := range []int{1, 7, 100} {
		r, err := Run(Config{Rate: n, Period: time.Minute, Burst: 20, Seed: 1}, Boundary{})
		if err != nil {
			t.Fatal(err)
		}
		if got := byName(t, r, sluice.FixedWindow).MaxInPeriod; got != int64(2*n) {
			t.Errorf("rate %d: fixed window max in a rolling minute = %d, want %d", n, got, 2*n)
		}
		if got := byName(t, r, sluice.SlidingLog).MaxInPeriod; got != int64(n) {
			t.Errorf("rate %d: sliding log max in a rolling minute = %d, want %d", n, got, n)
		}
	}
}

// TestEveryPatternStaysWithinTheCoreBounds checks, over every pattern, the promises of the core: the log
// never exceeds N in a period; the token bucket never exceeds
// Burst + Rate·t/Period in a span t; up to LogEntries per period the log is
// exact (it agrees with the reference).
func TestEveryPatternStaysWithinTheCoreBounds(t *testing.T) {
	cfgs := []Config{
		{Rate: 100, Period: time.Minute, Burst: 20},
		{Rate: 5, Period: time.Second, Burst: 3},
		{Rate: 30, Period: 10 * time.Second, Burst: 1},
	}
	pats := []Pattern{Steady{}, Steady{Load: 50, Keys: 3}, Bursts{}, Boundary{}, Ramp{}, Zipf{Keys: 50}}
	for _, c := range cfgs {
		for _, p := range pats {
			c.Seed = 7
			r, err := Run(c, p)
			if err != nil {
				t.Fatal(err)
			}
			log := byName(t, r, sluice.SlidingLog)
			if log.MaxInPeriod > int64(c.Rate) {
				t.Errorf("%v, %s: sliding log admitted %d in a period, limit %d", c.Rate, r.Pattern, log.MaxInPeriod, c.Rate)
			}
			// Up to LogEntries per period the log is exact; above, it merges
			// units into slots and may reject what the exact log admits.
			if c.Rate <= algorithm.LogEntries && log.WronglyAdmitted+log.WronglyRejected != 0 {
				t.Errorf("%v, %s: the log disagrees with the exact reference", c.Rate, r.Pattern)
			}
			tb := byName(t, r, sluice.TokenBucket)
			if bound := int64(c.Burst + c.Rate); tb.MaxInPeriod > bound {
				t.Errorf("%d/%v burst %d, %s: token bucket admitted %d in a period, bound %d", c.Rate, c.Period, c.Burst, r.Pattern, tb.MaxInPeriod, bound)
			}
			secBound := int64(c.Burst) + int64((float64(c.Rate)*float64(time.Second)+float64(c.Period)-1)/float64(c.Period))
			if tb.MaxInSecond > secBound {
				t.Errorf("%d/%v burst %d, %s: token bucket admitted %d in a second, bound %d", c.Rate, c.Period, c.Burst, r.Pattern, tb.MaxInSecond, secBound)
			}
			for _, a := range r.Algorithms {
				if a.Admitted+a.Rejected != r.Requests {
					t.Errorf("%s: %s admitted %d + rejected %d ≠ %d requests", r.Pattern, a.Algorithm, a.Admitted, a.Rejected, r.Requests)
				}
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	a, err := Run(Config{Seed: 3}, Zipf{Keys: 20})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(Config{Seed: 3}, Zipf{Keys: 20})
	if err != nil {
		t.Fatal(err)
	}
	if a.Requests != b.Requests || a.Algorithms[0].Admitted != b.Algorithms[0].Admitted {
		t.Errorf("same seed, different runs: %d/%d vs %d/%d", a.Requests, a.Algorithms[0].Admitted, b.Requests, b.Algorithms[0].Admitted)
	}
	c, err := Run(Config{Seed: 4}, Zipf{Keys: 20})
	if err != nil {
		t.Fatal(err)
	}
	if c.Requests == a.Requests {
		t.Errorf("seeds 3 and 4 gave the same number of requests %d", a.Requests)
	}
}

func TestMemory(t *testing.T) {
	r, err := Run(Config{Seed: 1}, Steady{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"token_bucket": 8, "fixed_window": 16, "sliding_window": 32, "leaky_bucket": 24}
	for _, a := range r.Algorithms {
		if w, ok := want[a.Algorithm]; ok && a.MaxBytesPerKey != w {
			t.Errorf("%s: %d bytes per key, want %d", a.Algorithm, a.MaxBytesPerKey, w)
		}
	}
	// The exact log holds at most one 16-byte entry per unit of the rate,
	// beside its state, and its ring grows no further.
	if got, most := byName(t, r, sluice.SlidingLog).MaxBytesPerKey, int64(48+16*r.Rate); got <= 48 || got > most {
		t.Errorf("sliding log: %d bytes per key, want between 49 and %d", got, most)
	}
}

func TestAccuracySmall(t *testing.T) {
	for _, pop := range []string{"zipf", "abusers"} {
		a, err := RunAccuracy(AccuracyConfig{Requests: 20000, Keys: 200, Seed: 1, Duration: 10 * time.Minute, Population: pop})
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Counters) != len(DefaultAccuracyBuckets) {
			t.Fatalf("%s: %d counters, want %d", pop, len(a.Counters), len(DefaultAccuracyBuckets))
		}
		for _, c := range a.Counters {
			for name, m := range map[string]Measure{"shared": c.Shared, "diverging": c.Diverging} {
				var keys int
				var wrong int64
				for _, cl := range m.Classes {
					keys += cl.Keys
					wrong += cl.Wrong
				}
				if keys != a.Keys || wrong != m.WronglyAdmitted+m.WronglyRejected {
					t.Errorf("%s, buckets %d, %s: classes hold %d keys and %d errors, want %d and %d", pop, c.Buckets, name, keys, wrong, a.Keys, m.WronglyAdmitted+m.WronglyRejected)
				}
				if m.Classes[0].Wrong != 0 {
					t.Errorf("%s, buckets %d, %s: keys under a tenth of the limit had %d errors; they can have none", pop, c.Buckets, name, m.Classes[0].Wrong)
				}
			}
		}
	}
}

// events is a pattern of given arrivals of key 0, at offsets from Start.
type events []time.Duration

func (p events) Name() string     { return "given" }
func (p events) keys(*Config) int { return 1 }
func (p events) span(c *Config) (int64, int64) {
	return Start.UnixNano(), Start.UnixNano() + int64(time.Minute)
}
func (p events) events(*Config, *rand.Rand) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		for _, d := range p {
			if !yield(Event{At: Start.UnixNano() + int64(d), Cost: 1}) {
				return
			}
		}
	}
}

// TestAccuracySharedMeasureByHand is Cloudflare's measure on a history
// worked by hand: 2 per 10 s, arrivals at 0, 1, 2, 15, 16, 19.5 and 25 s,
// every one counted. The exact count admits 0, 1, 15 and 16. The
// two-window counter admits 0, 1 and 15 (⌊3·5/10⌋ + 0 + 1 = 2), refuses
// 16 (⌊3·4/10⌋ + 1 + 1 = 3: wrongly) and admits 25 (⌊3·5/10⌋ + 0 + 1 = 2,
// while 16 and 19.5 lie in (15, 25]: wrongly). With two sub-windows of 5 s
// it agrees on every request. Under the diverging measure the exact count
// admits 0, 1, 15, 16 and 25 (only 16 of its own in (15, 25]); the
// two-window counter agrees on all seven, and the one with two
// sub-windows refuses 25 wrongly: 15 and 16 fill [15 s, 20 s), the oldest
// sub-window, which weighs whole at its start (⌊2·5/5⌋ + 0 + 1 = 3).
func TestAccuracySharedMeasureByHand(t *testing.T) {
	s := time.Second
	p := events{0, 1 * s, 2 * s, 15 * s, 16 * s, 19*s + s/2, 25 * s}
	a, err := runAccuracy(AccuracyConfig{Rate: 2, Period: 10 * s, Buckets: []int{1, 2}}, p)
	if err != nil {
		t.Fatal(err)
	}
	if a.Requests != 7 {
		t.Fatalf("%d requests, want 7", a.Requests)
	}
	for _, c := range []struct {
		i                 int
		shared, diverging [2]int64 // wrongly admitted, rejected
	}{
		{0, [2]int64{1, 1}, [2]int64{0, 0}},
		{1, [2]int64{0, 0}, [2]int64{0, 1}},
	} {
		got := a.Counters[c.i]
		if s := got.Shared; s.WronglyAdmitted != c.shared[0] || s.WronglyRejected != c.shared[1] {
			t.Errorf("buckets %d, shared: wrongly admitted %d, rejected %d; want %d, %d", got.Buckets, s.WronglyAdmitted, s.WronglyRejected, c.shared[0], c.shared[1])
		}
		if d := got.Diverging; d.WronglyAdmitted != c.diverging[0] || d.WronglyRejected != c.diverging[1] {
			t.Errorf("buckets %d, diverging: wrongly admitted %d, rejected %d; want %d, %d", got.Buckets, d.WronglyAdmitted, d.WronglyRejected, c.diverging[0], c.diverging[1])
		}
	}
	if got := a.Counters[0].Shared.WrongPct; math.Abs(got-200.0/7) > 1e-9 {
		t.Errorf("buckets 1, shared: %.6f%% wrong, want 2 of 7", got)
	}
	// Where and how near: 16 s is six tenths into its window of 10 s, with
	// the exact count (one, at 15 s) a unit under the limit, 50% of the
	// rate; 25 s is five tenths in, the exact count (16 and 19.5 s) a unit
	// over.
	s1 := a.Counters[0].Shared
	var wantPos [10][2]int64
	wantPos[6][1], wantPos[5][0] = 1, 1
	if s1.ByPosition != wantPos {
		t.Errorf("buckets 1, shared, by position: %v, want %v", s1.ByPosition, wantPos)
	}
	wantMargin := make([][2]int64, len(MarginBounds)+1)
	wantMargin[len(MarginBounds)] = [2]int64{1, 1}
	if !slices.Equal(s1.ByMargin, wantMargin) {
		t.Errorf("buckets 1, shared, by margin: %v, want %v", s1.ByMargin, wantMargin)
	}
}

// TestAccuracyBreakdownsAddUp: the errors split by position in the
// sub-window and by margin from the limit each add up to all the errors.
func TestAccuracyBreakdownsAddUp(t *testing.T) {
	a, err := RunAccuracy(AccuracyConfig{Requests: 20000, Keys: 200, Seed: 1, Duration: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range a.Counters {
		for name, m := range map[string]Measure{"shared": c.Shared, "diverging": c.Diverging} {
			var pos, margin [2]int64
			for _, p := range m.ByPosition {
				pos[0], pos[1] = pos[0]+p[0], pos[1]+p[1]
			}
			for _, p := range m.ByMargin {
				margin[0], margin[1] = margin[0]+p[0], margin[1]+p[1]
			}
			want := [2]int64{m.WronglyAdmitted, m.WronglyRejected}
			if pos != want || margin != want {
				t.Errorf("buckets %d, %s: by position %v, by margin %v, want %v", c.Buckets, name, pos, margin, want)
			}
			if want[0]+want[1] == 0 {
				t.Errorf("buckets %d, %s: no errors on a population with keys at their limit", c.Buckets, name)
			}
		}
	}
}

func BenchmarkRun(b *testing.B) {
	for _, keys := range []int{1, 100000} {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			c := Config{Seed: 1, Duration: time.Hour}
			p := Zipf{Keys: keys, Load: 1e6 / 3600}
			var n int64
			for b.Loop() {
				r, err := Run(c, p)
				if err != nil {
					b.Fatal(err)
				}
				n += r.Requests
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/event")
		})
	}
}

// TestQueueAdmitsAsTheMeterAndLetsOutSmoothly: the leaky bucket as a queue admits exactly what the meter
// admits, and what it lets out is smooth: never more than the rate allows
// in any second (plus the one in service), however bursty the arrivals.
func TestQueueAdmitsAsTheMeterAndLetsOutSmoothly(t *testing.T) {
	c := Config{Rate: 100, Period: time.Minute, Burst: 20, Seed: 3, Queue: true,
		Algorithms: []sluice.Algorithm{sluice.LeakyBucket}}
	r, err := Run(c, Bursts{})
	if err != nil {
		t.Fatal(err)
	}
	meter := byName(t, r, sluice.LeakyBucket)
	var queue AlgorithmReport
	for _, a := range r.Algorithms {
		if a.Algorithm == "leaky_queue" {
			queue = a
		}
	}
	if queue.Algorithm == "" {
		t.Fatal("no leaky_queue in the report")
	}
	if queue.Admitted != meter.Admitted || queue.Rejected != meter.Rejected {
		t.Fatalf("queue admitted %d / rejected %d, meter %d / %d: they must decide alike", queue.Admitted, queue.Rejected, meter.Admitted, meter.Rejected)
	}
	// 100/min is one request per 600 ms: at most 2 leave in any second.
	if queue.MaxInSecond > 2 {
		t.Errorf("queue lets %d out in one second, want at most 2 (the meter: %d)", queue.MaxInSecond, meter.MaxInSecond)
	}
	if meter.MaxInSecond <= queue.MaxInSecond {
		t.Errorf("the meter's bursts (%d in a second) should exceed the queue's smooth output (%d)", meter.MaxInSecond, queue.MaxInSecond)
	}
}

// TestErrorsAreTheirHoldersFieldsInJSON checks that the errors of a
// report, of the accuracy study and of each of its measures are written
// as their holder's own keys, as they were before they had a type.
func TestErrorsAreTheirHoldersFieldsInJSON(t *testing.T) {
	e := Errors{WronglyAdmitted: 1, WronglyRejected: 2, WronglyAdmittedPct: 0.5, WronglyRejectedPct: 1}
	for name, v := range map[string]any{
		"AlgorithmReport": AlgorithmReport{Errors: e},
		"Accuracy":        Accuracy{Errors: e},
		"Measure":         Measure{Errors: e},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m["wrongly_admitted"] != 1.0 || m["wrongly_rejected"] != 2.0 || m["wrongly_admitted_pct"] != 0.5 || m["wrongly_rejected_pct"] != 1.0 {
			t.Errorf("%s: %s, want the four error keys at the top", name, b)
		}
	}
}

// TestAccuracyMeasuresTheLimitersMoments: a counter given moments is the
// limiter's own (algorithm.SlidingMoments, its buffer reported), and on
// the same arrivals four means at 8 sub-windows err less than 8
// sub-windows alone under the shared measure.
func TestAccuracyMeasuresTheLimitersMoments(t *testing.T) {
	a, err := RunAccuracy(AccuracyConfig{Requests: 100000, Keys: 500, Seed: 1, Duration: 30 * time.Minute,
		Buckets: []int{8, 8}, Moments: []int{0, 4}})
	if err != nil {
		t.Fatal(err)
	}
	plain, moments := a.Counters[0], a.Counters[1]
	if moments.Limit != "sliding_window 100/1m0s buckets 8 moments 4" || moments.HeapBytes < (8+1)*(2+4)+4*4 || plain.HeapBytes != 0 {
		t.Fatalf("counters %q (heap %d B) and %q (heap %d B), want the second with moments and its buffer", plain.Limit, plain.HeapBytes, moments.Limit, moments.HeapBytes)
	}
	p, m := plain.Shared, moments.Shared
	if m.WronglyAdmitted+m.WronglyRejected >= p.WronglyAdmitted+p.WronglyRejected {
		t.Errorf("shared measure: 8 sub-windows with 4 means wrong %d+%d times, alone %d+%d", m.WronglyAdmitted, m.WronglyRejected, p.WronglyAdmitted, p.WronglyRejected)
	}
	t.Logf("shared: buckets 8 %.4f%%, with 4 moments %.4f%%", p.WrongPct, m.WrongPct)
	if _, err := RunAccuracy(AccuracyConfig{Requests: 10, Buckets: []int{8}, Moments: []int{0, 4}}); err == nil {
		t.Error("more moments than counters: no error")
	}
}
