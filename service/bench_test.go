package service_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

// benchYAML is the rule of BenchmarkShouldRateLimit: the one of the RLS
// benchmark (bench/rls_test.go), a fixed window far above what a benchmark
// can spend, so that every decision is an admission, plus a second level
// for the requests with several descriptors.
const benchYAML = `domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
  - key: path
    rate_limit:
      name: per-path
      unit: minute
      requests_per_unit: 1000000000
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 1000000000
`

// BenchmarkShouldRateLimit calls Service.ShouldRateLimit directly (no gRPC)
// on a memory store, with the rules of benchYAML and a Prometheus registry
// as `sluice serve` runs it, for each header mode and for requests of 1 and
// 3 descriptors; the values cycle over 10,000 users. The /par variants call
// it from GOMAXPROCS goroutines.
func BenchmarkShouldRateLimit(b *testing.B) {
	rules := configtest.Parse(b, benchYAML)
	const users = 10000
	for _, descs := range []int{1, 3} {
		reqs := make([]*pb.RateLimitRequest, users)
		for i := range reqs {
			v := fmt.Sprintf("%06d", i)
			req := &pb.RateLimitRequest{Domain: "bench"}
			for _, k := range []string{"user", "path", "tenant"}[:descs] {
				req.Descriptors = append(req.Descriptors, &rlpb.RateLimitDescriptor{
					Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: k, Value: v}},
				})
			}
			reqs[i] = req
		}
		for _, mode := range []service.HeaderMode{service.HeadersOff, service.HeadersLegacy, service.HeadersDraft11} {
			name := "descriptors=" + strconv.Itoa(descs) + "/headers=" + mode.String()
			b.Run(name, func(b *testing.B) {
				store := memstore.New(memstore.Config{})
				defer store.Close()
				svc, err := service.New(service.Config{Limiter: store, Rules: rules, Headers: mode, Registerer: prometheus.NewRegistry()})
				if err != nil {
					b.Fatal(err)
				}
				defer svc.Close()
				ctx := context.Background()
				call := func(i int) error {
					resp, err := svc.ShouldRateLimit(ctx, reqs[i%users])
					if err != nil {
						return err
					}
					if resp.GetOverallCode() != pb.RateLimitResponse_OK {
						return fmt.Errorf("overall code %v, want OK", resp.GetOverallCode())
					}
					return nil
				}
				for i := range users { // every key and counter exists before the timer starts
					if err := call(i); err != nil {
						b.Fatal(err)
					}
				}
				b.Run("seq", func(b *testing.B) {
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						if err := call(i); err != nil {
							b.Fatal(err)
						}
						i++
					}
				})
				b.Run("par", func(b *testing.B) {
					b.ReportAllocs()
					b.RunParallel(func(pb *testing.PB) {
						i := 0
						for pb.Next() {
							if err := call(i); err != nil {
								b.Error(err)
								return
							}
							i += 7
						}
					})
				})
			})
		}
	}
}
