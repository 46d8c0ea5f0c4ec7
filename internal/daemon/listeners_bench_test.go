package daemon

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/tap"
)

// BenchmarkCallDeadline is the cost -grpc-request-timeout adds to a gRPC
// call, over the stream context gRPC makes anyway: nothing but a clock
// read when the caller sent a shorter grpc-timeout (as Envoy does), a
// timer context when it sent none.
func BenchmarkCallDeadline(b *testing.B) {
	h := callDeadline(30 * time.Second)
	info := &tap.Info{FullMethodName: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"}
	for _, bc := range []struct {
		name    string
		timeout time.Duration // the caller's grpc-timeout; 0: none
	}{{"caller-deadline", 20 * time.Millisecond}, {"no-caller-deadline", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var ctx context.Context
				var cancel context.CancelFunc
				if bc.timeout > 0 {
					ctx, cancel = context.WithTimeout(context.Background(), bc.timeout)
				} else {
					ctx, cancel = context.WithCancel(context.Background())
				}
				h(ctx, info)
				cancel()
			}
		})
	}
}
