// Package grpclimit puts Sluice's limits in front of a gRPC server, as server
// interceptors (unary and stream):
//
//   - RateLimit spends a call's cost from a key's allowance in any
//     sluice.Limiter, keyed by method and metadata, and refuses a call over
//     the limit with RESOURCE_EXHAUSTED, carrying google.rpc.ErrorInfo,
//     google.rpc.RetryInfo (when to come back) and google.rpc.QuotaFailure
//     (which quota), plus the grpc-retry-pushback-ms trailer that grpc-go's
//     own retries read.
//   - Concurrency admits a call through an adaptive.Limiter, whose limit
//     follows the measured latency, and sheds the excess by priority with
//     UNAVAILABLE (load shedding, transient: retry with backoff), carrying
//     ErrorInfo and RetryInfo.
//
// Package client's UnaryClientInterceptor is the other side: it honours
// RetryInfo and retries only idempotent methods.
package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
)

// DefaultDomain is the ErrorInfo domain of the refusals when a config names
// none.
const DefaultDomain = "sluice"

// Reasons of the ErrorInfo details the interceptors attach (stable: clients
// may match on them together with the domain).
const (
	// ReasonRateLimited: the call's key is over its rate limit.
	ReasonRateLimited = "RATE_LIMIT_EXCEEDED"
	// ReasonOverloaded: the server shed the call to keep its latency.
	ReasonOverloaded = "OVERLOADED"
	// ReasonLimiterUnavailable: the rate limit store failed closed.
	ReasonLimiterUnavailable = "RATE_LIMITER_UNAVAILABLE"
)

// RateLimitConfig configures RateLimit.
type RateLimitConfig struct {
	// Limiter holds the allowances. Required.
	Limiter sluice.Limiter
	// Limit is each key's allowance, for methods not in Methods. A zero
	// Limit leaves those methods unlimited; otherwise it must be valid.
	Limit sluice.Limit
	// Methods gives some methods, by full name ("/pkg.Service/Method"),
	// a limit of their own instead of Limit. Each must be valid.
	Methods map[string]sluice.Limit
	// Key returns the key a call spends, or "" to let the call through
	// unlimited. Nil means ByMethod. A key longer than sluice.MaxKeyLen
	// is hashed (sluice.HashKey) rather than refused.
	Key func(ctx context.Context, fullMethod string) string
	// Cost returns what a call spends, at least 1. Nil means 1. A call
	// whose cost is below 1 or past its limit's capacity is refused with
	// INVALID_ARGUMENT (never let through as a failing store would be).
	Cost func(ctx context.Context, fullMethod string) int
	// Domain is the ErrorInfo domain of refusals. Empty means DefaultDomain.
	Domain string
	// StoreErrorCode is the status of a call when the Limiter fails;
	// codes.OK (the zero value) lets the call through (fail open). Wrap
	// the Limiter with package failsafe for finer choices: a limiter that
	// fails closed returns an error wrapping sluice.ErrUnavailable, which
	// always refuses the call, with StoreErrorCode or else UNAVAILABLE,
	// and a RetryInfo of its Retry-After.
	StoreErrorCode codes.Code
	// Logger receives one warning per Limiter failure. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// RateLimit is a gRPC rate limiter. Make one with NewRateLimit; it is safe
// for concurrent use.
type RateLimit struct {
	c RateLimitConfig
}

// NewRateLimit checks c and returns its RateLimit.
func NewRateLimit(c RateLimitConfig) (*RateLimit, error) {
	if c.Limiter == nil {
		return nil, errors.New("grpclimit: RateLimitConfig.Limiter is nil")
	}
	if c.Limit != (sluice.Limit{}) {
		if err := c.Limit.Validate(); err != nil {
			return nil, fmt.Errorf("grpclimit: Limit: %w", err)
		}
	}
	for m, lim := range c.Methods {
		if err := lim.Validate(); err != nil {
			return nil, fmt.Errorf("grpclimit: Methods[%q]: %w", m, err)
		}
	}
	if c.Key == nil {
		c.Key = ByMethod
	}
	if c.Domain == "" {
		c.Domain = DefaultDomain
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &RateLimit{c: c}, nil
}

// ByMethod keys each call by its full method name: one allowance per method
// shared by every caller. gRPC runs the interceptors only for registered
// methods, unless the server has an UnknownServiceHandler (a proxy): then
// the name is the caller's choice, and each distinct name is a key of its
// own in the Limiter; key such a server by something else.
func ByMethod(_ context.Context, fullMethod string) string { return fullMethod }

// ByMetadata returns a key function that keys a call by its method and the
// first value of the metadata field name (say "x-api-key"), so that each
// caller has its own allowance per method. A call without the field gets
// the key of the empty value: callers that do not say who they are share
// one allowance. The value is hashed (sluice.HashKey), so a secret such as
// an API key stays out of the store, and its length does not matter.
func ByMetadata(name string) func(ctx context.Context, fullMethod string) string {
	return func(ctx context.Context, fullMethod string) string {
		v := ""
		if vs := metadata.ValueFromIncomingContext(ctx, name); len(vs) > 0 {
			v = vs[0]
		}
		return sluice.HashKey(fullMethod+" ", v)
	}
}

// Unary returns the unary server interceptor.
func (r *RateLimit) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := r.admit(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor. A stream spends its cost
// once, when it opens.
func (r *RateLimit) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := r.admit(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// admit spends the call's cost and returns nil, or the status error that
// refuses it.
func (r *RateLimit) admit(ctx context.Context, method string) error {
	lim, ok := r.c.Methods[method]
	if !ok {
		lim = r.c.Limit
	}
	if lim == (sluice.Limit{}) {
		return nil
	}
	key := r.c.Key(ctx, method)
	if key == "" {
		return nil
	}
	if len(key) > sluice.MaxKeyLen {
		key = sluice.HashKey("", key)
	}
	cost := 1
	if r.c.Cost != nil {
		cost = r.c.Cost(ctx, method)
	}
	res, err := r.c.Limiter.AllowN(ctx, key, lim, cost)
	switch {
	case errors.Is(err, sluice.ErrBadInput):
		// The call's cost, not the store: refuse it rather than fail open.
		return status.Error(codes.InvalidArgument, "grpclimit: "+err.Error())
	case err != nil:
		return r.storeFailed(ctx, method, res, err)
	case !res.Allowed:
		setPushback(ctx, res.RetryAfter)
		return rateLimited(r.c.Domain, method, key, lim, cost, res)
	}
	return nil
}

// storeFailed logs a failing Limiter and returns the call's refusal, or nil
// to let it through.
func (r *RateLimit) storeFailed(ctx context.Context, method string, res sluice.Result, err error) error {
	r.c.Logger.WarnContext(ctx, "grpclimit: limiter failed", "method", method, "err", err)
	closed := errors.Is(err, sluice.ErrUnavailable)
	if !closed && r.c.StoreErrorCode == codes.OK {
		return nil
	}
	code := r.c.StoreErrorCode
	if code == codes.OK {
		code = codes.Unavailable
	}
	var wait time.Duration
	if closed {
		wait = res.RetryAfter
		setPushback(ctx, wait)
	}
	return refusal(code, "grpclimit: rate limiter unavailable", r.c.Domain, ReasonLimiterUnavailable, method, wait, nil)
}

// setPushback sets the grpc-retry-pushback-ms trailer (gRFC A6) to d, for
// grpc-go's own retry policy.
func setPushback(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	ms := min(d.Milliseconds()+boolInt(d%time.Millisecond != 0), 1<<31-1)
	_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", strconv.FormatInt(ms, 10)))
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
