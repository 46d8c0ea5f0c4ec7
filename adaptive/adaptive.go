// Package adaptive is a concurrency limiter whose limit follows the measured
// latency: it admits a request while fewer than the limit are in flight, and
// after each window of completed requests it moves the limit as its
// Algorithm says (Gradient, Gradient2 or AIMD), between a floor and a
// ceiling. When a backend slows down because it is past its capacity, the
// limit falls and the excess is refused at once rather than queued; when
// latency is back to normal, the limit grows again.
//
// Requests carry a Priority. Each priority may fill only a share of the
// limit (Sheddable less than Default, Default less than Critical), so as the
// limit tightens the sheddable class is refused first and the critical class
// last.
//
// A Limiter has no store and no network: it is a wrapper-layer building
// block that the faces (an HTTP middleware, a proxy, a gRPC interceptor)
// put around the work they limit. Time comes from an injected sluice.Clock,
// so tests run it on a fake clock; Acquire and a Token's Done do not
// allocate.
package adaptive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// Priority ranks requests for shedding: when the limit tightens, lower
// priorities are refused first. The zero value is Default. A value below
// Sheddable counts as Sheddable, one above Critical as Critical.
type Priority int8

// The priorities, lowest first.
const (
	// Sheddable is work that can be dropped first: prefetches, batch jobs,
	// retries of background work.
	Sheddable Priority = -1
	// Default is ordinary traffic; it is the zero value.
	Default Priority = 0
	// Critical is work refused only when the whole limit is in use: health
	// checks, user-facing writes.
	Critical Priority = 1
)

// NumPriorities is the number of distinct priorities; Priority.Index maps
// each into [0, NumPriorities).
const NumPriorities = 3

// Index returns p's position among the priorities, lowest first: 0 for
// Sheddable, 1 for Default, 2 for Critical. Out-of-range values are clamped.
func (p Priority) Index() int {
	return int(min(max(p, Sheddable), Critical) - Sheddable)
}

// String returns "sheddable", "default" or "critical".
func (p Priority) String() string {
	return [...]string{"sheddable", "default", "critical"}[p.Index()]
}

// ParsePriority returns the priority named s ("sheddable", "default" or
// "critical"; "" is Default), or an error for any other name.
func ParsePriority(s string) (Priority, error) {
	switch s {
	case "sheddable":
		return Sheddable, nil
	case "", "default":
		return Default, nil
	case "critical":
		return Critical, nil
	}
	return Default, fmt.Errorf("adaptive: unknown priority %q (want sheddable, default or critical)", s)
}

// Outcome says how a request that held a Token ended.
type Outcome uint8

const (
	// Success: the request completed; its latency is a sample.
	Success Outcome = iota
	// Dropped: the request failed in a way that signals overload (a
	// timeout, a refusal by the backend). AIMD backs off on it; Gradient
	// and Gradient2 ignore it, as Envoy's and Netflix's do.
	Dropped
	// Ignored: the request says nothing about the backend's load (the
	// client went away, the request was invalid); no sample is taken.
	Ignored
)

// Defaults of Config's fields.
const (
	DefaultInitial    = 20
	DefaultMin        = 1
	DefaultMax        = 200
	DefaultWindow     = time.Second
	DefaultMinSamples = 10
	// DefaultDefaultShare is the share of the limit that Default requests
	// may fill; DefaultSheddableShare that of Sheddable ones.
	DefaultDefaultShare   = 0.9
	DefaultSheddableShare = 0.7
)

// Config configures a Limiter. The zero Config is usable: Gradient2 from 20
// in flight, between 1 and 200, one-second windows of at least 10 samples,
// on the system clock.
type Config struct {
	// Algorithm moves the limit after each window. Nil means Gradient2{}
	// (Netflix's defaults); under overload that does not let up it drifts
	// upward (see docs/adaptive.md), where Gradient and AIMD do not.
	Algorithm Algorithm
	// Initial is the limit before the first window. Zero means
	// DefaultInitial; it is clamped into [Min, Max].
	Initial int
	// Min is the floor of the limit, at least 1. Zero means DefaultMin.
	Min int
	// Max is the ceiling of the limit. Zero means DefaultMax.
	Max int
	// Window is the shortest time between two updates of the limit. Zero
	// means DefaultWindow.
	Window time.Duration
	// MinSamples is the fewest completed requests a window needs before
	// the limit moves; a window stays open until it has them. Zero means
	// DefaultMinSamples.
	MinSamples int
	// DefaultShare and SheddableShare are the fractions of the limit that
	// Default and Sheddable requests may fill (Critical may fill all of
	// it), in (0, 1]. Each class is still admitted while nothing is in
	// flight, so that no class starves at a limit of 1. Zero means
	// DefaultDefaultShare and DefaultSheddableShare.
	DefaultShare, SheddableShare float64
	// Clock tells the time of admissions and completions. Nil means the
	// system's monotonic clock.
	Clock sluice.Clock
}

