package service_test

import (
	"context"
	"fmt"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	gostats "github.com/lyft/gostats"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

// BenchmarkShouldRateLimitFeatures is BenchmarkShouldRateLimit's one
// descriptor, headers off, with one envoyproxy/ratelimit feature on at a
// time, to show what each costs over "plain": a rate_limits list of two
// limits, share_threshold, quota_mode, and dynamic metadata with a rule's
// metadata, and detailed_metric and value_to_metric with a statsd sink
// (every one of the 1,000 values its own series).
func BenchmarkShouldRateLimitFeatures(b *testing.B) {
	const big = "requests_per_unit: 1000000000"
	cases := []struct {
		name, yaml, value string
		cfg               service.Config
		statsd            bool
	}{
		{"plain", "  - key: user\n    rate_limit: {unit: second, " + big + "}\n", "", service.Config{}, false},
		{"rate_limits", "  - key: user\n    rate_limits:\n      - {unit: second, " + big + "}\n      - {unit: day, " + big + "}\n", "", service.Config{}, false},
		{"share_threshold", "  - key: user\n    value: u*\n    share_threshold: true\n    rate_limit: {unit: second, " + big + "}\n", "u", service.Config{}, false},
		{"quota_mode", "  - key: user\n    quota_mode: true\n    rate_limit: {unit: second, " + big + "}\n", "", service.Config{}, false},
		{"dynamic_metadata", "  - key: user\n    rate_limit: {unit: second, " + big + "}\n    metadata: {team: pay, tier: {level: 2}}\n", "", service.Config{DynamicMetadata: true}, false},
		{"detailed_metric+statsd", "  - key: user\n    detailed_metric: true\n    rate_limit: {unit: second, " + big + "}\n", "", service.Config{MaxDetailedSeries: 1000}, true},
		{"value_to_metric+statsd", "  - key: user\n    value_to_metric: true\n    rate_limit: {unit: second, " + big + "}\n", "", service.Config{MaxDetailedSeries: 1000}, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			rules := configtest.Parse(b, "domain: bench\ndescriptors:\n"+c.yaml)
			store := memstore.New(memstore.Config{})
			defer store.Close()
			cfg := c.cfg
			cfg.Limiter, cfg.Rules, cfg.Registerer = store, rules, prometheus.NewRegistry()
			svc, err := service.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			if c.statsd {
				if err := svc.SendStatsd(gostats.NewStore(gostats.NewNullSink(), false), nil); err != nil {
					b.Fatal(err)
				}
			}
			const users = 1000
			reqs := make([]*pb.RateLimitRequest, users)
			for i := range reqs {
				reqs[i] = &pb.RateLimitRequest{Domain: "bench", Descriptors: []*rlpb.RateLimitDescriptor{{
					Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: c.value + fmt.Sprintf("%06d", i)}},
				}}}
			}
			ctx := context.Background()
			for _, r := range reqs {
				if _, err := svc.ShouldRateLimit(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				resp, err := svc.ShouldRateLimit(ctx, reqs[i%users])
				if err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OK {
					b.Fatal(resp, err)
				}
				i++
			}
		})
	}
}
