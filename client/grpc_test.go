package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
)

const method = "/test.Svc/Get"

// refused returns a status error of code, with a RetryInfo of wait when
// wait is positive.
func refused(t *testing.T, code codes.Code, wait time.Duration) error {
	t.Helper()
	st := status.New(code, "refused")
	if wait > 0 {
		var err error
		st, err = st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)})
		if err != nil {
			t.Fatal(err)
		}
	}
	return st.Err()
}

// fakeConn is a ClientConn that is never dialled: the interceptors only
// read its target.
func fakeConn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///api.test", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// grpcScript is an invoker that answers each attempt with the next of errs
// (nil once they run out) and notes when each came.
type grpcScript struct {
	mu   sync.Mutex
	errs []error
	at   []time.Time
}

func (s *grpcScript) invoke(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = append(s.at, time.Now())
	if len(s.errs) == 0 {
		return nil
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	return err
}

func (s *grpcScript) attempts() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at...)
}

func retrying(opts ...func(*client.GRPC)) *client.GRPC {
	g := &client.GRPC{
		Idempotent: client.IdempotentMethods(method),
		Backoff:    client.Backoff{Base: 100 * time.Millisecond, Jitter: client.NoJitter, Cap: 10 * time.Second},
	}
	for _, o := range opts {
		o(g)
	}
	return g
}

func TestGRPCRetryWaitsTheWholeRetryInfoDelay(t *testing.T) {
	cc := fakeConn(t)
	synctest.Test(t, func(t *testing.T) {
		s := &grpcScript{errs: []error{refused(t, codes.ResourceExhausted, 3*time.Second)}}
		err := retrying().UnaryClientInterceptor()(context.Background(), method, nil, nil, cc, s.invoke)
		if err != nil {
			t.Fatal(err)
		}
		at := s.attempts()
		if len(at) != 2 {
			t.Fatalf("%d attempts, want 2", len(at))
		}
		if gap := at[1].Sub(at[0]); gap < 3*time.Second || gap > 3300*time.Millisecond {
			t.Errorf("retried after %v, want 3s plus at most 10%% jitter", gap)
		}
	})
}

func TestGRPCDoesNotRetryResourceExhaustedWithoutRetryInfo(t *testing.T) {
	cc := fakeConn(t)
	synctest.Test(t, func(t *testing.T) {
		s := &grpcScript{errs: []error{refused(t, codes.ResourceExhausted, 0)}}
		err := retrying().UnaryClientInterceptor()(context.Background(), method, nil, nil, cc, s.invoke)
		if status.Code(err) != codes.ResourceExhausted || len(s.attempts()) != 1 {
			t.Errorf("got %v after %d attempts, want RESOURCE_EXHAUSTED after 1", err, len(s.attempts()))
		}
	})
}

func TestGRPCRetriesUnavailableOnTheBackoff(t *testing.T) {
	cc := fakeConn(t)
	synctest.Test(t, func(t *testing.T) {
		s := &grpcScript{errs: []error{refused(t, codes.Unavailable, 0), refused(t, codes.Unavailable, 0)}}
		if err := retrying().UnaryClientInterceptor()(context.Background(), method, nil, nil, cc, s.invoke); err != nil {
			t.Fatal(err)
		}
		at := s.attempts()
		if len(at) != 3 || at[1].Sub(at[0]) != 100*time.Millisecond || at[2].Sub(at[1]) != 200*time.Millisecond {
			t.Errorf("attempts at %v, want three, 100ms then 200ms apart", at)
		}
	})
}

func TestGRPCDoesNotRetryMethodsNotKnownIdempotent(t *testing.T) {
	cc := fakeConn(t)
	synctest.Test(t, func(t *testing.T) {
		s := &grpcScript{errs: []error{refused(t, codes.Unavailable, time.Second)}}
		err := retrying().UnaryClientInterceptor()(context.Background(), "/test.Svc/Create", nil, nil, cc, s.invoke)
		if status.Code(err) != codes.Unavailable || len(s.attempts()) != 1 {
			t.Errorf("got %v after %d attempts, want UNAVAILABLE after 1", err, len(s.attempts()))
		}
	})
}

