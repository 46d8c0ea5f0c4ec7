package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/tracing/otlptest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

// telemetryBenchYAML is bench/rls_test.go's rule: a fixed window far above
// what the benchmark asks for, so that every decision is an admission.
const telemetryBenchYAML = "domain: bench\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: second\n      requests_per_unit: 1000000000\n"

// telemetryRow is one telemetry setting of BenchmarkRLSTelemetry.
type telemetryRow struct {
	name string
	env  map[string]string // set before telemetryFromEnv reads them
}

// discardTCP accepts connections on a loopback port and reads them to the
// end, as a statsd agent would; it returns the port.
func discardTCP(b *testing.B) int {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRLSTelemetry measures what tracing and statsd cost a decision
// made as `sluice serve` makes it: the service on the memory store with a
// Prometheus registry and draft-11 headers, on a gRPC server built with
// serve's options plus telemetry's (none when off), called by conc
// goroutines over one connection, each call one descriptor [user=<value>]
// of 10,000 values. Rows: off (serve's default); tracing with
// TRACING_SAMPLING_RATE 0.01 and 1 (OTLP/gRPC to an in-process collector
// that keeps the spans); statsd (USE_STATSD, gostats over TCP to a local
// reader, flushing every second). Besides ns/op and allocs/op (client and
// server together) it reports decisions/s and this process's CPU time per
// decision (cpu-µs/op: load generator, gRPC and service, and the
// exporter or sink).
func BenchmarkRLSTelemetry(b *testing.B) {
	otlp, err := otlptest.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(otlp.Close)
	statsdPort := discardTCP(b)
	rows := []telemetryRow{
		{name: "off"},
		{name: "tracing-1pct", env: map[string]string{"TRACING_ENABLED": "true", "TRACING_SAMPLING_RATE": "0.01",
			"TRACING_EXPORTER_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + otlp.GRPCAddr}},
		{name: "tracing-100pct", env: map[string]string{"TRACING_ENABLED": "true", "TRACING_SAMPLING_RATE": "1",
			"TRACING_EXPORTER_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + otlp.GRPCAddr}},
		{name: "statsd", env: map[string]string{"USE_STATSD": "true", "STATSD_HOST": "127.0.0.1",
			"STATSD_PORT": strconv.Itoa(statsdPort), "STATS_FLUSH_INTERVAL": "1s"}},
	}
	rules := configtest.Parse(b, telemetryBenchYAML)
	reqs := userRequests(10000)
	for _, conc := range []int{1, 64} {
		for _, row := range rows {
			b.Run("conc="+strconv.Itoa(conc)+"/"+row.name, func(b *testing.B) {
				for k, v := range row.env {
					b.Setenv(k, v)
				}
				client := telemetryBenchServer(b, rules)
				benchCalls(b, client, reqs, conc)
			})
		}
	}
}

// telemetryBenchServer starts the service with the telemetry of the
// environment and returns a client of it.
func telemetryBenchServer(b *testing.B, rules *config.Config) pb.RateLimitServiceClient {
	b.Helper()
	var errs envflag.Errs
	set := telemetry.FromEnv(&errs)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	log := quietTelemetryLog()
	tel, err := telemetry.Start(context.Background(), set, log)
	if err != nil {
		b.Fatal(err)
	}
	store := memstore.New(memstore.Config{})
	svc, err := service.New(service.Config{Limiter: store, Rules: rules, Headers: service.HeadersDraft11, Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	if err := tel.Attach(svc, set); err != nil {
		b.Fatal(err)
	}
	// Registered first, so run after grpcClient's: once the server stopped.
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tel.Shutdown(ctx, log)
		store.Close()
	})
	return grpcClient(b, svc, tel.GRPCOptions()...)
}

// benchCalls makes b.N calls from conc goroutines, after a warm-up, and
// reports decisions/s and CPU per decision.
func benchCalls(b *testing.B, c pb.RateLimitServiceClient, reqs []*pb.RateLimitRequest, conc int) {
	ctx := context.Background()
	call := func(i int) {
		resp, err := c.ShouldRateLimit(ctx, reqs[i%len(reqs)])
		if err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OK {
			b.Errorf("call %d: %v %v", i, resp.GetOverallCode(), err)
		}
	}
	run := func(n int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		next := 0
		for range conc {
			wg.Go(func() {
				for {
					mu.Lock()
					i := next
					next++
					mu.Unlock()
					if i >= n {
						return
					}
					call(i * 7919)
				}
			})
		}
		wg.Wait()
	}
	run(max(20*conc, 2000)) // warm-up: every key and series exists
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, t0 := cpuTime(), time.Now()
	run(b.N)
	elapsed, cpu := time.Since(t0), cpuTime()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// userRequests returns n requests of domain bench, each for a user of its
// own (000000, 000001, ...).
func userRequests(n int) []*pb.RateLimitRequest {
	reqs := make([]*pb.RateLimitRequest, n)
	for i := range reqs {
		reqs[i] = &pb.RateLimitRequest{Domain: "bench", Descriptors: []*rlpb.RateLimitDescriptor{
			{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: fmt.Sprintf("%06d", i)}}},
		}}
	}
	return reqs
}
