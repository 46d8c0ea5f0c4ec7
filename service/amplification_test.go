package service_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// anyDatabase limits every value of database, each its own key.
func anyDatabase() *fakeRules {
	return (&fakeRules{domain: "mongo_cps"}).add(fixed("mongo_cps.database", 1000, config.Second), "database", "")
}

// manyDescriptors is a request of n one-entry descriptors, each its own key.
func manyDescriptors(n int) *pb.RateLimitRequest {
	req := &pb.RateLimitRequest{Domain: "mongo_cps"}
	for i := range n {
		req.Descriptors = append(req.Descriptors, desc("database", strconv.Itoa(i)))
	}
	return req
}

// A request's descriptors and entries are counted against the operator's
// caps before anything is looked up or stored: a 4 MB gRPC message of
// 200,000 tiny descriptors made 200,000 store calls and about 90 MB of
// heap (request, plans and response) for one call, so that 16 such calls
// at once took the server to 1.4 GB. Over the cap the answer is
// InvalidArgument (400 over HTTP) with no store call; at the cap it works.
func TestDescriptorAndEntryCountsAreCapped(t *testing.T) {
	h := start(t, t0, service.Config{Rules: anyDatabase(), MaxDescriptors: 8, MaxEntries: 4})
	long := &rlpb.RateLimitDescriptor{}
	for i := range 5 {
		long.Entries = append(long.Entries, &rlpb.RateLimitDescriptor_Entry{Key: "k" + strconv.Itoa(i), Value: "v"})
	}
	for _, tt := range []struct {
		name string
		req  *pb.RateLimitRequest
		msg  string
	}{
		{"descriptors", manyDescriptors(9), "9 descriptors"},
		{"entries", &pb.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*rlpb.RateLimitDescriptor{long}}, "5 entries"},
	} {
		for _, f := range faces {
			before := len(h.store.calls())
			_, err := f.call(h, tt.req)
			if err == nil || (f.name != "http" && status.Code(err) != codes.InvalidArgument) ||
				(f.name == "http" && !strings.Contains(err.Error(), "HTTP 400")) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("%s over %s: %v; want InvalidArgument (400) mentioning %q", tt.name, f.name, err, tt.msg)
			}
			if n := len(h.store.calls()) - before; n != 0 {
				t.Errorf("%s over %s: %d store calls for a refused request", tt.name, f.name, n)
			}
		}
	}
	long.Entries = long.Entries[:4]
	before := len(h.store.calls())
	for _, req := range []*pb.RateLimitRequest{manyDescriptors(8), {Domain: "mongo_cps", Descriptors: []*rlpb.RateLimitDescriptor{long}}} {
		if _, err := h.svc.ShouldRateLimit(context.Background(), req); err != nil {
			t.Errorf("at the caps: %v", err)
		}
	}
	if n := len(h.store.calls()) - before; n != 8 {
		t.Errorf("at the caps: %d store calls, want 8 (one per descriptor a rule matches)", n)
	}
}

// The defaults hold a real Envoy request with room to spare, and refuse
// the 200,000-descriptor message.
func TestDefaultDescriptorCap(t *testing.T) {
	h := start(t, t0, service.Config{Rules: anyDatabase()})
	if _, err := h.svc.ShouldRateLimit(context.Background(), manyDescriptors(service.DefaultMaxDescriptors)); err != nil {
		t.Fatalf("%d descriptors: %v", service.DefaultMaxDescriptors, err)
	}
	before := len(h.store.calls())
	_, err := h.svc.ShouldRateLimit(context.Background(), manyDescriptors(200_000))
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("200,000 descriptors: %v, want InvalidArgument", err)
	}
	if n := len(h.store.calls()) - before; n != 0 {
		t.Errorf("200,000 descriptors: %d store calls", n)
	}
}

// The gRPC face takes messages of at most MaxRequestBytes, as POST /json
// takes bodies: a larger one is ResourceExhausted before it is decoded,
// and the server keeps serving.
func TestGRPCMessageSizeIsCapped(t *testing.T) {
	h := start(t, t0, service.Config{Rules: mongo(5, config.Second)})
	big := &pb.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*rlpb.RateLimitDescriptor{
		desc("database", strings.Repeat("x", service.MaxRequestBytes+1)),
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.grpc.ShouldRateLimit(ctx, big); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a message over MaxRequestBytes: %v, want ResourceExhausted", err)
	}
	if _, err := h.grpc.ShouldRateLimit(ctx, manyDescriptors(1)); err != nil {
		t.Errorf("after it: %v", err)
	}
}
