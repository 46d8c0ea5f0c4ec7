package rlqs_test

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/promtest"
	"github.com/sluicehq/sluice/rlqs"
)

// rssBytes returns the process's resident set (Linux; 0 elsewhere).
func rssBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestLoadMemoryBudget measures what the memory budget holds: 64 streams
// on one loopback gRPC connection, each subscribing 1,000 buckets (999 and one small one) of 8
// pairs of 256 bytes (the attack), against the default settings
// (64 MiB, 16 streams per connection) and against settings that bound
// nothing in reach (1 GiB, 128 streams per connection; 16 streams only,
// to spare the machine). Set SLUICE_RLQS_LOAD=1 to run it.
func TestLoadMemoryBudget(t *testing.T) {
	if os.Getenv("SLUICE_RLQS_LOAD") == "" {
		t.Skip("set SLUICE_RLQS_LOAD=1 to measure the RLQS memory budget")
	}
	for _, tc := range []struct {
		name    string
		cfg     rlqs.Config
		streams int
	}{
		{"defaults (64 MiB, 16 streams per connection)", rlqs.Config{}, 64},
		{"no bound in reach (1 GiB, 128 per connection)", rlqs.Config{MaxBytes: 1 << 30, MaxStreamsPerConn: 128}, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const buckets, perMsg = 999, 37
			reg := prometheus.NewRegistry()
			tc.cfg.Registerer = reg
			s := newServerWith(t, tc.cfg)
			cc := serveLoopback(t, s)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			heap0, rss0 := heapBytes(), rssBytes()
			start := time.Now()
			refused, subscribed := 0, 0
			var held []rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient
			for i := range tc.streams {
				st, err := rlqspb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
				if err != nil {
					t.Fatal(err)
				}
				_ = st.Send(reports(usage(apiBucket, 0, 1, 0))) // a refused stream's status comes with Recv
				if _, err := st.Recv(); err != nil {
					refused++
					if refused == 1 {
						t.Logf("first refusal: %v", err)
					}
					continue
				}
				held = append(held, st)
				for m := range buckets / perMsg {
					us := make([]*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, 0, perMsg+1)
					us = append(us, usage(apiBucket, time.Second, 1, 0))
					for n := range perMsg {
						us = append(us, usage(bigID(i, m*perMsg+n), 0, 1, 0))
					}
					if err := st.Send(reports(us...)); err != nil {
						_, err2 := st.Recv()
						t.Fatalf("stream %d, message %d: %v: %v", i, m, err, err2)
					}
					r, err := st.Recv()
					if err != nil {
						t.Fatal(err)
					}
					subscribed += len(r.GetBucketAction()) - 1
				}
			}
			heap, rss := heapBytes()-heap0, rssBytes()-rss0
			used := promtest.Value(t, reg, "sluice_rlqs_memory_bytes", "", "")
			t.Logf("%d streams held, %d refused; %d buckets subscribed of %d reported; in %v", len(held), refused, subscribed, len(held)*buckets, time.Since(start).Round(time.Millisecond))
			t.Logf("accounted %.1f MiB; heap +%.1f MiB; RSS +%.1f MiB (server and client in one process)", used/(1<<20), float64(heap)/(1<<20), float64(rss)/(1<<20))
			if subscribed > 0 {
				t.Logf("per bucket: heap %.0f B, accounted %.0f B", float64(heap)/float64(subscribed), used/float64(subscribed))
			}
			cancel()
			runtime.GC()
		})
	}
}
