package service_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.Wrap(m), redistest.IgnoreRueidis()...)
}

// fakeRules is a small service.Rules: each rule matches descriptors of
// exactly its depth whose keys are equal and whose values are equal, or any
// value where the rule's value is "". A rule with exact values wins.
type fakeRules struct {
	domain string
	rules  []fakeRule
}

type fakeRule struct {
	entries []config.Entry
	rl      *config.RateLimit
}

func (f *fakeRules) add(rl *config.RateLimit, kv ...string) *fakeRules {
	var es []config.Entry
	for i := 0; i+1 < len(kv); i += 2 {
		es = append(es, config.Entry{Key: kv[i], Value: kv[i+1]})
	}
	f.rules = append(f.rules, fakeRule{es, rl})
	return f
}

func (f *fakeRules) Lookup(domain string, entries []config.Entry) *config.RateLimit {
	if domain != f.domain {
		return nil
	}
	var wild *config.RateLimit
	for _, r := range f.rules {
		if len(r.entries) != len(entries) {
			continue
		}
		exact, ok := true, true
		for i, e := range r.entries {
			switch {
			case e.Key != entries[i].Key:
				ok = false
			case e.Value == entries[i].Value:
			case e.Value == "":
				exact = false
			default:
				ok = false
			}
		}
		if ok && exact {
			return r.rl
		}
		if ok && wild == nil {
			wild = r.rl
		}
	}
	return wild
}

// fixed returns a fixed-window rule of rpu per unit, as config compiles
// envoyproxy/ratelimit's rate_limit blocks.
func fixed(fullKey string, rpu uint32, unit config.Unit) *config.RateLimit {
	rl := &config.RateLimit{FullKey: fullKey, Unit: unit, UnitMultiplier: 1, RequestsPerUnit: rpu}
	rl.Limit = sluice.Limit{Algorithm: sluice.FixedWindow, Rate: int(rpu), Period: rl.Period(), Burst: int(rpu)}
	return rl
}

// recorder is a sluice.Limiter that records the keys it is asked about.
// It forwards the optional capabilities of the Limiter it wraps
// (sluice.Peeker, sluice.Refunder, sluice.LimitValidator), so the Service
// under test takes the paths it takes on a real store.
type recorder struct {
	sluice.Limiter
	mu    sync.Mutex
	keys  []string       // keys of AllowN calls
	lims  []sluice.Limit // limits of AllowN calls
	peeks []string       // keys of Peek calls
}

func (r *recorder) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	r.mu.Lock()
	r.keys = append(r.keys, key)
	r.lims = append(r.lims, lim)
	r.mu.Unlock()
	return r.Limiter.AllowN(ctx, key, lim, cost)
}

// Peek forwards to the wrapped Limiter's Peek, recording the key; a
// Limiter that cannot peek gives errors.ErrUnsupported, as relief's and
// failsafe's wrappers do.
func (r *recorder) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	pk, ok := r.Limiter.(sluice.Peeker)
	if !ok {
		return sluice.Result{}, errors.ErrUnsupported
	}
	r.mu.Lock()
	r.peeks = append(r.peeks, key)
	r.mu.Unlock()
	return pk.Peek(ctx, key, lim)
}

// RefundN forwards to the wrapped Limiter's RefundN, or gives
// errors.ErrUnsupported.
func (r *recorder) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	return refund(r.Limiter, ctx, key, lim, cost)
}

// ValidateLimit forwards to the wrapped Limiter's ValidateLimit; a Limiter
// without one serves every valid Limit.
func (r *recorder) ValidateLimit(lim sluice.Limit) error {
	return validateLimit(r.Limiter, lim)
}

// calls returns the keys of the AllowN calls so far.
func (r *recorder) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

// peeked returns the keys of the Peek calls so far.
func (r *recorder) peeked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.peeks...)
}

// refund is l's RefundN, or errors.ErrUnsupported when l cannot refund.
func refund(l sluice.Limiter, ctx context.Context, key string, lim sluice.Limit, cost int) error {
	rf, ok := l.(sluice.Refunder)
	if !ok {
		return errors.ErrUnsupported
	}
	return rf.RefundN(ctx, key, lim, cost)
}

// validateLimit is l's ValidateLimit, or nil when l has none.
func validateLimit(l sluice.Limiter, lim sluice.Limit) error {
	if v, ok := l.(sluice.LimitValidator); ok {
		return v.ValidateLimit(lim)
	}
	return nil
}

// harness is a Service on a memstore with a fake clock, served over gRPC
// and HTTP on loopback.
type harness struct {
	clock *clocktest.Clock
	store *recorder
	svc   *service.Service
	reg   *prometheus.Registry
	grpc  pb.RateLimitServiceClient
	conn  *grpc.ClientConn
	http  *httptest.Server
	// prefix is the Service's key prefix (the Redis tests make one per
	// harness).
	prefix string
}

