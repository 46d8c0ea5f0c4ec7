package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// DefaultMaxServerWait is Transport.MaxServerWait's default: the longest a
// server's Retry-After or RateLimit field may make a request wait.
const DefaultMaxServerWait = time.Minute

// DefaultRetryOn is the statuses a Transport retries by default: 429 Too
// Many Requests, 502 Bad Gateway, 503 Service Unavailable and 504 Gateway
// Timeout.
var DefaultRetryOn = []int{
	http.StatusTooManyRequests,
	http.StatusBadGateway,
	http.StatusServiceUnavailable,
	http.StatusGatewayTimeout,
}

// maxDrain bounds how much of a discarded response body is read, so that its
// connection can be reused, before it is closed.
const maxDrain = 64 << 10

// Transport is an http.RoundTripper that retries what is safe to retry, as
// the server asks or else as its Backoff says.
//
// A request is retried only if its method is idempotent (GET, HEAD,
// OPTIONS, TRACE, PUT, DELETE) or it carries an Idempotency-Key (or
// X-Idempotency-Key) header, and only if its body, when it has one, can be
// rewound through GetBody (http.NewRequest sets GetBody for the usual body
// types). Any other request is sent once, as is.
//
// A response is retried when its status is in RetryOn; a transport error
// is retried unless the context is done, it is a certificate error, or it
// comes from a Breaker that is open or a Pacer that would wait too long.
//
// The wait before a retry is, in order of precedence: Retry-After (both
// forms), the RateLimit field's t for an exhausted policy (see ServerWait),
// then the Backoff's delay. A server-given wait gets up to 10% added, so
// that clients told the same time do not return in the same instant; a
// server-given wait of zero is taken as no advice and the Backoff's delay is
// used, since retrying at once is what deepens an overload.
//
// The Transport gives up, without waiting, when the next wait would end
// after the request's deadline, after Backoff.MaxElapsed, or when a server
// asks for longer than MaxServerWait; and after Backoff.MaxAttempts
// attempts. Giving up returns the last response as it is, body unread, if
// there was one, and otherwise a *RetryError wrapping the last transport
// error. The response of every attempt not returned is drained (up to 64
// KiB) and closed. It never retries once the request's context is done; a
// context that ends during a wait ends the request with a *RetryError
// wrapping the context's cause.
//
// The zero Transport is usable: http.DefaultTransport, the default Backoff,
// DefaultRetryOn and DefaultMaxServerWait. A Transport is safe for
// concurrent use if its fields are not changed while in use.
type Transport struct {
	// Base sends each attempt. Nil means http.DefaultTransport.
	Base http.RoundTripper
	// Backoff schedules the waits the server does not choose, and bounds
	// attempts and total time.
	Backoff Backoff
	// RetryOn lists the statuses worth retrying. Nil means DefaultRetryOn;
	// an empty non-nil slice retries transport errors only.
	RetryOn []int
	// MaxServerWait is the longest wait a server may ask for (Retry-After,
	// RateLimit); a longer one ends the retries and returns the response,
	// so that a huge Retry-After never parks the caller. Zero means
	// DefaultMaxServerWait; negative means no bound but the context's.
	MaxServerWait time.Duration
	// CheckRetry, when not nil, decides whether a response (err nil) or a
	// transport error (resp nil) is worth retrying, in place of RetryOn and
	// the default error rules. Idempotency, rewinding, the context and the
	// caps still apply.
	CheckRetry func(req *http.Request, resp *http.Response, err error) bool
	// OnRetry, when not nil, is called before each wait, for logs and
	// metrics. It must not keep the event's Response: its body is drained
	// and closed when OnRetry returns.
	OnRetry func(RetryEvent)
}

// RetryEvent describes one retry about to be made, for Transport.OnRetry.
type RetryEvent struct {
	// Request is the caller's request.
	Request *http.Request
	// Attempt is the number of attempts made so far: 1 before the first
	// retry.
	Attempt int
	// Response is the response being retried, or nil after a transport
	// error. Read its header only.
	Response *http.Response
	// Err is the transport error being retried, or nil.
	Err error
	// Wait is how long the Transport will wait before the next attempt.
	Wait time.Duration
	// FromServer reports that Wait is what the server asked for
	// (Retry-After or RateLimit), plus jitter, rather than the Backoff's.
	FromServer bool
}

// RetryError is the error of a Transport that gave up without a response
// to return (every attempt failed in transport, or the context ended during
// a wait, or a body could not be rewound), and of Retry and Do when they
// give up.
type RetryError struct {
	// Attempts is the number of attempts made.
	Attempts int
	// LastStatus is the status of the last response received, or 0 if
	// none was (always 0 from Retry and Do).
	LastStatus int
	// Err is the last transport error, or the context's cause; from Retry
	// and Do, the operation's last error, wrapped with the context's cause
	// when the context ended.
	Err error
}

