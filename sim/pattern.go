package sim

import (
	"cmp"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"time"
)

// Event is one arrival: a request of Cost units from key number Key at the
// instant At, in Unix nanoseconds.
type Event struct {
	At   int64
	Key  uint32
	Cost int32
}

// A Pattern generates the arrivals of a simulation, in time order. The
// patterns of this package are Steady, Bursts, Boundary, Ramp, Zipf and
// Replay; their zero values are usable and take their defaults from the
// Config they run under.
type Pattern interface {
	// Name describes the pattern and its parameters, for reports.
	Name() string
	// keys returns the number of keys the pattern uses under c.
	keys(c *Config) int
	// span returns the first instant and the end of the simulated time.
	span(c *Config) (start, end int64)
	// events yields the arrivals in time order.
	events(c *Config, rng *rand.Rand) iter.Seq[Event]
}

// Start is the instant generated patterns begin at: 2025-01-01T00:00:00Z,
// which is a boundary of every window of a whole number of seconds that
// divides a day.
var Start = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func genSpan(c *Config) (int64, int64) {
	s := Start.UnixNano()
	return s, s + int64(c.Duration)
}

// perSecond returns the contract's rate in requests per second.
func (c *Config) perSecond() float64 { return float64(c.Rate) * 1e9 / float64(c.Period) }

// poisson yields the instants of a Poisson process of load(t) requests per
// second on [start, end), by thinning a process of rate peak ≥ load(t).
func poisson(rng *rand.Rand, start, end int64, peak float64, load func(t int64) float64, yield func(int64) bool) bool {
	if peak <= 0 {
		return true
	}
	mean := 1e9 / peak
	t := float64(start)
	for {
		t += rng.ExpFloat64() * mean
		if t >= float64(end) {
			return true
		}
		at := int64(t)
		if load != nil && rng.Float64()*peak >= load(at) {
			continue
		}
		if !yield(at) {
			return false
		}
	}
}

// Steady is Poisson traffic at a constant Load, in requests per second,
// spread evenly over Keys keys. Zero Load means 1.5 times the contract's
// rate; zero Keys means one key.
type Steady struct {
	Load float64
	Keys int
}

// Name implements Pattern.
func (p Steady) Name() string {
	return fmt.Sprintf("steady %.4g/s over %d key(s)", p.Load, max(p.Keys, 1))
}

func (p Steady) withDefaults(c *Config) Steady {
	p.Load, p.Keys = cmp.Or(p.Load, 1.5*c.perSecond()), max(p.Keys, 1)
	return p
}
func (p Steady) keys(c *Config) int            { return p.withDefaults(c).Keys }
func (p Steady) span(c *Config) (int64, int64) { return genSpan(c) }
func (p Steady) events(c *Config, rng *rand.Rand) iter.Seq[Event] {
	p = p.withDefaults(c)
	start, end := p.span(c)
	n := uint32(p.Keys)
	return func(yield func(Event) bool) {
		poisson(rng, start, end, p.Load, nil, func(t int64) bool {
			var k uint32
			if n > 1 {
				k = rng.Uint32N(n)
			}
			return yield(Event{At: t, Key: k, Cost: 1})
		})
	}
}

// Bursts is one key sending Poisson traffic at Load requests per second for
// On, then nothing for Off, over and over. Zero Load means 4 times the
// contract's rate; zero On and Off mean a sixth and half of the period.
type Bursts struct {
	Load    float64
	On, Off time.Duration
}

// Name implements Pattern.
func (p Bursts) Name() string {
	return fmt.Sprintf("bursts of %.4g/s, %v on, %v off", p.Load, p.On, p.Off)
}

func (p Bursts) withDefaults(c *Config) Bursts {
	if p.On <= 0 {
		p.On = max(c.Period/6, 1)
	}
	if p.Off <= 0 {
		p.Off = c.Period / 2
	}
	p.Load = cmp.Or(p.Load, 4*c.perSecond())
	return p
}
func (p Bursts) keys(*Config) int              { return 1 }
func (p Bursts) span(c *Config) (int64, int64) { return genSpan(c) }
func (p Bursts) events(c *Config, rng *rand.Rand) iter.Seq[Event] {
	p = p.withDefaults(c)
	start, end := p.span(c)
	on, off := int64(p.On), int64(p.Off)
	return func(yield func(Event) bool) {
		for s := start; s < end; s += on + off {
			if !poisson(rng, s, min(s+on, end), p.Load, nil, func(t int64) bool {
				return yield(Event{At: t, Cost: 1})
			}) {
				return
			}
		}
	}
}

