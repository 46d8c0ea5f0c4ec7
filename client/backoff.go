package client

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// Jitter selects how Backoff randomizes its delays. The zero value is
// FullJitter.
type Jitter uint8

const (
	// FullJitter waits a uniformly random time in [0, min(Cap, Base·2^n)]
	// before retry n (counted from 0). It spreads clients that failed
	// together over the whole window, and is the default.
	FullJitter Jitter = iota
	// EqualJitter waits half of min(Cap, Base·2^n) plus a uniformly random
	// time in the other half: never less than half the window.
	EqualJitter
	// DecorrelatedJitter waits a uniformly random time in
	// [Base, 3·previous wait], capped at Cap; each wait grows from the last
	// one rather than from the attempt number.
	DecorrelatedJitter
	// NoJitter waits exactly min(Cap, Base·2^n). Clients that failed
	// together retry together; it is for tests and single clients.
	NoJitter
)

// String returns the jitter's name, such as "full".
func (j Jitter) String() string {
	switch j {
	case FullJitter:
		return "full"
	case EqualJitter:
		return "equal"
	case DecorrelatedJitter:
		return "decorrelated"
	case NoJitter:
		return "none"
	}
	return "jitter(" + strconv.Itoa(int(j)) + ")"
}

// Defaults of Backoff's fields.
const (
	DefaultBase        = 200 * time.Millisecond
	DefaultCap         = 30 * time.Second
	DefaultMaxAttempts = 4
)

// Backoff is a schedule of waits between attempts: exponential growth from
// Base, capped at Cap, randomized by Jitter, for at most MaxAttempts attempts
// and MaxElapsed in total.
//
// The zero value is usable: full jitter from 200ms up to 30s, four attempts
// (the first and three retries), no bound on total time but the request's
// context. Backoff is a plain value; it is safe for concurrent use when Rand
// is.
type Backoff struct {
	// Base is the first window: retry 0 waits up to Base. Zero or negative
	// means DefaultBase.
	Base time.Duration
	// Cap bounds every delay. Zero or negative means DefaultCap.
	Cap time.Duration
	// MaxAttempts is the most attempts made, the first included: 1 never
	// retries. Zero or negative means DefaultMaxAttempts.
	MaxAttempts int
	// MaxElapsed bounds the time from the first attempt to the start of
	// the last: a wait that would end later is not taken. Zero means no
	// bound (the request's context still applies).
	MaxElapsed time.Duration
	// Jitter randomizes the delays. The zero value is FullJitter.
	Jitter Jitter
	// Rand returns a uniformly random number in [0, 1). Nil means
	// math/rand/v2's Float64. When the Backoff is used by several
	// goroutines at once (as a Transport's is), Rand must be safe for
	// concurrent use; a *rand.Rand's Float64 is not, unless guarded.
	// Values outside [0, 1) are clamped into it.
	Rand func() float64
}

func (b Backoff) base() time.Duration {
	if b.Base <= 0 {
		return DefaultBase
	}
	return b.Base
}

func (b Backoff) cap() time.Duration {
	if b.Cap <= 0 {
		return DefaultCap
	}
	return b.Cap
}

func (b Backoff) maxAttempts() int {
	if b.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return b.MaxAttempts
}

// rand returns a random number in [0, 1).
func (b Backoff) rand() float64 {
	var r float64
	if b.Rand == nil {
		r = rand.Float64()
	} else {
		r = b.Rand()
	}
	if !(r >= 0) { // also NaN
		return 0
	}
	if r >= 1 {
		return math.Nextafter(1, 0)
	}
	return r
}

// Delay returns the wait before retry attempt (0 for the first retry, 1 for
// the second, …); prev is the previous wait, which only DecorrelatedJitter
// uses (zero or negative means Base). The result is in [0, Cap]. Large
// attempts do not overflow: the window saturates at Cap. A negative attempt
// counts as 0.
func (b Backoff) Delay(attempt int, prev time.Duration) time.Duration {
	base, limit := b.base(), b.cap()
	if b.Jitter == DecorrelatedJitter {
		if prev < base {
			prev = base
		}
		hi := limit
		if prev <= limit/3 {
			hi = 3 * prev
		}
		if hi <= base {
			return min(base, limit)
		}
		return min(base+scale(b.rand(), hi-base), limit)
	}
	w := window(base, limit, attempt)
	switch b.Jitter {
	case EqualJitter:
		return w - w/2 + scale(b.rand(), w/2)
	case NoJitter:
		return w
	default:
		return scale(b.rand(), w)
	}
}

// window returns min(limit, base·2^attempt) without overflowing.
func window(base, limit time.Duration, attempt int) time.Duration {
	if attempt < 0 {
		attempt = 0
	}
	if base >= limit {
		return limit
	}
	if attempt >= 62 || base > limit>>attempt {
		return limit
	}
	return base << attempt
}

// scale returns r·d for r in [0, 1), never above d, without the float to
// integer overflow that r·d near 2^63 would risk.
func scale(r float64, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	f := r * float64(d)
	if f >= float64(d) {
		return d
	}
	return time.Duration(f)
}