// Error implements error.
func (e *RetryError) Error() string {
	s := "client: giving up after " + strconv.Itoa(e.Attempts) + " attempt"
	if e.Attempts != 1 {
		s += "s"
	}
	if e.LastStatus != 0 {
		s += " (last status " + strconv.Itoa(e.LastStatus) + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (e *RetryError) Unwrap() error { return e.Err }

// retryingKey marks a request's context as sent by a retrying Transport.
type retryingKey struct{}

// idempotent lists the methods RFC 9110 §9.2.2 calls idempotent.
var idempotent = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodOptions: true,
	http.MethodTrace: true, http.MethodPut: true, http.MethodDelete: true,
}

// Replayable reports whether Transport may send req more than once: its
// method is idempotent or it carries an Idempotency-Key or X-Idempotency-Key
// header (present, even with no value, as net/http reads it), and its body
// is empty or can be rewound through GetBody.
func Replayable(req *http.Request) bool {
	if !idempotent[req.Method] && req.Method != "" {
		_, ok := req.Header["Idempotency-Key"]
		_, xok := req.Header["X-Idempotency-Key"]
		if !ok && !xok {
			return false
		}
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	ctx := req.Context()
	if ctx.Value(retryingKey{}) != nil || !Replayable(req) {
		return base.RoundTrip(req)
	}
	b := t.Backoff
	maxAttempts := b.maxAttempts()
	deadline, hasDeadline := ctx.Deadline()
	start := time.Now()
	marked := context.WithValue(ctx, retryingKey{}, true)
	var prev time.Duration
	lastStatus := 0
	for attempt := 1; ; attempt++ {
		r := req.WithContext(marked)
		if attempt > 1 && req.Body != nil && req.Body != http.NoBody {
			body, err := req.GetBody()
			if err != nil {
				return nil, &RetryError{Attempts: attempt - 1, LastStatus: lastStatus, Err: fmt.Errorf("client: rewinding the request body: %w", err)}
			}
			r.Body = body
		}
		resp, err := base.RoundTrip(r)
		if err != nil {
			resp = nil
		}
		giveUp := func() (*http.Response, error) {
			if resp != nil {
				if resp.Request == r {
					resp.Request = req // the caller's, not our marked copy
				}
				return resp, nil
			}
			return nil, &RetryError{Attempts: attempt, LastStatus: lastStatus, Err: err}
		}
		if ctx.Err() != nil || attempt >= maxAttempts || !t.shouldRetry(req, resp, err) {
			return giveUp()
		}

		now := time.Now()
		var h http.Header
		if resp != nil {
			h = resp.Header
		}
		wait, fromServer, ok := t.nextWait(h, now, attempt, prev)
		if !ok {
			return giveUp()
		}
		end := now.Add(wait)
		if b.MaxElapsed > 0 && end.Sub(start) > b.MaxElapsed || hasDeadline && !end.Before(deadline) {
			return giveUp()
		}
		if t.OnRetry != nil {
			t.OnRetry(RetryEvent{Request: req, Attempt: attempt, Response: resp, Err: err, Wait: wait, FromServer: fromServer})
		}
		if resp != nil {
			lastStatus = resp.StatusCode
			discard(resp)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, &RetryError{Attempts: attempt, LastStatus: lastStatus, Err: err}
		}
		prev = wait
	}
}

// serverWaitBound returns a MaxServerWait field with its default applied:
// zero means DefaultMaxServerWait, and a negative result means no bound.
func serverWaitBound(d time.Duration) time.Duration {
	if d == 0 {
		return DefaultMaxServerWait
	}
	return d
}

// nextWait chooses the wait after attempt (1 for the first) failed, given
// the header of its response (nil after a transport error) received at now
// and the previous wait. ok is false when the server asks for longer than
// MaxServerWait, and the Transport must give up.
func (t *Transport) nextWait(h http.Header, now time.Time, attempt int, prev time.Duration) (wait time.Duration, fromServer, ok bool) {
	if h != nil {
		if d, found := ServerWait(h, now); found && d > 0 {
			limit := serverWaitBound(t.MaxServerWait)
			if limit >= 0 && d > limit {
				return 0, true, false
			}
			return jitterServerWait(d, t.Backoff.rand(), limit), true, true
		}
	}
	return t.Backoff.Delay(attempt-1, prev), false, true
}

// discard drains up to maxDrain bytes of resp's body and closes it.
func discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	_ = resp.Body.Close()
}

func (t *Transport) shouldRetry(req *http.Request, resp *http.Response, err error) bool {
	if t.CheckRetry != nil {
		return t.CheckRetry(req, resp, err)
	}
	if err != nil {
		return retryableError(err)
	}
	retryOn := t.RetryOn
	if retryOn == nil {
		retryOn = DefaultRetryOn
	}
	return slices.Contains(retryOn, resp.StatusCode)
}

// retryableError reports whether a transport error may go away on its own.
func retryableError(err error) bool {
	var (
		certErr     *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		invalidCert x509.CertificateInvalidError
		hostErr     x509.HostnameError
		retryErr    *RetryError
	)
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrBreakerOpen),
		errors.Is(err, ErrWaitTooLong),
		errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &invalidCert), errors.As(err, &hostErr),
		errors.As(err, &retryErr):
		return false
	}
	return true
}
