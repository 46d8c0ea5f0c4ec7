package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// GRPC is the calling side of a rate limit for gRPC: client interceptors
// that pace calls with a Pacer and retry refused or failed calls the way
// Do does, honouring the server's google.rpc.RetryInfo.
//
// The unary interceptor retries a call only when its method is idempotent
// (see Idempotent), and only when the status says a retry can succeed:
//
//   - UNAVAILABLE (transient, AIP-194), after the RetryInfo's delay if the
//     status carries one, else after the Backoff's delay;
//   - RESOURCE_EXHAUSTED only with a RetryInfo, after its delay: a quota
//     whose server says when it has room again. Without one the
//     exhaustion may last hours (or be gRPC's own flow control), and the
//     status is returned at once.
//
// A RetryInfo delay is waited in full, plus up to 10% jitter, never less;
// a delay longer than Backoff.Cap, or one that would end past the call's
// deadline, is not waited for: the call fails with the server's status.
// Any other status is returned at once. The error returned is the last
// attempt's status error as the server sent it, details included, or the
// context's status when the call's context ends.
//
// The interceptor is one retry layer, marked as Do marks its context (see
// the package documentation): inside Do or Retry it makes one attempt. A
// service config with a retryPolicy makes grpc-go retry inside each of
// these attempts (it reads the grpc-retry-pushback-ms trailer, not
// RetryInfo); keep one of the two layers, as for HTTP. grpc-go does not
// let an interceptor read the channel's service config, so the
// interceptor cannot follow its retryPolicy itself.
//
// The zero GRPC retries idempotent methods by their proto options, on
// Backoff's defaults, without pacing.
type GRPC struct {
	// Backoff schedules the retries; its MaxAttempts counts the first
	// attempt.
	Backoff Backoff
	// Idempotent reports whether a method, by its full name
	// ("/pkg.Service/Method"), may be sent more than once. Nil means
	// IdempotentByProto.
	Idempotent func(fullMethod string) bool
	// Pacer, if not nil, paces every attempt (retries included) as it
	// paces HTTP requests, and a refusal's RetryInfo holds the call's key
	// until its delay has passed, so that concurrent calls wait too. Its
	// Key function sees a stand-in *http.Request whose URL has scheme
	// "grpc", the ClientConn's target as host and the full method as
	// path; the default key, PerHost, is then one allowance per target.
	Pacer *Pacer
}

// IdempotentByProto reports whether the method's descriptor, found in
// protoregistry.GlobalFiles (where generated code registers itself), has
// the option idempotency_level set to NO_SIDE_EFFECTS or IDEMPOTENT. An
// unknown method is not idempotent.
func IdempotentByProto(fullMethod string) bool {
	svc, m, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return false
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc + "." + m))
	if err != nil {
		return false
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return false
	}
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	if !ok {
		return false
	}
	switch opts.GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_NO_SIDE_EFFECTS, descriptorpb.MethodOptions_IDEMPOTENT:
		return true
	}
	return false
}

// IdempotentMethods returns an Idempotent function that holds for the
// methods named (full names, "/pkg.Service/Method") and for those
// IdempotentByProto accepts.
func IdempotentMethods(fullMethods ...string) func(fullMethod string) bool {
	set := make(map[string]bool, len(fullMethods))
	for _, m := range fullMethods {
		set[m] = true
	}
	return func(m string) bool { return set[m] || IdempotentByProto(m) }
}

// UnaryClientInterceptor returns the unary interceptor; install it with
// grpc.WithUnaryInterceptor (outside any interceptor that should see each
// attempt).
func (g *GRPC) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		target := cc.Target()
		attempt := func(ctx context.Context) error {
			return g.pace(ctx, target, method, func(ctx context.Context) error {
				return invoker(ctx, method, req, reply, cc, opts...)
			})
		}
		idempotent := g.Idempotent
		if idempotent == nil {
			idempotent = IdempotentByProto
		}
		if !idempotent(method) {
			return attempt(ctx)
		}
		if ctx.Value(retryingKey{}) != nil {
			// An outer layer retries: one attempt, with the advice it
			// needs (errors.As finds the status error inside).
			return retryAdvice(attempt(ctx))
		}
		var last error
		err := Retry(ctx, g.Backoff, func(ctx context.Context) error {
			last = attempt(ctx)
			return retryAdvice(last)
		})
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return contextStatus(ctx)
		case last != nil:
			return last
		}
		return err
	}
}

// StreamClientInterceptor returns the stream interceptor. It paces the
// opening of each stream and never retries: messages already sent on a
// stream cannot be taken back.
func (g *GRPC) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		var cs grpc.ClientStream
		err := g.pace(ctx, cc.Target(), method, func(ctx context.Context) error {
			var err error
			cs, err = streamer(ctx, desc, cc, method, opts...)
			return err
		})
		return cs, err
	}
}

// RetryInfoDelay returns the delay of the google.rpc.RetryInfo in err's
// status details, and whether there is one with a positive delay.
func RetryInfoDelay(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || st == nil {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			if err := ri.GetRetryDelay().CheckValid(); err != nil {
				return 0, false
			}
			if w := ri.GetRetryDelay().AsDuration(); w > 0 {
				return w, true
			}
			return 0, false
		}
	}
	return 0, false
}

// retryAdvice turns an attempt's error into what Do acts on: nil, a
// RetryAfter with the server's delay, a plain error (Backoff's delay), or
// Permanent.
func retryAdvice(err error) error {
	if err == nil {
		return nil
	}
	wait, hasWait := RetryInfoDelay(err)
	switch status.Code(err) {
	case codes.Unavailable:
		if hasWait {
			return RetryAfter(err, wait)
		}
		return err
	case codes.ResourceExhausted:
		if hasWait {
			return RetryAfter(err, wait)
		}
	}
	return Permanent(err)
}

// pace runs call under g's Pacer, if any: it waits for the call's turn
// and, when the call is refused with a RetryInfo, holds the key for its
// delay.
func (g *GRPC) pace(ctx context.Context, target, method string, call func(ctx context.Context) error) error {
	p := g.Pacer
	if p == nil {
		return call(ctx)
	}
	req := (&http.Request{
		Method: http.MethodPost,
		URL:    &url.URL{Scheme: "grpc", Host: target, Path: method},
		Host:   target,
		Header: http.Header{},
	}).WithContext(ctx)
	s, seq, err := p.enter(req)
	defer p.release(s)
	if err != nil {
		if errors.Is(err, ErrWaitTooLong) {
			return status.Error(codes.DeadlineExceeded, err.Error())
		}
		if ctx.Err() != nil {
			return contextStatus(ctx)
		}
		return status.Error(codes.Unavailable, err.Error())
	}
	err = call(ctx)
	if c := status.Code(err); !p.IgnoreServer && (c == codes.ResourceExhausted || c == codes.Unavailable) {
		if wait, ok := RetryInfoDelay(err); ok {
			// As a Retry-After does for HTTP: no request until wait.
			p.hold(s, seq, time.Now(), report{reset: wait})
		}
	}
	return err
}

// contextStatus is the status of a call whose context ended: CANCELED or
// DEADLINE_EXCEEDED, with the context's cause as its message when it has
// one of its own.
func contextStatus(ctx context.Context) error {
	st := status.FromContextError(ctx.Err())
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return status.Error(st.Code(), cause.Error())
	}
	return st.Err()
}
