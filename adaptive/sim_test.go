package adaptive_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/eventq"
)

// The simulated backend has servers workers, each serving one request in
// service time, and a FIFO queue in front of them: past servers requests in
// flight, every extra request waits its turn, so latency grows with
// concurrency as Little's law says (n in flight at capacity servers/service
// per second take n/capacity each). Requests arrive as a Poisson process.
// Everything runs on a fake clock, event by event: a run is deterministic.
type backend struct {
	servers int
	service time.Duration
	slowAt  time.Duration // from then on (if positive) each request takes slow
	slow    time.Duration
	free    eventq.Workers
}

// start returns when a request arriving at t completes.
func (b *backend) start(t time.Duration) time.Duration {
	if b.free == nil {
		b.free = eventq.NewWorkers(b.servers)
	}
	svc := b.service
	if b.slowAt > 0 && t >= b.slowAt {
		svc = b.slow
	}
	return b.free.Serve(t, svc)
}

// completion is an admitted request in flight.
type completion struct {
	arrived time.Duration
	tok     adaptive.Token
}

// newEventClock is the simulation's clock, at clocktest.Epoch.
func newEventClock() *eventq.Clock { return eventq.NewClock(clocktest.Epoch) }

// fixed admits while fewer than n are in flight; its Tokens are zero, so
// the simulation counts completions for it.
type fixed struct{ n, inflight int }

type simResult struct {
	p99      time.Duration
	goodput  float64 // completions per second after the warm-up
	offered  ByPrio
	rejected ByPrio
	limit    int
}

type ByPrio [adaptive.NumPriorities]int

type simConfig struct {
	servers  int
	service  time.Duration
	load     float64 // offered load as a multiple of capacity
	duration time.Duration
	warmup   time.Duration
	mix      [adaptive.NumPriorities]float64 // share of arrivals per priority, by Index
	slowAt   time.Duration                   // if positive, service becomes slow then
	slow     time.Duration
}

func (c simConfig) capacity() float64 { return float64(c.servers) / c.service.Seconds() }

// simulate runs c's traffic through lim (or through fix when lim is nil).
func simulate(t *testing.T, c simConfig, lim *adaptive.Limiter, clock *eventq.Clock, fix *fixed) simResult {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	be := &backend{servers: c.servers, service: c.service, slowAt: c.slowAt, slow: c.slow}
	var pending eventq.Queue[completion] // by when each completes
	rate := c.load * c.capacity()
	next := time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
	// Room for every completion measured, so that appending never copies.
	lat := make([]time.Duration, 0, int(rate*(c.duration-c.warmup).Seconds())+1)
	var res simResult
	done := 0
	ctx := context.Background()
	for next < c.duration {
		if pending.Len() > 0 && pending.Next() <= next {
			at, ev := pending.Pop()
			clock.Set(at)
			if lim != nil {
				ev.tok.Done(adaptive.Success)
			} else {
				fix.inflight--
			}
			if ev.arrived >= c.warmup {
				lat = append(lat, at-ev.arrived)
				done++
			}
			continue
		}
		now := next
		next += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		clock.Set(now)
		p := pick(rng, c.mix)
		measured := now >= c.warmup
		if measured {
			res.offered[p.Index()]++
		}
		var tok adaptive.Token
		ok := false
		if lim != nil {
			tok, ok = lim.Acquire(ctx, p)
		} else if fix.inflight < fix.n {
			fix.inflight++
			ok = true
		}
		if !ok {
			if measured {
				res.rejected[p.Index()]++
			}
			continue
		}
		pending.Push(be.start(now), completion{arrived: now, tok: tok})
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		res.p99 = lat[len(lat)*99/100]
	}
	res.goodput = float64(done) / (c.duration - c.warmup).Seconds()
	if lim != nil {
		res.limit = lim.Limit()
	}
	return res
}

// pick draws an arrival's priority from mix, or returns Default, drawing
// nothing, when mix is unset: then the arrivals are those of package sim's
// RunOverload with the same defaults, whose figures docs/adaptive.md shows.
func pick(rng *rand.Rand, mix [adaptive.NumPriorities]float64) adaptive.Priority {
	if mix == ([adaptive.NumPriorities]float64{}) {
		return adaptive.Default
	}
	r := rng.Float64()
	for i, share := range mix {
		if r < share {
			return adaptive.Priority(i - 1)
		}
		r -= share
	}
	return adaptive.Critical
}

