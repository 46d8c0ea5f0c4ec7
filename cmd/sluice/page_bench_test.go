package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/admin/page"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

// pageRow is one setting of the page benchmarks: no page, the page
// observing, or the page observing with a client reading its event
// stream.
type pageRow struct {
	name           string
	page, watching bool
}

var pageRows = []pageRow{{"off", false, false}, {"page", true, false}, {"page-watched", true, true}}

// pageBenchService builds serve's service on the memory store, with the
// live page as its observer when row says so, and a client reading the
// page's event stream (every second, as a browser does) when watching.
func pageBenchService(b *testing.B, rules *config.Config, row pageRow) *service.Service {
	b.Helper()
	store := memstore.New(memstore.Config{})
	b.Cleanup(func() { store.Close() })
	cfg := service.Config{Limiter: store, Rules: rules, Headers: service.HeadersDraft11, Registerer: prometheus.NewRegistry()}
	var p *page.Page
	if row.page {
		p = page.New(page.Config{Config: func() page.LoadedConfig { return page.LoadedConfig{Rules: rules, Source: "bench.yaml"} }})
		cfg.Observer = p
	}
	svc, err := service.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if row.watching {
		p.SetDecider(svc)
		mux := http.NewServeMux()
		p.Mount(mux)
		srv := httptest.NewServer(mux)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+page.Path+"/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
			}
		}()
		b.Cleanup(func() { cancel(); resp.Body.Close(); <-done; srv.Close() })
	}
	return svc
}

// BenchmarkRLSPage measures what the live page costs a decision made as
// `sluice serve` makes it (BenchmarkRLSTelemetry's set-up: gRPC over
// loopback, conc callers, 10,000 keys, every decision an admission): no
// page, the page observing every decision, and the page observing with a
// client following its event stream. It reports decisions/s and CPU per
// decision.
func BenchmarkRLSPage(b *testing.B) {
	rules := configtest.Parse(b, telemetryBenchYAML)
	reqs := userRequests(10000)
	for _, conc := range []int{1, 64} {
		for _, row := range pageRows {
			b.Run("conc="+strconv.Itoa(conc)+"/"+row.name, func(b *testing.B) {
				svc := pageBenchService(b, rules, row)
				benchCalls(b, grpcClient(b, svc), reqs, conc)
			})
		}
	}
}

// BenchmarkDecidePage is one decision in process, no transport: the
// smallest unit the page adds to, for callgrind (bench/callgrind.sh) and
// allocs/op.
func BenchmarkDecidePage(b *testing.B) {
	benchDecide(b, configtest.Parse(b, telemetryBenchYAML), pageRows)
}

// benchDecide measures one decision for alice in process under rules, on
// the service of each row.
func benchDecide(b *testing.B, rules *config.Config, rows []pageRow) {
	req := &pb.RateLimitRequest{Domain: "bench", Descriptors: []*rlpb.RateLimitDescriptor{
		{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: "alice"}}},
	}}
	for _, row := range rows {
		b.Run(row.name, func(b *testing.B) {
			svc := pageBenchService(b, rules, row)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := svc.ShouldRateLimit(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// grpcClient serves svc over gRPC on loopback, with serve's options and
// opts, and returns a client of it; both are stopped when b ends.
func grpcClient(b *testing.B, svc *service.Service, opts ...grpc.ServerOption) pb.RateLimitServiceClient {
	b.Helper()
	gs := grpc.NewServer(append(service.GRPCServerOptions(), opts...)...)
	svc.RegisterGRPC(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go gs.Serve(ln)
	cc := dial(b, ln.Addr().String(), insecure.NewCredentials())
	b.Cleanup(func() {
		cc.Close()
		gs.Stop()
	})
	return pb.NewRateLimitServiceClient(cc)
}

// BenchmarkDecidePageRefused is BenchmarkDecidePage on a rule of one a
// day: after the first, every decision is a refusal, which the page
// hashes (sluice.HashKey), counts in its sketch and keeps in its ring.
func BenchmarkDecidePageRefused(b *testing.B) {
	rules := configtest.Parse(b, "domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 1}\n")
	benchDecide(b, rules, pageRows[:2])
}
