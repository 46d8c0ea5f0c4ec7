package failsafe

import (
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// BreakerConfig configures a Breaker. Its zero value is usable: every field
// has a default.
type BreakerConfig struct {
	// Threshold is how many consecutive failures open the breaker.
	// Default 3.
	Threshold int
	// Backoff is how long the breaker stays open after it opens; it doubles
	// on every failed probe up to MaxBackoff. Defaults 1s and 30s (at least
	// Backoff).
	Backoff, MaxBackoff time.Duration
	// Clock tells the time; nil means the system clock.
	Clock sluice.Clock
}

// Breaker is a circuit breaker, the one of this module: package failsafe's
// Limiters (a server's store) and package client's Breaker (a client's
// dependency) both use it.
//
// Closed, it lets every call through and counts consecutive failures; at
// Threshold it opens for Backoff, during which Allow refuses every call.
// When the period ends, exactly one call (the probe) is let through while
// the others keep being refused: its success closes the breaker and resets
// the back-off, its failure reopens it for twice the back-off, up to
// MaxBackoff.
//
// It is kept instead of github.com/sony/gobreaker (which package client
// used) because a server asks it on every decision: it is lock-free (a few
// atomics, no mutex), allocates nothing per call, reads the time from an
// injected sluice.Clock (gobreaker reads time.Now, so tests must fake the
// whole runtime's clock), and backs off exponentially while the dependency
// stays down (gobreaker waits the same Timeout every time). gobreaker's
// extras (rolling count intervals, several half-open probes, pluggable trip
// functions, state shared through a store) are not needed by either user.
// A Breaker covers whatever its caller asks it about: client's, a whole
// dependency; a failsafe Group, one partition of the keys (see
// Config.Partitions), so that one key's failures open only its partition.
//
// A Breaker is safe for concurrent use. Its zero value is not usable; make
// one with NewBreaker.
type Breaker struct {
	threshold            int64
	backoff0, maxBackoff time.Duration
	clock                sluice.Clock

	failures  atomic.Int64 // consecutive failures
	openUntil atomic.Int64 // Unix ns until which the breaker is open; 0 when closed
	probing   atomic.Bool  // a probe is in flight
	backoff   atomic.Int64 // the current back-off, ns
}

// NewBreaker returns a closed Breaker configured by cfg.
func NewBreaker(cfg BreakerConfig) *Breaker {
	b := &Breaker{}
	b.init(cfg)
	return b
}

// init configures a zero b as NewBreaker does, for a Breaker held by value
// (a Group's partitions).
func (b *Breaker) init(cfg BreakerConfig) {
	if cfg.Threshold <= 0 {
		cfg.Threshold = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff < cfg.Backoff {
		cfg.MaxBackoff = max(30*time.Second, cfg.Backoff)
	}
	b.threshold, b.backoff0, b.maxBackoff, b.clock = int64(cfg.Threshold), cfg.Backoff, cfg.MaxBackoff, sluice.ClockOr(cfg.Clock)
	b.backoff.Store(int64(cfg.Backoff))
}

// Now returns the time on the Breaker's clock.
func (b *Breaker) Now() time.Time { return b.clock.Now() }

// Allow reports whether a call may go to the dependency at now, and whether
// that call is the probe of an open breaker. Every call let through must be
// reported with Success, Failure or Release, with the probe flag Allow
// returned: the next probe waits until the current one is reported.
func (b *Breaker) Allow(now time.Time) (ok, probe bool) {
	until := b.openUntil.Load()
	if until == 0 {
		return true, false
	}
	if now.UnixNano() < until || !b.probing.CompareAndSwap(false, true) {
		return false, false
	}
	return true, true
}

// Success records a call that worked. It returns true when it closed an
// open breaker (the call was its probe): the dependency is back.
func (b *Breaker) Success(probe bool) (recovered bool) {
	if probe {
		recovered = b.openUntil.Swap(0) != 0
		b.backoff.Store(int64(b.backoff0))
	}
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if probe {
		b.probing.Store(false)
	}
	return recovered
}

// Failure records a call, made at now, that failed: a failed probe reopens
// the breaker for twice the back-off (up to MaxBackoff); the Threshold-th
// consecutive failure opens a closed breaker. It reports whether this call
// opened the breaker (it was closed): of concurrent failures, exactly one
// opens it.
func (b *Breaker) Failure(now time.Time, probe bool) (opened bool) {
	n := b.failures.Add(1)
	switch {
	case probe:
		d := min(2*time.Duration(b.backoff.Load()), b.maxBackoff)
		b.backoff.Store(int64(d))
		opened = b.openUntil.Swap(now.Add(d).UnixNano()) == 0 // 0: Reset closed it meanwhile
		b.probing.Store(false)
	case n >= b.threshold && b.openUntil.Load() == 0:
		opened = b.openUntil.CompareAndSwap(0, now.Add(time.Duration(b.backoff.Load())).UnixNano())
	}
	return opened
}

// Reset closes the breaker, as a successful probe does, without waiting
// for a probe of its own (a Group does so to its partitions when the
// dependency as a whole is back). It reports whether the breaker was open.
// A probe in flight is still reported by its caller.
func (b *Breaker) Reset() (wasOpen bool) {
	if b.openUntil.Load() == 0 {
		return false
	}
	wasOpen = b.openUntil.Swap(0) != 0
	b.backoff.Store(int64(b.backoff0))
	b.failures.Store(0)
	return wasOpen
}

// Release records a call that says nothing about the dependency (bad input,
// a caller that gave up): a probe's turn passes to the next call.
func (b *Breaker) Release(probe bool) {
	if probe {
		b.probing.Store(false)
	}
}

// ConsecutiveFailures returns the failures recorded since the last
// success.
func (b *Breaker) ConsecutiveFailures() int64 { return b.failures.Load() }

// Available reports whether the breaker is closed: calls go through.
func (b *Breaker) Available() bool { return b.openUntil.Load() == 0 }

// OpenUntil returns when the open breaker lets the next probe through; the
// zero Time when it is closed.
func (b *Breaker) OpenUntil() time.Time {
	if until := b.openUntil.Load(); until != 0 {
		return time.Unix(0, until)
	}
	return time.Time{}
}

// RetryAfter is how long a caller refused at now should wait: until the
// next probe while the breaker is open, else the current back-off.
func (b *Breaker) RetryAfter(now time.Time) time.Duration {
	if until := b.openUntil.Load(); until != 0 && until > now.UnixNano() {
		return time.Duration(until - now.UnixNano())
	}
	return time.Duration(b.backoff.Load())
}
