package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

// BenchmarkShouldRateLimitFailurePolicy calls ShouldRateLimit behind
// Config.Failure, as `sluice serve` runs on Redis: with the store up (a
// memory store) and down (every call fails; the breaker opens), for a rule
// of each failure mode. The request carries a deadline shorter than the
// policy's timeout, as Envoy's do.
func BenchmarkShouldRateLimitFailurePolicy(b *testing.B) {
	rules := configtest.Parse(b, `domain: bench
descriptors:
  - {key: open, rate_limit: {unit: second, requests_per_unit: 1000000000, failure_mode: open}}
  - {key: closed, rate_limit: {unit: second, requests_per_unit: 1000000000, failure_mode: closed}}
  - {key: local, rate_limit: {unit: second, requests_per_unit: 1000000000, failure_mode: local}}
`)
	for _, down := range []bool{false, true} {
		for _, mode := range []string{"open", "closed", "local"} {
			b.Run(fmt.Sprintf("down=%v/mode=%s", down, mode), func(b *testing.B) {
				store := memstore.New(memstore.Config{})
				defer store.Close()
				var lim sluice.Limiter = store
				if down {
					lim = failing{}
				}
				local := memstore.New(memstore.Config{})
				defer local.Close()
				svc, err := service.New(service.Config{Limiter: lim, Rules: rules, Logger: discard(),
					Failure: &service.FailurePolicy{Mode: failsafe.Open, Timeout: time.Second, Local: local}})
				if err != nil {
					b.Fatal(err)
				}
				defer svc.Close()
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour/2)
				defer cancel()
				req := &pb.RateLimitRequest{Domain: "bench", Descriptors: []*rlpb.RateLimitDescriptor{
					{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: mode, Value: "v"}}},
				}}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := svc.ShouldRateLimit(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
