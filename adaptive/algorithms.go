package adaptive

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Gradient2 moves the limit by the ratio of a long-term latency to the
// latest window's, after Netflix's Gradient2Limit. Per window of mean
// latency short:
//
//   - long is a running mean of the windows' latencies: the plain mean of
//     the first ten, then an exponential average over LongWindow windows
//     (factor 2/(LongWindow+1)); when long/short > 2 (latency dropped
//     sharply) long is cut by 5%, so that it recovers quickly;
//   - if fewer than half the limit were in flight, the limit stays (an idle
//     system says nothing about its capacity);
//   - gradient = clamp(Tolerance·long/short, 0.5, 1);
//     new = limit·gradient + QueueSize, smoothed:
//     limit·(1−Smoothing) + new·Smoothing; then clamped to [Min, Max].
//
// Dropped requests do not move it. The zero value uses Netflix's defaults.
type Gradient2 struct {
	// Tolerance is how much slower than long a window may be before the
	// limit falls. Zero means 1.5; otherwise at least 1.
	Tolerance float64
	// Smoothing is the weight of each new estimate, in (0, 1]. Zero
	// means 0.2.
	Smoothing float64
	// QueueSize is added to the limit at each update, the headroom that
	// lets it probe upward. Zero means 4; negative is refused.
	QueueSize int
	// LongWindow is the span, in windows, of long's exponential average.
	// Zero means 600.
	LongWindow int
}

type gradient2 struct {
	Gradient2
	long  float64
	warm  int
	total float64
}

func (g Gradient2) newController() (controller, error) {
	if g.Tolerance == 0 {
		g.Tolerance = 1.5
	}
	if g.Smoothing == 0 {
		g.Smoothing = 0.2
	}
	if g.QueueSize == 0 {
		g.QueueSize = 4
	}
	if g.LongWindow == 0 {
		g.LongWindow = 600
	}
	if !(g.Tolerance >= 1) || !(g.Smoothing > 0 && g.Smoothing <= 1) || g.QueueSize < 0 || g.LongWindow < 1 {
		return nil, fmt.Errorf("%w: Gradient2 needs Tolerance >= 1, Smoothing in (0, 1], QueueSize >= 0, LongWindow >= 1; have %+v", ErrInvalidConfig, g)
	}
	return &gradient2{Gradient2: g}, nil
}

// warmup is the number of windows whose plain mean starts long.
const warmup = 10

func (g *gradient2) next(limit float64, w window) float64 {
	if w.rtt <= 0 {
		return limit
	}
	short := float64(w.rtt)
	if g.warm < warmup {
		g.warm++
		g.total += short
		g.long = g.total / float64(g.warm)
	} else {
		f := 2 / float64(g.LongWindow+1)
		g.long = g.long*(1-f) + short*f
	}
	if g.long/short > 2 {
		g.long *= 0.95
	}
	if float64(w.inflight) < limit/2 {
		return limit
	}
	gradient := min(max(g.Tolerance*g.long/short, 0.5), 1)
	n := limit*gradient + float64(g.QueueSize)
	return limit*(1-g.Smoothing) + n*g.Smoothing
}

// AIMD grows the limit by one per window while it is in use and cuts it by
// BackoffRatio when a window saw a Dropped request or a mean latency above
// Timeout, after Netflix's AIMDLimit. Timeout is the latency objective:
// AIMD holds latency near it. The zero value uses Netflix's defaults.
type AIMD struct {
	// BackoffRatio multiplies the limit on a bad window, in [0.5, 1).
	// Zero means 0.9.
	BackoffRatio float64
	// Timeout is the mean latency above which a window counts as bad.
	// Zero means 5s.
	Timeout time.Duration
}

type aimd struct{ AIMD }

func (a AIMD) newController() (controller, error) {
	if a.BackoffRatio == 0 {
		a.BackoffRatio = 0.9
	}
	if a.Timeout == 0 {
		a.Timeout = 5 * time.Second
	}
	if !(a.BackoffRatio >= 0.5 && a.BackoffRatio < 1) || a.Timeout < 0 {
		return nil, fmt.Errorf("%w: AIMD needs BackoffRatio in [0.5, 1) and Timeout >= 0; have %+v", ErrInvalidConfig, a)
	}
	return &aimd{a}, nil
}

func (a *aimd) next(limit float64, w window) float64 {
	switch {
	case w.dropped || w.rtt > a.Timeout:
		return float64(int(limit * a.BackoffRatio))
	case float64(w.inflight)*2 >= limit:
		return limit + 1
	}
	return limit
}

