package service_test

import (
	"context"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/relief"
	"github.com/sluicehq/sluice/service"
)

// TestOverLimitCacheAnswersWithoutStoreUntilWindowEnds: with the over-limit
// cache in front of the store (sluice serve -local-cache), a key known to be
// over its limit is answered OVER_LIMIT for the rest of the window without a
// call to the store.
func TestOverLimitCacheAnswersWithoutStoreUntilWindowEnds(t *testing.T) {
	clock := clocktest.At(time.Unix(t0, 0))
	mem := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	defer mem.Close()
	store := &recorder{Limiter: mem}
	svc, err := service.New(service.Config{
		Limiter: relief.NewOverLimitCache(store, relief.CacheConfig{Clock: clock}),
		Rules:   mongo(5, config.Minute), Logger: discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	req := request("mongo_cps", 0, desc("database", "users"))
	call := func() pb.RateLimitResponse_Code {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetOverallCode()
	}
	for i := range 6 {
		want := pb.RateLimitResponse_OK
		if i == 5 {
			want = pb.RateLimitResponse_OVER_LIMIT
		}
		if got := call(); got != want {
			t.Fatalf("hit %d: %v, want %v", i+1, got, want)
		}
	}
	before := len(store.calls())
	for range 100 {
		clock.Advance(100 * time.Millisecond)
		if got := call(); got != pb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("within the window: %v, want OVER_LIMIT", got)
		}
	}
	if n := len(store.calls()) - before; n != 0 {
		t.Fatalf("%d store calls for 100 requests already known to be over the limit, want 0", n)
	}
	// Past the window the store is asked again, and admits.
	clock.Advance(time.Minute)
	if got := call(); got != pb.RateLimitResponse_OK {
		t.Fatalf("after the window: %v, want OK", got)
	}
}
