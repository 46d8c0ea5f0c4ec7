package rlqs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/internal/promtest"
	"github.com/sluicehq/sluice/internal/rlqstest"
	"github.com/sluicehq/sluice/rlqs"
)

// deepYAML has a rule for buckets of 8 pairs, each key 256 bytes: the
// largest bucket id a rule can match.
func deepYAML() string {
	var b strings.Builder
	b.WriteString("domain: edge\ndescriptors:\n")
	for i := range config.MaxBucketPairs {
		ind := strings.Repeat("    ", i)
		if i > 0 {
			ind = ind[2:] + "  "
			fmt.Fprintf(&b, "%sdescriptors:\n", ind[:len(ind)-2])
		}
		fmt.Fprintf(&b, "%s- key: %s\n", ind, deepKey(i))
	}
	fmt.Fprintf(&b, "%s  rate_limit: {unit: second, requests_per_unit: 100}\n", strings.Repeat("    ", config.MaxBucketPairs-1))
	return b.String()
}

func deepKey(i int) string { return fmt.Sprintf("k%d", i) + strings.Repeat("k", rlqs.MaxPairBytes-2) }

// BenchmarkMemoryPerBucket reports the heap that RLQS streams and their
// buckets take (runtime.MemStats after a collection), per stream and per
// bucket, beside what the memory budget counts for them
// (sluice_rlqs_memory_bytes): 8 streams of 250 buckets each, of three
// kinds of bucket id.
func BenchmarkMemoryPerBucket(b *testing.B) {
	const streams, perStream, perMsg = 8, 250, 50
	for _, kind := range []struct {
		name string
		yaml string
		id   func(s, n int) map[string]string
	}{
		{"small id, a rule", edgeYAML, func(s, n int) map[string]string { return map[string]string{"api": fmt.Sprintf("v%d-%d", s, n)} }},
		{"8x256B pairs, no rule", edgeYAML, bigID},
		{"8x256B pairs, a rule", deepYAML(), func(s, n int) map[string]string {
			id := make(map[string]string, config.MaxBucketPairs)
			for p := range config.MaxBucketPairs {
				v := fmt.Sprintf("%d-%d-", s, n)
				id[deepKey(p)] = v + strings.Repeat("v", rlqs.MaxPairBytes-len(v))
			}
			return id
		}},
	} {
		b.Run(kind.name, func(b *testing.B) {
			c := configtest.Parse(b, kind.yaml)
			var perBucket, perStreamHeap, acctBucket float64
			for b.Loop() {
				reg := prometheus.NewRegistry()
				s, err := rlqs.New(rlqs.Config{Rules: func() *config.Config { return c }, Registerer: reg, MaxBytes: 1 << 30})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(b.Context())
				heap0 := heapBytes()
				conns := make([]rlqstest.Conn, streams)
				for i := range conns {
					conns[i] = rlqstest.Pipe(ctx, nil, s.StreamRateLimitQuotas)
					if err := conns[i].Send(reports(usage(kind.id(i, perStream), 0, 1, 0))); err != nil {
						b.Fatal(err)
					}
					if _, err := conns[i].Recv(); err != nil {
						b.Fatal(err)
					}
				}
				heap1 := heapBytes()
				acct1 := promtest.Value(b, reg, "sluice_rlqs_memory_bytes", "", "")
				for i, conn := range conns {
					for m := range perStream / perMsg {
						us := make([]*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, 0, perMsg)
						for n := range perMsg {
							us = append(us, usage(kind.id(i, m*perMsg+n), time.Second, 1, 0))
						}
						if err := conn.Send(reports(us...)); err != nil {
							b.Fatal(err)
						}
						if r, err := conn.Recv(); err != nil || len(r.GetBucketAction()) != perMsg {
							b.Fatalf("%d actions, %v", len(r.GetBucketAction()), err)
						}
					}
				}
				heap2 := heapBytes()
				acct2 := promtest.Value(b, reg, "sluice_rlqs_memory_bytes", "", "")
				n := float64(streams * perStream)
				perStreamHeap = float64(heap1-heap0) / streams
				perBucket = float64(heap2-heap1) / n
				acctBucket = (acct2 - acct1) / n
				cancel()
				for _, conn := range conns {
					_ = drain(conn)
				}
			}
			b.ReportMetric(perStreamHeap, "heap-B/stream")
			b.ReportMetric(perBucket, "heap-B/bucket")
			b.ReportMetric(acctBucket, "budget-B/bucket")
			b.ReportMetric(0, "ns/op")
		})
	}
}
