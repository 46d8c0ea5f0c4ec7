package grpclimit

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/adaptive"
)

// DefaultMinRetryDelay is the least RetryInfo delay Concurrency sends when
// a config names none.
const DefaultMinRetryDelay = 50 * time.Millisecond

// ConcurrencyConfig configures Concurrency.
type ConcurrencyConfig struct {
	// Limiter admits the calls. Required; it may be shared with other
	// faces that send work to the same backend.
	Limiter *adaptive.Limiter
	// Priority returns a call's priority. Nil means adaptive.Default for
	// every call. PriorityFromMetadata reads it from the caller, which
	// only trusted callers should be allowed to set.
	Priority func(ctx context.Context, fullMethod string) adaptive.Priority
	// Outcome classifies a call's result for the limiter. Nil means
	// DefaultOutcome.
	Outcome func(err error) adaptive.Outcome
	// MinRetryDelay is the least delay a refusal's RetryInfo asks for;
	// the delay is otherwise the limiter's recent mean latency, the time
	// in which a slot typically frees. Zero means DefaultMinRetryDelay.
	MinRetryDelay time.Duration
	// Domain is the ErrorInfo domain of refusals. Empty means DefaultDomain.
	Domain string
}

// Concurrency is a gRPC adaptive concurrency limiter. Make one with
// NewConcurrency; it is safe for concurrent use.
//
// A refused call gets UNAVAILABLE, not RESOURCE_EXHAUSTED: the refusal is
// load shedding, a transient state of the server that a retry with backoff
// (or on another replica) may well get past, which is what UNAVAILABLE
// means to gRPC clients and to AIP-194's retry guidance (and what HTTP's
// 503 means, as Envoy's adaptive concurrency filter answers).
// RESOURCE_EXHAUSTED stays the answer of a caller's quota (RateLimit),
// which clients should not retry blindly, and is also what gRPC itself
// emits for flow control and oversized messages. The refusal carries an
// ErrorInfo with reason OVERLOADED and a RetryInfo.
type Concurrency struct {
	c ConcurrencyConfig
}

// NewConcurrency checks c and returns its Concurrency.
func NewConcurrency(c ConcurrencyConfig) (*Concurrency, error) {
	if c.Limiter == nil {
		return nil, errors.New("grpclimit: ConcurrencyConfig.Limiter is nil")
	}
	if c.Outcome == nil {
		c.Outcome = DefaultOutcome
	}
	if c.MinRetryDelay <= 0 {
		c.MinRetryDelay = DefaultMinRetryDelay
	}
	if c.Domain == "" {
		c.Domain = DefaultDomain
	}
	return &Concurrency{c: c}, nil
}

// DefaultOutcome classifies a call's error: nil and most errors are a
// Success sample (the server did its work, however it ended);
// DEADLINE_EXCEEDED, UNAVAILABLE and RESOURCE_EXHAUSTED are Dropped (signs
// of overload); CANCELED is Ignored (the caller left).
func DefaultOutcome(err error) adaptive.Outcome {
	if err == nil {
		return adaptive.Success
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted:
		return adaptive.Dropped
	case codes.Canceled:
		return adaptive.Ignored
	}
	return adaptive.Success
}

// PriorityFromMetadata returns a Priority function that reads the first
// value of the metadata field name ("sheddable", "default" or "critical");
// a call without it, or with another value, is adaptive.Default. A caller
// can claim any priority: use it only behind something that sets or
// checks the field.
func PriorityFromMetadata(name string) func(ctx context.Context, fullMethod string) adaptive.Priority {
	return func(ctx context.Context, _ string) adaptive.Priority {
		vs := metadata.ValueFromIncomingContext(ctx, name)
		if len(vs) == 0 {
			return adaptive.Default
		}
		p, err := adaptive.ParsePriority(vs[0])
		if err != nil {
			return adaptive.Default
		}
		return p
	}
}

// Unary returns the unary server interceptor.
func (cc *Concurrency) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		tok, err := cc.acquire(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		var resp any
		err = cc.serve(tok, func() (err error) {
			resp, err = handler(ctx, req)
			return err
		})
		return resp, err
	}
}

// Stream returns the stream server interceptor. A stream holds its slot
// until the handler returns; its whole life is the latency sample, so put
// long-lived streams under a Limiter of their own.
func (cc *Concurrency) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		tok, err := cc.acquire(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return cc.serve(tok, func() error { return handler(srv, ss) })
	}
}

// serve runs an admitted call's handler under tok: the call's outcome is
// tok's sample, and a handler that panics frees the slot and takes none.
func (cc *Concurrency) serve(tok adaptive.Token, handler func() error) error {
	done := false
	defer func() {
		if !done {
			tok.Release()
		}
	}()
	err := handler()
	done = true
	tok.Done(cc.c.Outcome(err))
	return err
}

func (cc *Concurrency) acquire(ctx context.Context, method string) (adaptive.Token, error) {
	p := adaptive.Default
	if cc.c.Priority != nil {
		p = cc.c.Priority(ctx, method)
	}
	tok, ok := cc.c.Limiter.Acquire(ctx, p)
	if ok {
		return tok, nil
	}
	if ctx.Err() != nil {
		return tok, status.FromContextError(ctx.Err()).Err()
	}
	wait := max(cc.c.Limiter.RetryAfter(), cc.c.MinRetryDelay)
	setPushback(ctx, wait)
	return tok, refusal(codes.Unavailable, "grpclimit: server overloaded, call shed", cc.c.Domain, ReasonOverloaded, method, wait, nil)
}
