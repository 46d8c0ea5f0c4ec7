// Package tracing is OpenTelemetry tracing for the rate limit service, as
// envoyproxy/ratelimit's TRACING_* settings configure it: an OTLP exporter
// (over HTTP or gRPC, reading the standard OTEL_EXPORTER_OTLP_* variables
// for its endpoint, headers, TLS and timeout), a sampler, the service's
// resource attributes, and W3C trace context, W3C baggage and B3 (single
// and multiple header) propagation.
//
// A nil *Provider is tracing turned off: its methods install nothing and
// cost nothing, so that a server built with tracing off is the server
// without this package.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/propagators/b3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// Exporter protocols, the values of Config.Protocol.
const (
	ProtocolHTTP = "http" // OTLP over HTTP (protobuf), envoyproxy/ratelimit's default
	ProtocolGRPC = "grpc" // OTLP over gRPC
)

// DefaultServiceName is Config.ServiceName's default, envoyproxy/ratelimit's
// TRACING_SERVICE_NAME default.
const DefaultServiceName = "RateLimit"

// Config configures a Provider. The zero value exports over OTLP/HTTP as
// service DefaultServiceName and samples every trace.
type Config struct {
	// ServiceName, Namespace and InstanceID are the resource's
	// service.name, service.namespace and service.instance.id; empty
	// Namespace and InstanceID are left out, empty ServiceName is
	// DefaultServiceName. They take precedence over OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES, whose other attributes are kept.
	ServiceName, Namespace, InstanceID string
	// Protocol is ProtocolHTTP or ProtocolGRPC; empty is ProtocolHTTP.
	// The exporter reads the OTEL_EXPORTER_OTLP_* variables (endpoint,
	// headers, certificates, compression, timeout): see
	// https://opentelemetry.io/docs/specs/otel/protocol/exporter/.
	Protocol string
	// SamplingRate is the fraction of new traces sampled, in [0, 1]; nil
	// means 1. A request that carries a parent span (traceparent or B3
	// headers) follows its parent's decision, so that the service never
	// breaks a trace the proxy chose to record, nor records one the proxy
	// dropped.
	SamplingRate *float64
	// Logger receives OpenTelemetry's errors (a collector that cannot be
	// reached, spans dropped), at Warn. It is set process-wide (otel's
	// error handler is global); nil leaves OpenTelemetry's default, which
	// writes to standard error.
	Logger *slog.Logger
}

// Provider holds a tracer provider, its exporter and the propagators. A nil
// *Provider is tracing off.
type Provider struct {
	tp    *sdktrace.TracerProvider
	props propagation.TextMapPropagator
	tr    trace.Tracer
}

// Start builds the exporter and the tracer provider cfg describes. The
// exporter does not connect yet: an unreachable collector costs dropped
// spans and a log line from OpenTelemetry, never a failed start.
func Start(ctx context.Context, cfg Config) (*Provider, error) {
	rate := 1.0
	if cfg.SamplingRate != nil {
		rate = *cfg.SamplingRate
	}
	if !(rate >= 0 && rate <= 1) {
		return nil, fmt.Errorf("tracing: sampling rate %v is not in [0, 1]", rate)
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch strings.ToLower(cfg.Protocol) {
	case "", ProtocolHTTP:
		exp, err = otlptracehttp.New(ctx)
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: exporter protocol %q is neither %q nor %q", cfg.Protocol, ProtocolHTTP, ProtocolGRPC)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: starting the OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attributes(cfg)...))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("tracing: resource: %w", err), exp.Shutdown(ctx))
	}
	if cfg.Logger != nil {
		log := cfg.Logger
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(rate))),
	)
	return &Provider{tp: tp, props: Propagators(), tr: tp.Tracer("github.com/sluicehq/sluice")}, nil
}

// attributes are the service's resource attributes from cfg.
func attributes(cfg Config) []attribute.KeyValue {
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if cfg.Namespace != "" {
		attrs = append(attrs, attribute.String("service.namespace", cfg.Namespace))
	}
	if cfg.InstanceID != "" {
		attrs = append(attrs, attribute.String("service.instance.id", cfg.InstanceID))
	}
	return attrs
}

// Propagators returns the propagators a Provider extracts a caller's trace
// with: W3C trace context, W3C baggage and B3 (single or multiple
// headers, as Envoy's Zipkin tracer sends them).
func Propagators() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}, b3.New())
}

// GRPCServerOptions returns the options that trace a gRPC server's calls
// (otelgrpc's stats handler, one server span per call, the caller's trace
// continued); none when p is nil.
func (p *Provider) GRPCServerOptions() []grpc.ServerOption {
	if p == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(p.tp),
		otelgrpc.WithPropagators(p.props),
		otelgrpc.WithMeterProvider(noop.NewMeterProvider()),
	))}
}

// Handler returns h with one server span per request to one of paths
// (named by its method and path), continuing the caller's trace; requests
// to other paths (health checks, metrics scrapes, paths clients make up)
// are served by h untraced. It returns h itself when p is nil.
func (p *Provider) Handler(h http.Handler, paths ...string) http.Handler {
	if p == nil {
		return h
	}
	traced := make(map[string]bool, len(paths))
	for _, path := range paths {
		traced[path] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !traced[r.URL.Path] {
			h.ServeHTTP(w, r)
			return
		}
		ctx := p.props.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := p.tr.Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.code))
		if sw.code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.code))
		}
	})
}

// statusWriter records the status code a handler answers with.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Shutdown exports the spans still buffered and stops the exporter, within
// ctx (the caller's grace period): what is not sent by then is dropped. It
// returns nil when p is nil.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flushing spans: %w", err)
	}
	return nil
}
