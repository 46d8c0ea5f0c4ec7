package grpclimit_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/internal/clocktest"
)

func newConcurrency(t testing.TB, limit int) (*grpclimit.Concurrency, *adaptive.Limiter) {
	t.Helper()
	lim, err := adaptive.New(adaptive.Config{Initial: limit, Max: max(limit, 1), Clock: clocktest.New()})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpclimit.NewConcurrency(grpclimit.ConcurrencyConfig{
		Limiter:  lim,
		Priority: grpclimit.PriorityFromMetadata("x-priority"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return cc, lim
}

var info = &grpc.UnaryServerInfo{FullMethod: checkMethod}

// hold starts a call through the interceptor whose handler blocks until
// release is closed, and waits until it is running.
func hold(t *testing.T, icpt grpc.UnaryServerInterceptor, ctx context.Context, release <-chan struct{}) <-chan error {
	t.Helper()
	running := make(chan struct{})
	out := make(chan error, 1)
	go func() {
		_, err := icpt(ctx, nil, info, func(context.Context, any) (any, error) {
			close(running)
			<-release
			return nil, nil
		})
		out <- err
	}()
	select {
	case <-running:
	case err := <-out:
		t.Fatalf("the call was refused: %v", err)
	}
	return out
}

func withPriority(p string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-priority", p))
}

func TestConcurrencyShedsWithUnavailableAndRetryInfo(t *testing.T) {
	cc, lim := newConcurrency(t, 1)
	icpt := cc.Unary()
	release := make(chan struct{})
	done := hold(t, icpt, context.Background(), release)
	called := false
	_, err := icpt(context.Background(), nil, info, func(context.Context, any) (any, error) {
		called = true
		return nil, nil
	})
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if called {
		t.Fatal("a call over the limit reached the handler")
	}
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		t.Fatalf("got %v, want UNAVAILABLE", err)
	}
	if d, ok := client.RetryInfoDelay(err); !ok || d < grpclimit.DefaultMinRetryDelay {
		t.Errorf("RetryInfo delay %v (%v), want at least %v", d, ok, grpclimit.DefaultMinRetryDelay)
	}
	var reason string
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			reason = ei.Reason
		}
	}
	if reason != grpclimit.ReasonOverloaded {
		t.Errorf("ErrorInfo reason %q, want %q", reason, grpclimit.ReasonOverloaded)
	}
	if s := lim.Stats(); s.InFlight != 0 || s.Rejected.Total() != 1 {
		t.Errorf("stats %+v: the held slot must be freed and one call counted as shed", s)
	}
}

func TestConcurrencyShedsSheddableCallsFirst(t *testing.T) {
	cc, _ := newConcurrency(t, 10) // sheddable may fill 7, default 9
	icpt := cc.Unary()
	release := make(chan struct{})
	var held []<-chan error
	for range 7 {
		held = append(held, hold(t, icpt, withPriority("sheddable"), release))
	}
	_, err := icpt(withPriority("sheddable"), nil, info, func(context.Context, any) (any, error) { return nil, nil })
	if status.Code(err) != codes.Unavailable {
		t.Errorf("an eighth sheddable call: %v, want UNAVAILABLE", err)
	}
	held = append(held, hold(t, icpt, withPriority("default"), release))
	held = append(held, hold(t, icpt, withPriority("critical"), release))
	close(release)
	for _, h := range held {
		if err := <-h; err != nil {
			t.Error(err)
		}
	}
}

func TestConcurrencyFreesTheSlotWhenTheHandlerPanics(t *testing.T) {
	cc, lim := newConcurrency(t, 1)
	func() {
		defer func() { _ = recover() }()
		_, _ = cc.Unary()(context.Background(), nil, info, func(context.Context, any) (any, error) { panic("boom") })
	}()
	if s := lim.Stats(); s.InFlight != 0 {
		t.Fatalf("%d in flight after a panicking handler, want 0", s.InFlight)
	}
}

func TestDefaultOutcomeClassifiesOverloadAsDropped(t *testing.T) {
	for err, want := range map[error]adaptive.Outcome{
		nil:                                       adaptive.Success,
		status.Error(codes.NotFound, ""):          adaptive.Success,
		status.Error(codes.DeadlineExceeded, ""):  adaptive.Dropped,
		status.Error(codes.Unavailable, ""):       adaptive.Dropped,
		status.Error(codes.ResourceExhausted, ""): adaptive.Dropped,
		status.Error(codes.Canceled, ""):          adaptive.Ignored,
		errors.New("plain"):                       adaptive.Success,
	} {
		if got := grpclimit.DefaultOutcome(err); got != want {
			t.Errorf("DefaultOutcome(%v) = %v, want %v", err, got, want)
		}
	}
}

func TestConcurrencyOverLoopback(t *testing.T) {
	cc, lim := newConcurrency(t, 5)
	hc := dial(t, serve(t, cc.Unary()))
	for range 3 {
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if s := lim.Stats(); s.Admitted.Total() != 3 || s.InFlight != 0 {
		t.Errorf("stats %+v, want 3 admitted and none in flight", s)
	}
}