// Boundary is the window boundary attack on one key: the full limit, Rate
// requests, in the last tenth of a period before a boundary of the
// epoch-aligned windows and Rate more in the first tenth after it, repeated
// every Every. A fixed window admits all 2·Rate within one period. Zero Every
// means three periods, so that each attack meets a rested key.
type Boundary struct {
	Every time.Duration
}

// Name implements Pattern.
func (p Boundary) Name() string { return "boundary attack" }

func (p Boundary) withDefaults(c *Config) Boundary {
	if p.Every <= 0 {
		p.Every = 3 * c.Period
	}
	return p
}
func (p Boundary) keys(*Config) int              { return 1 }
func (p Boundary) span(c *Config) (int64, int64) { return genSpan(c) }
func (p Boundary) events(c *Config, _ *rand.Rand) iter.Seq[Event] {
	start, end := p.span(c)
	per := int64(c.Period)
	every := int64(p.withDefaults(c).Every)
	n := int64(c.Rate)
	side := max(per/10, 1) // each half of the attack fits in a tenth of a period
	step := max(side/n, 1)
	return func(yield func(Event) bool) {
		for b := start - start%per + per; b < end; b = b + every - (b+every)%per {
			for i := n; i >= 1; i-- { // just before the boundary
				if !yield(Event{At: b - i*step, Cost: 1}) {
					return
				}
			}
			for i := range n { // and just after it
				if t := b + i*step; t >= end || !yield(Event{At: t, Cost: 1}) {
					return
				}
			}
		}
	}
}

// Ramp is one key whose Poisson load grows linearly from From to To requests
// per second over the simulation. Zero To means twice the contract's rate.
type Ramp struct {
	From, To float64
}

// Name implements Pattern.
func (p Ramp) Name() string { return fmt.Sprintf("ramp from %.4g/s to %.4g/s", p.From, p.To) }

func (p Ramp) withDefaults(c *Config) Ramp {
	p.To = cmp.Or(p.To, 2*c.perSecond())
	return p
}
func (p Ramp) keys(*Config) int              { return 1 }
func (p Ramp) span(c *Config) (int64, int64) { return genSpan(c) }
func (p Ramp) events(c *Config, rng *rand.Rand) iter.Seq[Event] {
	start, end := p.span(c)
	from, to := p.From, p.withDefaults(c).To
	load := func(t int64) float64 { return from + (to-from)*float64(t-start)/float64(end-start) }
	return func(yield func(Event) bool) {
		poisson(rng, start, end, math.Max(from, to), load, func(t int64) bool {
			return yield(Event{At: t, Cost: 1})
		})
	}
}

// Zipf is many keys with a heavy-tailed distribution of rates: a Poisson
// stream of Load requests per second in all, each request from key k (k from
// 0) with probability proportional to (1+k)^−S, so that a few keys are very
// busy and most are quiet. Zero Keys means 1000, zero S means 1.1 (S must
// exceed 1), zero Load means Keys/20 times the contract's rate.
type Zipf struct {
	Keys int
	S    float64
	Load float64
}

// Name implements Pattern.
func (p Zipf) Name() string {
	return fmt.Sprintf("zipf over %d keys, s=%.3g, %.4g/s in all", p.Keys, p.S, p.Load)
}

func (p Zipf) withDefaults(c *Config) Zipf {
	p.Keys = positiveOr(p.Keys, 1000)
	p.S = cmp.Or(p.S, 1.1)
	p.Load = cmp.Or(p.Load, float64(p.Keys)/20*c.perSecond())
	return p
}
func (p Zipf) keys(c *Config) int            { return p.withDefaults(c).Keys }
func (p Zipf) span(c *Config) (int64, int64) { return genSpan(c) }
func (p Zipf) events(c *Config, rng *rand.Rand) iter.Seq[Event] {
	p = p.withDefaults(c)
	start, end := p.span(c)
	return func(yield func(Event) bool) {
		z := rand.NewZipf(rng, p.S, 1, uint64(p.Keys-1))
		poisson(rng, start, end, p.Load, nil, func(t int64) bool {
			return yield(Event{At: t, Key: uint32(z.Uint64()), Cost: 1})
		})
	}
}

// positiveOr returns v, or def when v is not positive. (cmp.Or replaces
// only a zero v.)
func positiveOr(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// withDefaults returns p with its zero fields set from c, so that Name
// describes what runs. Each generated pattern sets its defaults in its own
// withDefaults method, which its events method calls too.
func withDefaults(p Pattern, c *Config) Pattern {
	switch q := p.(type) {
	case Steady:
		return q.withDefaults(c)
	case Bursts:
		return q.withDefaults(c)
	case Boundary:
		return q.withDefaults(c)
	case Ramp:
		return q.withDefaults(c)
	case Zipf:
		return q.withDefaults(c)
	case Abusers:
		return q.withDefaults(c)
	}
	return p
}
