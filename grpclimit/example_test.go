package grpclimit_test

import (
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/memstore"
)

// A server that rate limits each API key (100 calls a second per key and
// method, 10 a second for one expensive method), then sheds load
// adaptively. The rate limit goes first, so that a call it refuses holds
// no concurrency slot, and the concurrency limiter's latency samples are
// the handler's alone, not the rate limit store's.
func Example() {
	store := memstore.New(memstore.Config{})
	defer store.Close()
	rl, err := grpclimit.NewRateLimit(grpclimit.RateLimitConfig{
		Limiter: store,
		Limit:   sluice.PerSecond(100),
		Methods: map[string]sluice.Limit{"/shop.Orders/Export": sluice.PerSecond(10)},
		Key:     grpclimit.ByMetadata("x-api-key"),
		Domain:  "shop.example.com",
	})
	if err != nil {
		panic(err)
	}
	lim, err := adaptive.New(adaptive.Config{Algorithm: adaptive.AIMD{Timeout: 100 * time.Millisecond}})
	if err != nil {
		panic(err)
	}
	shed, err := grpclimit.NewConcurrency(grpclimit.ConcurrencyConfig{
		Limiter:  lim,
		Priority: grpclimit.PriorityFromMetadata("x-priority"), // set by a trusted gateway
	})
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(rl.Unary(), shed.Unary()),
		grpc.ChainStreamInterceptor(rl.Stream(), shed.Stream()),
	)
	defer srv.Stop()
	// Register services on srv, then srv.Serve(listener).
}