// ErrInvalidConfig is wrapped by New's error for a Config it refuses.
var ErrInvalidConfig = errors.New("adaptive: invalid config")

// An Algorithm moves a limit from one window's measurements. The
// implementations are Gradient, Gradient2 and AIMD; the set is closed.
type Algorithm interface {
	newController() (controller, error)
}

// window is what a controller sees of one window.
type window struct {
	end      time.Time     // when the window closed
	rtt      time.Duration // mean latency of the successful samples; 0 if none
	inflight int           // most requests in flight at once during the window
	dropped  bool          // some request ended Dropped
}

// controller is an algorithm's state.
type controller interface {
	next(limit float64, w window) float64
}

// Limiter is an adaptive concurrency limiter. Make one with New; the zero
// Limiter is not usable. It is safe for concurrent use.
type Limiter struct {
	clock      sluice.Clock
	minLimit   float64
	maxLimit   float64
	span       time.Duration
	minSamples int
	shares     [NumPriorities]float64

	mu       sync.Mutex
	ctrl     controller
	limit    float64
	caps     [NumPriorities]int // in-flight bound per priority
	inflight int
	lastRTT  time.Duration
	admitted [NumPriorities]uint64
	rejected [NumPriorities]uint64

	winStart   time.Time
	winSum     time.Duration
	winN       int // successful samples
	winDrops   int
	winMaxFlow int
}

// New returns a Limiter configured by c, or an error wrapping
// ErrInvalidConfig.
func New(c Config) (*Limiter, error) {
	if err := c.fill(); err != nil {
		return nil, err
	}
	algo := c.Algorithm
	if algo == nil {
		algo = Gradient2{}
	}
	ctrl, err := algo.newController()
	if err != nil {
		return nil, err
	}
	l := &Limiter{
		clock:      sluice.ClockOr(c.Clock),
		minLimit:   float64(c.Min),
		maxLimit:   float64(c.Max),
		span:       c.Window,
		minSamples: c.MinSamples,
		shares:     [NumPriorities]float64{c.SheddableShare, c.DefaultShare, 1},
		ctrl:       ctrl,
		limit:      float64(min(max(c.Initial, c.Min), c.Max)),
	}
	l.winStart = l.now()
	l.setCaps()
	return l, nil
}

// fill applies the defaults and checks the ranges.
func (c *Config) fill() error {
	c.Initial = cmp.Or(c.Initial, DefaultInitial)
	c.Min = cmp.Or(c.Min, DefaultMin)
	c.Max = cmp.Or(c.Max, DefaultMax)
	c.MinSamples = cmp.Or(c.MinSamples, DefaultMinSamples)
	c.Window = cmp.Or(c.Window, DefaultWindow)
	c.DefaultShare = cmp.Or(c.DefaultShare, DefaultDefaultShare)
	c.SheddableShare = cmp.Or(c.SheddableShare, DefaultSheddableShare)
	switch {
	case c.Min < 1 || c.Max < c.Min:
		return fmt.Errorf("%w: need 1 <= Min <= Max, have Min %d, Max %d", ErrInvalidConfig, c.Min, c.Max)
	case c.Initial < 0 || c.MinSamples < 0 || c.Window < 0:
		return fmt.Errorf("%w: Initial, MinSamples and Window must not be negative", ErrInvalidConfig)
	case !(c.DefaultShare > 0 && c.DefaultShare <= 1) || !(c.SheddableShare > 0 && c.SheddableShare <= 1):
		return fmt.Errorf("%w: shares must be in (0, 1], have default %v, sheddable %v", ErrInvalidConfig, c.DefaultShare, c.SheddableShare)
	}
	return nil
}

func (l *Limiter) now() time.Time { return l.clock.Now() }