// Gradient moves the limit by the ratio of the minimum latency, measured
// now and then at a low concurrency, to the latest window's, after Envoy's
// adaptive concurrency filter (its gradient controller). Per window of mean
// latency short:
//
//	gradient = clamp(minRTT·(1+Buffer)/short, 0.5, 2)
//	new = gradient·limit + √limit
//
// then clamped to [Min, Max]. The √limit is the headroom that lets the
// limit probe upward.
//
// minRTT is measured at the first window and then every ProbeInterval
// (plus up to Jitter of it, at random, so that replicas do not measure at
// once): the limit is pinned to ProbeConcurrency for ProbeWindows windows
// after one window to drain what was in flight, minRTT becomes the lowest
// mean latency of those windows, and the limit returns to where it was.
// While it measures, most requests are refused, as with Envoy; that is
// the price of a baseline that queueing cannot shift, which is what keeps
// Gradient from drifting under sustained overload as Gradient2 does.
//
// Dropped requests do not move it. The zero value uses Envoy's defaults
// and a ProbeInterval of one minute.
type Gradient struct {
	// Buffer is how much above minRTT the latency may be before the
	// limit falls. Zero means 0.25; negative is refused.
	Buffer float64
	// ProbeInterval is the time between minRTT measurements. Zero means
	// one minute.
	ProbeInterval time.Duration
	// ProbeConcurrency is the limit while minRTT is measured. Zero means
	// 3.
	ProbeConcurrency int
	// ProbeWindows is the number of windows minRTT is measured over,
	// after the window that drains. Zero means 1.
	ProbeWindows int
	// Jitter is the largest random fraction of ProbeInterval added to
	// each interval, in [0, 1]. Zero means 0.15; negative means none.
	Jitter float64
	// Seed, if not zero, seeds the Limiter's own source of the jitter
	// (PCG), so that a run on a simulated clock repeats itself. Zero
	// draws from math/rand/v2's global source, different in every
	// process, which is what keeps replicas' probes apart.
	Seed uint64
}

type gradient struct {
	Gradient
	minRTT    time.Duration
	probing   int           // windows left in the measurement; 0: not measuring
	lowest    time.Duration // the lowest mean of the measurement's windows so far
	saved     float64       // the limit before the measurement
	nextProbe time.Time
	rng       *rand.Rand // nil: the global source
}

func (g Gradient) newController() (controller, error) {
	g.Buffer = cmp.Or(g.Buffer, 0.25)
	g.ProbeInterval = cmp.Or(g.ProbeInterval, time.Minute)
	g.ProbeConcurrency = cmp.Or(g.ProbeConcurrency, 3)
	g.ProbeWindows = cmp.Or(g.ProbeWindows, 1)
	switch {
	case g.Jitter == 0:
		g.Jitter = 0.15
	case g.Jitter < 0:
		g.Jitter = 0
	}
	if !(g.Buffer >= 0) || g.ProbeInterval < 0 || g.ProbeConcurrency < 1 || g.ProbeWindows < 1 || !(g.Jitter <= 1) {
		return nil, fmt.Errorf("%w: Gradient needs Buffer >= 0, ProbeInterval >= 0, ProbeConcurrency >= 1, ProbeWindows >= 1, Jitter <= 1; have %+v", ErrInvalidConfig, g)
	}
	c := &gradient{Gradient: g}
	if g.Seed != 0 {
		c.rng = rand.New(rand.NewPCG(g.Seed, 0))
	}
	return c, nil
}

func (g *gradient) next(limit float64, w window) float64 {
	if g.probing > 0 {
		return g.measure(w)
	}
	if g.minRTT == 0 || !w.end.Before(g.nextProbe) {
		// Pin the limit; the first window drains what is in flight.
		g.probing, g.lowest, g.saved = g.ProbeWindows+1, 0, limit
		return float64(g.ProbeConcurrency)
	}
	if w.rtt <= 0 {
		return limit
	}
	target := float64(g.minRTT) * (1 + g.Buffer)
	gradient := min(max(target/float64(w.rtt), 0.5), 2)
	return gradient*limit + math.Sqrt(limit)
}

// measure takes one window of a minRTT measurement and returns the limit.
func (g *gradient) measure(w window) float64 {
	g.probing--
	if g.probing < g.ProbeWindows && w.rtt > 0 && (g.lowest == 0 || w.rtt < g.lowest) {
		g.lowest = w.rtt
	}
	if g.probing > 0 {
		return float64(g.ProbeConcurrency)
	}
	if g.lowest == 0 { // no sample: measure again
		g.probing = g.ProbeWindows
		return float64(g.ProbeConcurrency)
	}
	g.minRTT = g.lowest
	g.nextProbe = w.end.Add(g.ProbeInterval + time.Duration(g.random()*g.Jitter*float64(g.ProbeInterval)))
	return g.saved
}

// random returns a number in [0, 1) from the seeded source, or the global
// one.
func (g *gradient) random() float64 {
	if g.rng == nil {
		return rand.Float64()
	}
	return g.rng.Float64()
}