// The scenario of issue "close the loop": 50 workers of 10ms each (5,000
// requests/s of capacity, 10ms unloaded latency) offered 1.5× their
// capacity for a simulated minute, measured after the first 20 s.
var overload = simConfig{
	servers:  50,
	service:  10 * time.Millisecond,
	load:     1.5,
	duration: 60 * time.Second,
	warmup:   20 * time.Second,
}

// runOverload runs the overload scenario through a Limiter of algo with
// 100ms windows (ten service times).
func runOverload(t *testing.T, algo adaptive.Algorithm) simResult {
	t.Helper()
	clock := newEventClock()
	lim, err := adaptive.New(adaptive.Config{
		Algorithm: algo, Clock: clock, Max: 1000,
		Window: 10 * overload.service,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := simulate(t, overload, lim, clock, nil)
	t.Logf("p99 %v (%.2f× unloaded), goodput %.0f/s (%.1f%% of capacity), final limit %d",
		r.p99, float64(r.p99)/float64(overload.service), r.goodput, 100*r.goodput/overload.capacity(), r.limit)
	return r
}

// AIMD with its Timeout as the latency objective (1.5× the unloaded
// latency), and Gradient, whose baseline is a minimum latency measured at
// low concurrency now and then, with Envoy's defaults (a 25% buffer), each
// hold p99 under twice the unloaded latency at full goodput.
func TestAdaptiveKeepsLatencyNearUnloadedAndGoodputNearCapacity(t *testing.T) {
	unloaded := overload.service
	for name, algo := range map[string]adaptive.Algorithm{
		"AIMD":     adaptive.AIMD{Timeout: 3 * unloaded / 2},
		"Gradient": adaptive.Gradient{Seed: 1}, // as sluice simulate overload's run of seed 1
	} {
		t.Run(name, func(t *testing.T) {
			r := runOverload(t, algo)
			if r.p99 > 2*unloaded {
				t.Errorf("p99 %v exceeds twice the unloaded latency %v", r.p99, unloaded)
			}
			if r.goodput < 0.9*overload.capacity() {
				t.Errorf("goodput %.0f/s is below 90%% of the capacity %.0f/s", r.goodput, overload.capacity())
			}
		})
	}
}

// Gradient2 compares each window with a long average of the windows
// themselves, so under overload that never lets up the average learns
// the queueing it should prevent, and the limit drifts upward with it:
// the documented reason to prefer AIMD with a latency objective for a
// backend that stays overloaded. This pins the behaviour docs/adaptive.md
// describes; if a change to Gradient2 removes the drift, move it to the
// test above.
func TestGradient2DriftsUnderSustainedOverload(t *testing.T) {
	unloaded := overload.service
	r := runOverload(t, adaptive.Gradient2{})
	if r.goodput < 0.9*overload.capacity() {
		t.Errorf("goodput %.0f/s is below 90%% of the capacity %.0f/s", r.goodput, overload.capacity())
	}
	if r.p99 <= 2*unloaded {
		t.Errorf("p99 %v is within twice the unloaded latency: Gradient2 no longer drifts; update docs/adaptive.md and the test above", r.p99)
	}
}

func TestFixedLimitsEitherQueueOrWaste(t *testing.T) {
	unloaded := overload.service
	high := simulate(t, overload, nil, newEventClock(), &fixed{n: 500})
	t.Logf("fixed 500: p99 %v (%.1f× unloaded), goodput %.0f/s", high.p99, float64(high.p99)/float64(unloaded), high.goodput)
	if high.p99 < 5*unloaded {
		t.Errorf("a limit of 500 over 50 workers should queue: p99 %v, want at least 5× %v", high.p99, unloaded)
	}
	low := simulate(t, overload, nil, newEventClock(), &fixed{n: 20})
	t.Logf("fixed 20: p99 %v, goodput %.0f/s (%.1f%% of capacity)", low.p99, low.goodput, 100*low.goodput/overload.capacity())
	if low.goodput > 0.5*overload.capacity() {
		t.Errorf("a limit of 20 over 50 workers should waste capacity: goodput %.0f/s of %.0f/s", low.goodput, overload.capacity())
	}
}

func TestPrioritySheddingDropsSheddableFirst(t *testing.T) {
	c := overload
	// 1.5× capacity: a fifth critical (0.3× capacity), three tenths default
	// (0.45×), half sheddable (0.75×).
	c.mix = [adaptive.NumPriorities]float64{0.5, 0.3, 0.2}
	clock := newEventClock()
	lim, err := adaptive.New(adaptive.Config{
		Algorithm: adaptive.AIMD{Timeout: 15 * time.Millisecond}, Clock: clock, Max: 1000,
		Window: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := simulate(t, c, lim, clock, nil)
	rate := func(p adaptive.Priority) float64 {
		return float64(r.rejected[p.Index()]) / float64(r.offered[p.Index()])
	}
	t.Logf("refused: sheddable %.1f%%, default %.1f%%, critical %.1f%%; p99 %v",
		100*rate(adaptive.Sheddable), 100*rate(adaptive.Default), 100*rate(adaptive.Critical), r.p99)
	if !(rate(adaptive.Sheddable) > rate(adaptive.Default) && rate(adaptive.Default) >= rate(adaptive.Critical)) {
		t.Errorf("refusal rates should fall with priority")
	}
	if rate(adaptive.Critical) > 0.01 {
		t.Errorf("%.1f%% of critical requests refused, want at most 1%% while lower priorities can be shed", 100*rate(adaptive.Critical))
	}
	total := r.rejected[0] + r.rejected[1] + r.rejected[2]
	if share := float64(r.rejected[0]) / float64(total); share < 0.9 {
		t.Errorf("sheddable requests are %.1f%% of those refused, want at least 90%%", 100*share)
	}
}

// When the backend's capacity moves (each request takes twice as long from
// the 30th second on: half the capacity, twice the unloaded latency),
// Gradient's next minimum-latency measurement finds the new baseline, and
// the limit follows: measured from the 90th second, p99 is within twice the
// new unloaded latency and goodput at least 90% of the new capacity.
// AIMD's latency objective, fixed at 1.5× the old latency, is now below the
// unloaded latency: it holds the limit at its floor and wastes capacity.
func TestGradientFollowsACapacityThatMoves(t *testing.T) {
	c := overload
	c.duration, c.warmup = 150*time.Second, 90*time.Second
	c.slowAt, c.slow = 30*time.Second, 2*c.service
	newCapacity := float64(c.servers) / c.slow.Seconds()
	run := func(algo adaptive.Algorithm) simResult {
		clock := newEventClock()
		lim := mustNew(t, adaptive.Config{Algorithm: algo, Clock: clock, Max: 1000, Window: 10 * c.service})
		r := simulate(t, c, lim, clock, nil)
		t.Logf("%T: p99 %v (%.2f× the new unloaded latency), goodput %.0f/s (%.1f%% of the new capacity), final limit %d",
			algo, r.p99, float64(r.p99)/float64(c.slow), r.goodput, 100*r.goodput/newCapacity, r.limit)
		return r
	}
	g := run(adaptive.Gradient{Seed: 1})
	if g.p99 > 2*c.slow {
		t.Errorf("Gradient: p99 %v exceeds twice the new unloaded latency %v", g.p99, c.slow)
	}
	if g.goodput < 0.9*newCapacity {
		t.Errorf("Gradient: goodput %.0f/s is below 90%% of the new capacity %.0f/s", g.goodput, newCapacity)
	}
	a := run(adaptive.AIMD{Timeout: 3 * c.service / 2})
	if a.goodput > 0.5*newCapacity {
		t.Errorf("AIMD with an objective below the new unloaded latency: goodput %.0f/s, want it to waste capacity", a.goodput)
	}
}

// Gradient with a Seed jitters its probes from its own source: two runs on
// the same arrivals and the same seed measure the same, probe for probe.
func TestGradientWithASeedRepeatsItsRun(t *testing.T) {
	c := overload
	c.duration, c.warmup = 20*time.Second, 2*time.Second
	run := func() simResult {
		clock := newEventClock()
		algo := adaptive.Gradient{ProbeInterval: time.Second, Jitter: 0.5, Seed: 7}
		return simulate(t, c, mustNew(t, adaptive.Config{Algorithm: algo, Clock: clock, Max: 1000, Window: 10 * c.service}), clock, nil)
	}
	if a, b := run(), run(); a != b {
		t.Errorf("two runs of seed 7: %+v and %+v", a, b)
	}
}
