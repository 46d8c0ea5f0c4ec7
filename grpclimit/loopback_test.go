package grpclimit_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/memstore"
)

const checkMethod = "/grpc.health.v1.Health/Check"

// arrival is one call as the server saw it.
type arrival struct {
	at   time.Time // when the interceptors answered
	err  error
	wait time.Duration // the refusal's RetryInfo delay
}

// recorder is an outermost server interceptor that notes every call.
type recorder struct {
	mu   sync.Mutex
	seen []arrival
}

func (r *recorder) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	a := arrival{at: time.Now(), err: err}
	a.wait, _ = client.RetryInfoDelay(err)
	r.mu.Lock()
	r.seen = append(r.seen, a)
	r.mu.Unlock()
	return resp, err
}

func (r *recorder) arrivals() []arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]arrival(nil), r.seen...)
}

// serve starts a health server on 127.0.0.1 behind the interceptors and
// returns its address; it stops when the test ends.
func serve(t testing.TB, interceptors ...grpc.UnaryServerInterceptor) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(interceptors...))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func dial(t testing.TB, addr string, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return healthpb.NewHealthClient(cc)
}

func newRateLimit(t testing.TB, c grpclimit.RateLimitConfig) *grpclimit.RateLimit {
	t.Helper()
	if c.Limiter == nil {
		store := memstore.New(memstore.Config{})
		t.Cleanup(func() { _ = store.Close() })
		c.Limiter = store
	}
	rl, err := grpclimit.NewRateLimit(c)
	if err != nil {
		t.Fatal(err)
	}
	return rl
}

func TestNPerSecondRefusesTheNextWithRetryInfoThatTheClientObeys(t *testing.T) {
	const n = 5
	rec := &recorder{}
	rl := newRateLimit(t, grpclimit.RateLimitConfig{Limit: sluice.PerSecond(n)})
	addr := serve(t, rec.unary, rl.Unary())
	retrying := &client.GRPC{
		Idempotent: client.IdempotentMethods(checkMethod),
		Backoff:    client.Backoff{MaxAttempts: 3},
	}
	hc := dial(t, addr, grpc.WithUnaryInterceptor(retrying.UnaryClientInterceptor()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for i := range n + 1 {
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	seen := rec.arrivals()
	if len(seen) != n+2 {
		t.Fatalf("the server saw %d calls, want %d: %d admitted, one refused, its one retry", len(seen), n+2, n)
	}
	for i, a := range seen[:n] {
		if a.err != nil {
			t.Fatalf("call %d refused: %v", i+1, a.err)
		}
	}
	refused, retry := seen[n], seen[n+1]
	if status.Code(refused.err) != codes.ResourceExhausted || refused.wait <= 0 {
		t.Fatalf("call %d: got %v with RetryInfo %v, want RESOURCE_EXHAUSTED with a RetryInfo", n+1, refused.err, refused.wait)
	}
	if early := refused.at.Add(refused.wait).Sub(retry.at); early > 0 {
		t.Errorf("the retry came %v before the RetryInfo's delay of %v had passed", early, refused.wait)
	}
	if retry.err != nil {
		t.Errorf("the retry after the delay was refused: %v", retry.err)
	}
	t.Logf("refused with RetryInfo %v; retried %v later", refused.wait, retry.at.Sub(refused.at))
}

func TestRefusalCarriesRetryInfoQuotaFailureErrorInfoAndPushback(t *testing.T) {
	rec := &recorder{}
	rl := newRateLimit(t, grpclimit.RateLimitConfig{Limit: sluice.PerMinute(1), Domain: "example.com"})
	addr := serve(t, rec.unary, rl.Unary())
	// No Idempotent option: the health service's proto does not mark
	// Check idempotent, so the interceptor must not retry it.
	hc := dial(t, addr, grpc.WithUnaryInterceptor((&client.GRPC{}).UnaryClientInterceptor()))
	ctx := context.Background()
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	var trailer metadata.MD
	_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if got := len(rec.arrivals()); got != 2 {
		t.Errorf("the server saw %d calls, want 2: a method not known to be idempotent is not retried", got)
	}
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("got %v, want RESOURCE_EXHAUSTED", err)
	}
	var info *errdetails.ErrorInfo
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *errdetails.RetryInfo:
			retry = d
		case *errdetails.QuotaFailure:
			quota = d
		default:
			t.Errorf("unexpected detail %T: %v", d, d)
		}
	}
	if info == nil || info.Reason != grpclimit.ReasonRateLimited || info.Domain != "example.com" || info.Metadata["method"] != checkMethod {
		t.Errorf("ErrorInfo = %v, want reason %s, domain example.com, method %s", info, grpclimit.ReasonRateLimited, checkMethod)
	}
	if retry == nil || retry.RetryDelay.AsDuration() < 59*time.Second || retry.RetryDelay.AsDuration() > time.Minute {
		t.Errorf("RetryInfo = %v, want about a minute", retry)
	}
	if quota == nil || len(quota.Violations) != 1 || quota.Violations[0].QuotaValue != 1 || quota.Violations[0].Subject != checkMethod {
		t.Errorf("QuotaFailure = %v, want one violation of a quota of 1 for subject %s", quota, checkMethod)
	}
	if p := trailer.Get("grpc-retry-pushback-ms"); len(p) != 1 || len(p[0]) != 5 {
		t.Errorf("grpc-retry-pushback-ms = %q, want about 60000", p)
	}
}

func TestByMetadataGivesEachCallerItsOwnAllowance(t *testing.T) {
	rl := newRateLimit(t, grpclimit.RateLimitConfig{Limit: sluice.PerMinute(1), Key: grpclimit.ByMetadata("x-api-key")})
	hc := dial(t, serve(t, rl.Unary()))
	call := func(key string) codes.Code {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return status.Code(err)
	}
	if a, b := call("alice"), call("bob"); a != codes.OK || b != codes.OK {
		t.Fatalf("first calls of two callers: %v, %v, want OK, OK", a, b)
	}
	if a := call("alice"); a != codes.ResourceExhausted {
		t.Errorf("alice's second call: %v, want RESOURCE_EXHAUSTED", a)
	}
}

func TestMethodsLimitOnlyTheirMethod(t *testing.T) {
	rl := newRateLimit(t, grpclimit.RateLimitConfig{Methods: map[string]sluice.Limit{"/other.Service/Write": sluice.PerMinute(1)}})
	hc := dial(t, serve(t, rl.Unary()))
	for i := range 3 {
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d of an unlimited method: %v", i+1, err)
		}
	}
}

func TestStreamsSpendOnceWhenTheyOpen(t *testing.T) {
	rl := newRateLimit(t, grpclimit.RateLimitConfig{Limit: sluice.PerMinute(1)})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainStreamInterceptor(rl.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	hc := dial(t, lis.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Recv(); err != nil {
		t.Fatalf("the first stream's first message: %v", err)
	}
	second, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = second.Recv()
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a second stream: %v, want RESOURCE_EXHAUSTED", err)
	}
	if d, ok := client.RetryInfoDelay(err); !ok || d < 59*time.Second {
		t.Errorf("the stream's refusal has RetryInfo %v (%v), want about a minute", d, ok)
	}
}
