package client

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PermanentError marks an operation's error as final: Retry and Do return
// at once, without another attempt, when the operation's error wraps one.
// Make one with Permanent.
type PermanentError struct {
	// Err is the operation's error.
	Err error
}

// Permanent wraps err so that Retry and Do do not retry it, as for a
// request the server rejected as invalid. Permanent(nil) is nil. The
// error of Retry still wraps err: errors.Is finds it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// Error returns Err's message.
func (e *PermanentError) Error() string {
	if e.Err == nil {
		return "client: permanent error"
	}
	return e.Err.Error()
}

// Unwrap returns Err.
func (e *PermanentError) Unwrap() error { return e.Err }

// RetryAfterError carries the wait a server asked for, such as a
// Retry-After, out of an operation: Retry and Do wait that long (with a
// little jitter) before the next attempt, rather than as their Backoff
// says. Make one with RetryAfter.
type RetryAfterError struct {
	// Wait is how long the server asked the caller to wait. Zero or
	// negative is no advice: the Backoff's delay is used.
	Wait time.Duration
	// Err is the operation's error; it may be nil.
	Err error
}

// RetryAfter wraps err with the wait d that a server asked for, for Retry
// and Do. For an HTTP response, d is typically ServerWait's:
//
//	if d, ok := client.ServerWait(resp.Header, time.Now()); ok {
//		return client.RetryAfter(err, d)
//	}
func RetryAfter(err error, d time.Duration) error {
	return &RetryAfterError{Wait: d, Err: err}
}

// Error returns a message such as "client: retry after 5s: quota exceeded".
func (e *RetryAfterError) Error() string {
	s := "client: retry after " + e.Wait.String()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// Retry calls op until it returns nil, and returns nil then; it is Do for
// an operation without a result. See Do for when it retries, how long it
// waits and what error it returns.
func Retry(ctx context.Context, b Backoff, op func(ctx context.Context) error) error {
	_, err := Do(ctx, b, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, op(ctx)
	})
	return err
}

// Do calls op until it succeeds, and returns its result then. It is the
// Transport's loop for work other than one HTTP request: a database call, a
// message to publish, or several requests that must succeed together.
//
// Between attempts Do waits as the operation says (its error wraps a
// *RetryAfterError with a positive Wait, plus up to 10% jitter), else as b
// says (Backoff.Delay). It gives up, without waiting, and returns a
// *RetryError with the number of attempts made and wrapping op's last
// error, when:
//
//   - op's error wraps a *PermanentError (see Permanent);
//   - b.MaxAttempts attempts have been made;
//   - the next wait would end after ctx's deadline, or more than
//     b.MaxElapsed after the first attempt began;
//   - the operation asks for a wait longer than b.Cap: waiting less than
//     the server said would only be refused again, and waiting that long
//     is not what the caller allowed (the Transport's MaxServerWait plays
//     this part for HTTP);
//   - ctx is done. Do never calls op with a done context: when ctx ends
//     before the first attempt, the RetryError reports 0 attempts. When it
//     ends during a wait or an attempt, the RetryError wraps both the
//     context's cause and op's last error.
//
// An op error that is a context error while ctx itself is live, such as a
// per-attempt timeout, is retried like any other.
//
// # One retry layer
//
// Do passes op a context marked as Transport marks its requests: a
// Transport that sends a request made with that context makes a single
// attempt, and a Retry or Do called with it calls its op once and returns
// what op returns, as is, so that retries do not multiply. The outermost
// layer retries: op then sees every failure and should turn a response's
// Retry-After into RetryAfter (see ServerWait); it may send through a
// Pacer, which paces and does not retry. Likewise Do called inside a
// Transport's attempt (a RoundTripper built on Do) makes a single attempt.
//
// On failure Do returns T's zero value. It waits on timers and ctx (see
// the package documentation on time), so tests run it under
// testing/synctest.
func Do[T any](ctx context.Context, b Backoff, op func(ctx context.Context) (T, error)) (T, error) {
	if ctx.Value(retryingKey{}) != nil {
		return op(ctx) // an outer layer retries
	}
	var zero T
	maxAttempts := b.maxAttempts()
	inner := context.WithValue(ctx, retryingKey{}, true)
	deadline, hasDeadline := ctx.Deadline()
	start := time.Now()
	var prev time.Duration
	var last error
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return zero, &RetryError{Attempts: attempt - 1, Err: withCause(ctx, last)}
		}
		v, err := op(inner)
		if err == nil {
			return v, nil
		}
		last = err
		var perm *PermanentError
		if ctx.Err() != nil || errors.As(err, &perm) || attempt >= maxAttempts {
			return zero, &RetryError{Attempts: attempt, Err: withCause(ctx, err)}
		}
		wait, ok := b.retryWait(err, attempt, prev)
		end := time.Now().Add(wait)
		if !ok || b.MaxElapsed > 0 && end.Sub(start) > b.MaxElapsed || hasDeadline && !end.Before(deadline) {
			return zero, &RetryError{Attempts: attempt, Err: err}
		}
		if err := sleep(ctx, wait); err != nil {
			return zero, &RetryError{Attempts: attempt, Err: withCause(ctx, last)}
		}
		prev = wait
	}
}

// retryWait returns the wait after attempt (1 for the first) failed with
// err, given the previous wait. ok is false when err asks for a wait longer
// than b's Cap.
func (b Backoff) retryWait(err error, attempt int, prev time.Duration) (wait time.Duration, ok bool) {
	var ra *RetryAfterError
	if errors.As(err, &ra) && ra.Wait > 0 {
		limit := b.cap()
		if ra.Wait > limit {
			return 0, false
		}
		return jitterServerWait(ra.Wait, b.rand(), limit), true
	}
	return b.Delay(attempt-1, prev), true
}

// withCause returns err, or when ctx is done an error wrapping both the
// context's cause and err (which may be nil).
func withCause(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	switch {
	case cause == nil:
		return err
	case err == nil || errors.Is(err, cause):
		return cause
	}
	return fmt.Errorf("%w (last error: %w)", cause, err)
}
