package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sony/gobreaker/v2"
)

// errServerFailure tells the circuit breaker that a response was a failure.
var errServerFailure = errors.New("client: server error")

// Breaker is an http.RoundTripper with a circuit breaker
// (github.com/sony/gobreaker/v2): after enough failures in a row it fails
// fast for a while, without sending, then lets a few requests probe the
// dependency before it closes again.
//
// A transport error and a 5xx response count as failures; everything else,
// 429 included, counts as a success: a rate-limited server is working, and
// the right answer to a 429 is to wait (Transport, Pacer), not to stop
// calling it. A request abandoned by its own context counts as neither.
// While the breaker is open, RoundTrip returns an error wrapping
// gobreaker.ErrOpenState (or ErrTooManyRequests while half-open), which a
// Transport does not retry.
//
// Make one Breaker per dependency. It is safe for concurrent use.
type Breaker struct {
	base http.RoundTripper
	cb   *gobreaker.CircuitBreaker[*http.Response]
}

// NewBreaker returns a Breaker that sends through base (nil means
// http.DefaultTransport) with the given settings; their zero values are
// gobreaker's defaults (trip after more than 5 consecutive failures, stay
// open 60 s, one probe). Settings.IsExcluded, when set, is consulted in
// addition to the Breaker's own exclusion of context errors.
func NewBreaker(base http.RoundTripper, st gobreaker.Settings) *Breaker {
	if base == nil {
		base = http.DefaultTransport
	}
	excluded := st.IsExcluded
	st.IsExcluded = func(err error) bool {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrWaitTooLong) {
			return true
		}
		return excluded != nil && excluded(err)
	}
	return &Breaker{base: base, cb: gobreaker.NewCircuitBreaker[*http.Response](st)}
}

// State returns the breaker's current state.
func (b *Breaker) State() gobreaker.State { return b.cb.State() }

// Counts returns the breaker's counts in the current state.
func (b *Breaker) Counts() gobreaker.Counts { return b.cb.Counts() }

// RoundTrip implements http.RoundTripper.
func (b *Breaker) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := false
	resp, err := b.cb.Execute(func() (*http.Response, error) {
		sent = true
		resp, err := b.base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 500 {
			return resp, errServerFailure
		}
		return resp, nil
	})
	switch {
	case errors.Is(err, errServerFailure):
		return resp, nil
	case err != nil && !sent:
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("client: circuit breaker %q: %w", b.cb.Name(), err)
	}
	return resp, err
}
