package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
)

// ErrBreakerOpen is wrapped by the error a Breaker returns, without sending
// the request, while it is open (or while its one probe is in flight). A
// Transport does not retry it.
var ErrBreakerOpen = errors.New("circuit breaker is open")

// BreakerSettings configures a Breaker. The zero value is usable: every
// field has a default.
type BreakerSettings struct {
	// Name names the breaker in its errors. Default "".
	Name string
	// Threshold is how many consecutive failures open the breaker.
	// Default 6.
	Threshold int
	// Timeout is how long the breaker stays open before one request probes
	// the dependency. Default 60s.
	Timeout time.Duration
	// MaxTimeout, when above Timeout, lets the open period double on every
	// failed probe up to it. Default Timeout: the period stays the same.
	MaxTimeout time.Duration
	// IsExcluded, when set, marks more errors as counting neither as a
	// failure nor as a success, in addition to the Breaker's own exclusion
	// of context errors and ErrWaitTooLong.
	IsExcluded func(error) bool
	// Clock tells the time; nil means the system clock.
	Clock sluice.Clock
}

// Breaker is an http.RoundTripper with a circuit breaker: after Threshold
// failures in a row it fails fast for a while, without sending, then lets
// one request probe the dependency; a good probe closes it again. It is a
// thin adapter over failsafe.Breaker, the module's one circuit breaker (its
// doc says why that one and not github.com/sony/gobreaker).
//
// A transport error and a 5xx response count as failures; everything else,
// 429 included, counts as a success: a rate-limited server is working, and
// the right answer to a 429 is to wait (Transport, Pacer), not to stop
// calling it. A request abandoned by its own context counts as neither.
// While the breaker is open, RoundTrip returns an error wrapping
// ErrBreakerOpen, which a Transport does not retry.
//
// Make one Breaker per dependency. It is safe for concurrent use. Its zero
// value is not usable; make one with NewBreaker.
type Breaker struct {
	base     http.RoundTripper
	name     string
	excluded func(error) bool
	cb       *failsafe.Breaker
}

// BreakerState is the state of a Breaker.
type BreakerState uint8

const (
	// BreakerClosed: requests are sent.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen: the open period has ended; the next request probes.
	BreakerHalfOpen
	// BreakerOpen: requests fail fast.
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return fmt.Sprintf("BreakerState(%d)", uint8(s))
}

// NewBreaker returns a Breaker that sends through base (nil means
// http.DefaultTransport) with the given settings.
func NewBreaker(base http.RoundTripper, st BreakerSettings) *Breaker {
	if base == nil {
		base = http.DefaultTransport
	}
	if st.Threshold <= 0 {
		st.Threshold = 6
	}
	if st.Timeout <= 0 {
		st.Timeout = 60 * time.Second
	}
	return &Breaker{base: base, name: st.Name, excluded: st.IsExcluded, cb: failsafe.NewBreaker(failsafe.BreakerConfig{
		Threshold: st.Threshold, Backoff: st.Timeout, MaxBackoff: max(st.MaxTimeout, st.Timeout), Clock: st.Clock,
	})}
}

// State returns the breaker's current state.
func (b *Breaker) State() BreakerState {
	until := b.cb.OpenUntil()
	switch {
	case until.IsZero():
		return BreakerClosed
	case b.cb.Now().Before(until):
		return BreakerOpen
	}
	return BreakerHalfOpen
}

// ConsecutiveFailures returns the failures counted since the last success.
func (b *Breaker) ConsecutiveFailures() int64 { return b.cb.ConsecutiveFailures() }

// RoundTrip implements http.RoundTripper.
func (b *Breaker) RoundTrip(req *http.Request) (*http.Response, error) {
	ok, probe := b.cb.Allow(b.cb.Now())
	if !ok {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("client: circuit breaker %q: %w", b.name, ErrBreakerOpen)
	}
	done := false
	defer func() {
		if !done { // base panicked: a failure, as a 5xx is
			b.cb.Failure(b.cb.Now(), probe)
		}
	}()
	resp, err := b.base.RoundTrip(req)
	done = true
	switch {
	case err != nil && b.isExcluded(err):
		b.cb.Release(probe)
	case err != nil || resp.StatusCode >= 500:
		b.cb.Failure(b.cb.Now(), probe)
	default:
		b.cb.Success(probe)
	}
	return resp, err
}

// isExcluded reports whether err counts neither as a failure nor as a
// success.
func (b *Breaker) isExcluded(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrWaitTooLong) {
		return true
	}
	return b.excluded != nil && b.excluded(err)
}
