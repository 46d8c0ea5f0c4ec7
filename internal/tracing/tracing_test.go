package tracing

import (
	"context"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/internal/tracing/otlptest"
)

const (
	parentTrace = "4bf92f3577b34a0ea8f4e1a7c8d2b7e1"
	parentSpan  = "00f067aa0ba902b7"
)

func receiver(t *testing.T) *otlptest.Receiver {
	t.Helper()
	r, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func start(t *testing.T, cfg Config) *Provider {
	t.Helper()
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

// serveHealth serves the gRPC health service with opts and returns a
// client of it, and stop, which stops the server once its handlers have
// returned: a call's server span ends after the reply the client reads, so
// the spans are all ended only after stop.
func serveHealth(t *testing.T, opts ...grpc.ServerOption) (c healthpb.HealthClient, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return healthpb.NewHealthClient(cc), gs.GracefulStop
}

// A gRPC call's span reaches an OTLP/gRPC collector, as a child of the
// caller's W3C traceparent, with the configured service name, once the
// provider is shut down (the flush at the end of the grace period).
func TestGRPCCallSpanReachesCollectorOverGRPC(t *testing.T) {
	r := receiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+r.GRPCAddr)
	p := start(t, Config{Protocol: ProtocolGRPC, ServiceName: "rls-test", Namespace: "edge", InstanceID: "pod-7"})
	c, stop := serveHealth(t, p.GRPCServerOptions()...)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", "00-"+parentTrace+"-"+parentSpan+"-01")
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans := r.Spans()
	if len(spans) != 1 {
		t.Fatalf("received %d spans, want the call's one", len(spans))
	}
	s := spans[0]
	if s.Service != "rls-test" || s.Span.GetName() != "grpc.health.v1.Health/Check" {
		t.Errorf("span %q of service %q, want grpc.health.v1.Health/Check of rls-test", s.Span.GetName(), s.Service)
	}
	if got := hex.EncodeToString(s.Span.GetTraceId()); got != parentTrace {
		t.Errorf("trace id %s, want the caller's %s", got, parentTrace)
	}
	if s.Resource["service.namespace"] != "edge" || s.Resource["service.instance.id"] != "pod-7" {
		t.Errorf("resource %v, want service.namespace edge and service.instance.id pod-7", s.Resource)
	}
	if got := hex.EncodeToString(s.Span.GetParentSpanId()); got != parentSpan {
		t.Errorf("parent span %s, want the caller's %s", got, parentSpan)
	}
}

// An HTTP request's span reaches an OTLP/HTTP collector (the default
// protocol), continuing a B3 multi-header trace, named by method and
// path; a request to a path not traced (a health check, a path a client
// made up) makes no span.
func TestHTTPRequestSpanReachesCollectorOverHTTPWithB3(t *testing.T) {
	r := receiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.HTTPURL)
	p := start(t, Config{})
	h := p.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
	}), "/json")
	req := httptest.NewRequest("POST", "/json", nil)
	req.Header.Set("X-B3-TraceId", parentTrace)
	req.Header.Set("X-B3-SpanId", parentSpan)
	req.Header.Set("X-B3-Sampled", "1")
	h.ServeHTTP(httptest.NewRecorder(), req)
	for _, path := range []string{"/healthcheck", "/client-chosen/path"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusTooManyRequests {
			t.Errorf("GET %s answered %d, want the handler's 429", path, rec.Code)
		}
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := r.Spans()
	if len(spans) != 1 {
		t.Fatalf("received %d spans, want POST /json's only", len(spans))
	}
	s := spans[0]
	if s.Span.GetName() != "POST /json" || hex.EncodeToString(s.Span.GetTraceId()) != parentTrace {
		t.Errorf("span %q in trace %x, want POST /json in the B3 caller's %s", s.Span.GetName(), s.Span.GetTraceId(), parentTrace)
	}
	if s.Service != DefaultServiceName {
		t.Errorf("service %q, want %q", s.Service, DefaultServiceName)
	}
}

// With a sampling rate of 0, a new trace is not exported, and a call whose
// caller sampled its trace still is (the parent decides).
func TestSamplingRateZeroKeepsOnlyParentSampledTraces(t *testing.T) {
	r := receiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+r.GRPCAddr)
	zero := 0.0
	p := start(t, Config{Protocol: ProtocolGRPC, SamplingRate: &zero})
	c, stop := serveHealth(t, p.GRPCServerOptions()...)
	for range 5 {
		if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", "00-"+parentTrace+"-"+parentSpan+"-01")
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if spans := r.Spans(); len(spans) != 1 || hex.EncodeToString(spans[0].Span.GetTraceId()) != parentTrace {
		t.Fatalf("received %d spans, want only the parent-sampled call's", len(spans))
	}
}

// Off is free: a nil Provider installs no stats handler and returns the
// HTTP handler itself, and its Shutdown is a no-op.
func TestNilProviderInstallsNothing(t *testing.T) {
	var p *Provider
	if opts := p.GRPCServerOptions(); len(opts) != 0 {
		t.Errorf("nil provider: %d gRPC server options, want none", len(opts))
	}
	h := http.NewServeMux()
	if got, ok := p.Handler(h, "/json").(*http.ServeMux); !ok || got != h {
		t.Error("nil provider wrapped the HTTP handler")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// Settings envoyproxy/ratelimit would not run with are refused.
func TestStartRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"rate above 1", Config{SamplingRate: ptr(1.5)}},
		{"negative rate", Config{SamplingRate: ptr(-0.1)}},
		{"unknown protocol", Config{Protocol: "zipkin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p, err := Start(context.Background(), tc.cfg); err == nil {
				p.Shutdown(context.Background())
				t.Fatal("Start accepted it")
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// OpenTelemetry's errors (here: a collector that refuses connections)
// reach Config.Logger, instead of OpenTelemetry's own line on stderr.
func TestExportErrorsGoToTheLogger(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "100") // ms: the export gives up (and is reported) at once
	var buf testlog.Buffer
	p, err := Start(context.Background(), Config{Protocol: ProtocolGRPC, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	p.Handler(http.NotFoundHandler(), "/").ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.Shutdown(ctx)
	if !strings.Contains(buf.String(), "level=WARN msg=tracing err=") {
		t.Errorf("log %q, want the export error at WARN", buf.String())
	}
}