// setCaps recomputes the per-priority bounds from the limit. Guarded by mu.
func (l *Limiter) setCaps() {
	for i, s := range l.shares {
		l.caps[i] = max(1, int(math.Floor(l.limit*s+1e-9)))
	}
}

// Token is an admitted request's hold on the limit. Exactly one of Done,
// Record or Release must be called on it, once, when the request ends. The
// zero Token (what a refused Acquire returns) holds nothing, and its
// methods do nothing.
type Token struct {
	l     *Limiter
	start time.Time
}

// Acquire admits a request of priority p if fewer requests are in flight
// than p may fill, and returns its Token and true; otherwise it returns
// false at once, never waiting. A request whose ctx is already done is
// refused without being counted, since nobody waits for its answer.
func (l *Limiter) Acquire(ctx context.Context, p Priority) (Token, bool) {
	if ctx.Err() != nil {
		return Token{}, false
	}
	i := p.Index()
	now := l.now()
	l.mu.Lock()
	if l.inflight >= l.caps[i] {
		l.rejected[i]++
		l.mu.Unlock()
		return Token{}, false
	}
	l.inflight++
	l.winMaxFlow = max(l.winMaxFlow, l.inflight)
	l.admitted[i]++
	l.mu.Unlock()
	return Token{l: l, start: now}, true
}

// Done ends the request with outcome o; its latency is the time since
// Acquire on the Limiter's clock.
func (t Token) Done(o Outcome) {
	if t.l == nil {
		return
	}
	now := t.l.now()
	t.l.record(now, now.Sub(t.start), o)
}

// Record ends the request with outcome o and the latency rtt measured by
// the caller (say, the backend's own processing time).
func (t Token) Record(rtt time.Duration, o Outcome) {
	if t.l == nil {
		return
	}
	t.l.record(t.l.now(), rtt, o)
}

// Release ends the request without a sample, as Done(Ignored).
func (t Token) Release() {
	if t.l == nil {
		return
	}
	t.l.record(time.Time{}, 0, Ignored)
}

// record frees one slot and adds a sample; when the window is complete it
// moves the limit.
func (l *Limiter) record(now time.Time, rtt time.Duration, o Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight > 0 { // a Token ended twice must not open extra slots
		l.inflight--
	}
	switch {
	case o == Ignored:
		return
	case o == Dropped:
		l.winDrops++
	case rtt > 0:
		l.winSum += rtt
		l.winN++
	default:
		return // a zero or negative latency says nothing
	}
	if now.Sub(l.winStart) < l.span || l.winN+l.winDrops < l.minSamples {
		return
	}
	w := window{end: now, inflight: l.winMaxFlow, dropped: l.winDrops > 0}
	if l.winN > 0 {
		w.rtt = l.winSum / time.Duration(l.winN)
		l.lastRTT = w.rtt
	}
	next := l.ctrl.next(l.limit, w)
	if !math.IsNaN(next) {
		l.limit = min(max(next, l.minLimit), l.maxLimit)
		l.setCaps()
	}
	l.winStart, l.winSum, l.winN, l.winDrops, l.winMaxFlow = now, 0, 0, 0, l.inflight
}

// ByPriority holds one count per priority, indexed by Priority.Index.
type ByPriority [NumPriorities]uint64

// Of returns p's count.
func (b ByPriority) Of(p Priority) uint64 { return b[p.Index()] }

// Total returns the sum over the priorities.
func (b ByPriority) Total() uint64 { return b[0] + b[1] + b[2] }

// Stats is a snapshot of a Limiter, for gauges and counters.
type Stats struct {
	// Limit is the current limit: how many requests may be in flight.
	Limit int
	// InFlight is how many are.
	InFlight int
	// RTT is the mean latency of the last completed window's successful
	// requests; 0 before the first.
	RTT time.Duration
	// Admitted and Rejected count Acquire's answers since New.
	Admitted, Rejected ByPriority
}

// Stats returns the Limiter's current state.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{
		Limit: l.caps[Critical.Index()], InFlight: l.inflight, RTT: l.lastRTT,
		Admitted: l.admitted, Rejected: l.rejected,
	}
}

// Limit returns the current limit.
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.caps[Critical.Index()]
}

// RetryAfter is a hint for a refused caller: the mean latency of the last
// window, the time in which a slot typically frees, or 0 before the first
// window.
func (l *Limiter) RetryAfter() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastRTT
}