func TestGRPCReturnsTheServersStatusWhenTheDelayIsTooLong(t *testing.T) {
	cc := fakeConn(t)
	synctest.Test(t, func(t *testing.T) {
		for name, ctx := range map[string]func() (context.Context, context.CancelFunc){
			"over Cap": func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			"past the deadline": func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 2*time.Second)
			},
		} {
			wait := time.Minute
			if name == "past the deadline" {
				wait = 5 * time.Second
			}
			s := &grpcScript{errs: []error{refused(t, codes.ResourceExhausted, wait)}}
			c, cancel := ctx()
			start := time.Now()
			err := retrying().UnaryClientInterceptor()(c, method, nil, nil, cc, s.invoke)
			cancel()
			if d, ok := client.RetryInfoDelay(err); status.Code(err) != codes.ResourceExhausted || !ok || d != wait {
				t.Errorf("%s: got %v, want the server's RESOURCE_EXHAUSTED with its RetryInfo of %v", name, err, wait)
			}
			if len(s.attempts()) != 1 || time.Since(start) != 0 {
				t.Errorf("%s: %d attempts over %v, want 1 and no wait", name, len(s.attempts()), time.Since(start))
			}
		}
	})
}

func TestGRPCPacerHoldsOtherCallsUntilTheRetryInfoDelay(t *testing.T) {
	cc := fakeConn(t)
	synctest.Test(t, func(t *testing.T) {
		g := retrying(func(g *client.GRPC) {
			g.Pacer = &client.Pacer{Limit: sluice.PerSecond(1000)}
		})
		s := &grpcScript{errs: []error{refused(t, codes.ResourceExhausted, 2*time.Second)}}
		icpt := g.UnaryClientInterceptor()
		// A method not retried: the refusal comes back, and the next call
		// to the same target waits out the delay in the Pacer.
		start := time.Now()
		if err := icpt(context.Background(), "/test.Svc/Create", nil, nil, cc, s.invoke); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("got %v, want RESOURCE_EXHAUSTED", err)
		}
		if err := icpt(context.Background(), "/test.Svc/Other", nil, nil, cc, s.invoke); err != nil {
			t.Fatal(err)
		}
		at := s.attempts()
		if len(at) != 2 || at[1].Sub(start) < 2*time.Second {
			t.Errorf("attempts at %v after a refusal with RetryInfo 2s at %v: the second came early", at, start)
		}
	})
}

func TestIdempotentByProtoReadsTheMethodOption(t *testing.T) {
	level := descriptorpb.MethodOptions_NO_SIDE_EFFECTS
	fd := &descriptorpb.FileDescriptorProto{
		Name:        proto.String("sluice_client_test/idem.proto"),
		Package:     proto.String("sluiceclienttest"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("M")}},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Svc"),
			Method: []*descriptorpb.MethodDescriptorProto{
				{Name: proto.String("Read"), InputType: proto.String(".sluiceclienttest.M"), OutputType: proto.String(".sluiceclienttest.M"),
					Options: &descriptorpb.MethodOptions{IdempotencyLevel: &level}},
				{Name: proto.String("Write"), InputType: proto.String(".sluiceclienttest.M"), OutputType: proto.String(".sluiceclienttest.M")},
			},
		}},
	}
	if _, err := protoregistry.GlobalFiles.FindFileByPath(fd.GetName()); err != nil { // not yet (-count)
		f, err := protodesc.NewFile(fd, protoregistry.GlobalFiles)
		if err != nil {
			t.Fatal(err)
		}
		if err := protoregistry.GlobalFiles.RegisterFile(f); err != nil {
			t.Fatal(err)
		}
	}
	for m, want := range map[string]bool{
		"/sluiceclienttest.Svc/Read":   true,
		"/sluiceclienttest.Svc/Write":  false,
		"/sluiceclienttest.Svc/None":   false,
		"/grpc.health.v1.Health/Check": false,
		"not a method":                 false,
	} {
		if got := client.IdempotentByProto(m); got != want {
			t.Errorf("IdempotentByProto(%q) = %v, want %v", m, got, want)
		}
	}
}

func TestGRPCCancelledCallEndsCanceledWhateverTheCause(t *testing.T) {
	cc := fakeConn(t)
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		invoke := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			cancel(errors.New("shutting down"))
			return refused(t, codes.Unavailable, time.Second)
		}
		err := retrying().UnaryClientInterceptor()(ctx, method, nil, nil, cc, invoke)
		if status.Code(err) != codes.Canceled {
			t.Errorf("got %v, want CANCELED", err)
		}
	})
}