// start builds a harness at Unix time now; cfg's Limiter and Registerer
// are filled in when nil.
func start(t testing.TB, now int64, cfg service.Config) *harness {
	t.Helper()
	h := &harness{clock: clocktest.At(time.Unix(now, 0))}
	mem := memstore.New(memstore.Config{Clock: h.clock, SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	h.store = &recorder{Limiter: mem}
	if cfg.Limiter == nil {
		cfg.Limiter = h.store
	}
	if cfg.Logger == nil {
		cfg.Logger = discard()
	}
	if cfg.Registerer == nil {
		h.reg = prometheus.NewRegistry()
		cfg.Registerer = h.reg
	}
	svc, err := service.New(cfg)
	if err != nil {
		t.Fatalf("service.New: %v", err)
	}
	h.svc = svc
	t.Cleanup(func() { svc.Close() })

	gs := grpc.NewServer(service.GRPCServerOptions()...)
	svc.RegisterGRPC(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	h.conn = conn
	h.grpc = pb.NewRateLimitServiceClient(conn)
	h.http = httptest.NewServer(svc.Handler())
	t.Cleanup(func() {
		conn.Close()
		gs.Stop()
		<-served
		h.http.Close()
	})
	return h
}

// face is one way to call ShouldRateLimit.
type face struct {
	name string
	call func(h *harness, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error)
}

var faces = []face{
	{"direct", func(h *harness, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
		return h.svc.ShouldRateLimit(context.Background(), req)
	}},
	{"grpc", func(h *harness, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return h.grpc.ShouldRateLimit(ctx, req)
	}},
	{"http", func(h *harness, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
		resp, body := h.postJSON(req)
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
			return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
		}
		var out pb.RateLimitResponse
		if err := protojson.Unmarshal(body, &out); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", body, err)
		}
		want := http.StatusOK
		if out.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want {
			return nil, fmt.Errorf("HTTP %d for overall_code %v", resp.StatusCode, out.GetOverallCode())
		}
		return &out, nil
	}},
}

// postJSON posts req to /json and returns the response and its body.
func (h *harness) postJSON(req *pb.RateLimitRequest) (*http.Response, []byte) {
	b, err := protojson.Marshal(req)
	if err != nil {
		panic(err)
	}
	return h.post("/json", b)
}

func (h *harness) post(path string, body []byte) (*http.Response, []byte) {
	resp, err := http.Post(h.http.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		panic(err)
	}
	return resp, out
}

// faceTest is a test body run once per face: call sends a request through
// the face and fails the test on an error.
type faceTest = func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse)

// forEachFace runs f as a subtest for every face, each on a fresh harness.
func forEachFace(t *testing.T, now int64, cfg service.Config, f faceTest) {
	eachFace(t, func(t *testing.T) *harness { return start(t, now, cfg) }, f)
}

// eachFace runs f as a subtest for every face, each on a fresh harness
// from newHarness.
func eachFace(t *testing.T, newHarness func(*testing.T) *harness, f faceTest) {
	for _, fc := range faces {
		t.Run(fc.name, func(t *testing.T) {
			h := newHarness(t)
			f(t, h, func(req *pb.RateLimitRequest) *pb.RateLimitResponse {
				t.Helper()
				resp, err := fc.call(h, req)
				if err != nil {
					t.Fatalf("ShouldRateLimit(%v): %v", req, err)
				}
				return resp
			})
		})
	}
}

// desc returns a descriptor of key/value pairs.
func desc(kv ...string) *rlpb.RateLimitDescriptor {
	d := &rlpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func withHits(d *rlpb.RateLimitDescriptor, n uint64) *rlpb.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func request(domain string, hits uint32, ds ...*rlpb.RateLimitDescriptor) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: hits}
}

// statusString summarizes a descriptor status for comparisons.
func statusString(st *pb.RateLimitResponse_DescriptorStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v remaining=%d", st.GetCode(), st.GetLimitRemaining())
	if cl := st.GetCurrentLimit(); cl != nil {
		fmt.Fprintf(&b, " limit={%d %v %q}", cl.GetRequestsPerUnit(), cl.GetUnit(), cl.GetName())
	}
	if d := st.GetDurationUntilReset(); d != nil {
		fmt.Fprintf(&b, " reset=%v", d.AsDuration())
	}
	return b.String()
}

func headerMap(resp *pb.RateLimitResponse) map[string]string {
	m := map[string]string{}
	for _, h := range resp.GetResponseHeadersToAdd() {
		m[h.GetKey()] = h.GetValue()
	}
	return m
}
