package grpclimit_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/grpclimit"
)

// benchInterceptors are the server configurations compared: no
// interceptor, a rate limit (memstore, one key per method, never refusing)
// and adaptive concurrency (a limit it never reaches).
func benchInterceptors(b *testing.B) map[string]grpc.UnaryServerInterceptor {
	rl := newRateLimit(b, grpclimit.RateLimitConfig{Limit: sluice.PerSecond(100_000_000)})
	lim, err := adaptive.New(adaptive.Config{Initial: 1 << 20, Max: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	cc, err := grpclimit.NewConcurrency(grpclimit.ConcurrencyConfig{Limiter: lim})
	if err != nil {
		b.Fatal(err)
	}
	pass := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(ctx, req)
	}
	return map[string]grpc.UnaryServerInterceptor{"bare": pass, "ratelimit": rl.Unary(), "concurrency": cc.Unary()}
}

// BenchmarkInterceptor is the interceptor alone, called in process with a
// handler that does nothing: its cost per call.
func BenchmarkInterceptor(b *testing.B) {
	icpts := benchInterceptors(b)
	handler := func(context.Context, any) (any, error) { return nil, nil }
	for _, name := range []string{"bare", "ratelimit", "concurrency"} {
		b.Run(name, func(b *testing.B) {
			icpt := icpts[name]
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := icpt(ctx, nil, info, handler); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLoopback is a whole unary call (grpc.health.v1.Health/Check)
// over a real TCP connection on 127.0.0.1, client and server in this
// process, with each server configuration.
func BenchmarkLoopback(b *testing.B) {
	icpts := benchInterceptors(b)
	for _, name := range []string{"bare", "ratelimit", "concurrency"} {
		b.Run(name, func(b *testing.B) {
			hc := dial(b, serve(b, icpts[name]))
			ctx := context.Background()
			req := &healthpb.HealthCheckRequest{}
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := hc.Check(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			// CPU of both ends, which a loaded machine inflates less than
			// wall time.
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
