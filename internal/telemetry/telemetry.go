// Package telemetry is serve's tracing and statsd: their settings from
// envoyproxy/ratelimit's variables, and the tracer provider and statsd
// store they start.
//
// Shipped: wiring, imported by cmd/sluice alone.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	gostats "github.com/lyft/gostats"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/ratelimitenv"
	"github.com/sluicehq/sluice/internal/statsd"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/service"
)

// statsdEnv are the variables that configure the statsd and DogStatsD
// sinks: with neither on (or DISABLE_STATS true) the set ones are named in
// serve's start-up line of things not acted on, as are dogEnv's without
// USE_DOG_STATSD and STATSD_PROTOCOL with it (DogStatsD is UDP).
// tracingEnv are the variables that configure tracing besides
// TRACING_ENABLED: with tracing off the set ones are named in that line.
// All are groups of ratelimitenv's table.
var (
	statsdEnv  = ratelimitenv.Names(ratelimitenv.InGroup("statsd"))
	dogEnv     = ratelimitenv.Names(ratelimitenv.InGroup("dogstatsd"))
	tracingEnv = ratelimitenv.Names(ratelimitenv.InGroup("tracing"))
)

// The DogStatsD sink is one a gostats store can flush into.
var _ gostats.FlushableSink = (*statsd.DogSink)(nil)

// Settings are serve's tracing and statsd settings, from
// envoyproxy/ratelimit's variables (FromEnv). The zero value turns both
// off.
type Settings struct {
	tracing       bool
	tracer        tracing.Config
	statsd        bool
	dog           bool               // DogStatsD instead of plain statsd
	mogrifiers    []statsd.Mogrifier // USE_DOG_STATSD_MOGRIFIERS
	statsdHost    string
	statsdPort    int
	statsdProto   string
	extraTags     map[string]string
	flushInterval time.Duration
}

// FromEnv reads the tracing and statsd variables; malformed ones
// go to errs. Tracing is off unless TRACING_ENABLED is true, as in
// envoyproxy/ratelimit; statsd is off unless USE_STATSD is true (in
// envoyproxy/ratelimit it defaults to true: Sluice's own metrics are
// Prometheus's, always at GET /metrics), DogStatsD unless USE_DOG_STATSD
// is, and both while DISABLE_STATS is true. Both at once is refused, as
// envoyproxy/ratelimit refuses two stats sinks.
func FromEnv(errs *envflag.Errs) Settings {
	errs.Bools("TRACING_ENABLED", "USE_STATSD", "USE_DOG_STATSD", "DISABLE_STATS")
	s := Settings{
		tracing: envflag.Bool("TRACING_ENABLED", false),
		tracer: tracing.Config{
			ServiceName: envflag.String("TRACING_SERVICE_NAME", tracing.DefaultServiceName),
			Namespace:   os.Getenv("TRACING_SERVICE_NAMESPACE"),
			InstanceID:  os.Getenv("TRACING_SERVICE_INSTANCE_ID"),
			Protocol:    strings.ToLower(strings.TrimSpace(envflag.String("TRACING_EXPORTER_PROTOCOL", tracing.ProtocolHTTP))),
		},
		statsd:        envflag.Bool("USE_STATSD", false) && !envflag.Bool("DISABLE_STATS", false),
		dog:           envflag.Bool("USE_DOG_STATSD", false) && !envflag.Bool("DISABLE_STATS", false),
		statsdHost:    envflag.String("STATSD_HOST", "localhost"),
		statsdPort:    envflag.Parse(errs, "STATSD_PORT", 8125, "a port number", parsePort),
		statsdProto:   strings.ToLower(strings.TrimSpace(envflag.String("STATSD_PROTOCOL", "tcp"))),
		flushInterval: errs.Duration("STATS_FLUSH_INTERVAL", 10*time.Second),
	}
	if p := s.tracer.Protocol; p != tracing.ProtocolHTTP && p != tracing.ProtocolGRPC {
		*errs = append(*errs, fmt.Errorf("TRACING_EXPORTER_PROTOCOL=%q: want http or grpc", p))
	}
	rate := envflag.Parse(errs, "TRACING_SAMPLING_RATE", 1.0, "a number from 0 to 1", parseRate)
	s.tracer.SamplingRate = &rate
	if p := s.statsdProto; p != "tcp" && p != "udp" {
		*errs = append(*errs, fmt.Errorf("STATSD_PROTOCOL=%q: want tcp or udp", p))
	}
	if s.flushInterval <= 0 {
		*errs = append(*errs, errors.New("STATS_FLUSH_INTERVAL: want a duration above 0"))
	}
	s.extraTags = errs.Pairs("EXTRA_TAGS", ":")
	if s.dog {
		if s.statsd {
			*errs = append(*errs, errors.New("USE_STATSD and USE_DOG_STATSD are both true: choose one stats sink (envoyproxy/ratelimit refuses both too)"))
		}
		s.statsd = true
		names := os.Getenv("USE_DOG_STATSD_MOGRIFIERS")
		var err error
		if s.mogrifiers, err = statsd.MogrifiersFromEnv(names, os.LookupEnv); err != nil {
			*errs = append(*errs, fmt.Errorf("USE_DOG_STATSD_MOGRIFIERS=%q: %w", names, err))
		}
	}
	return s
}

// parsePort parses STATSD_PORT: a port number from 1 to 65535.
func parsePort(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err == nil && (n < 1 || n > 65535) {
		err = errors.New("out of range")
	}
	return n, err
}

// parseRate parses TRACING_SAMPLING_RATE: a number from 0 to 1.
func parseRate(v string) (float64, error) {
	r, err := strconv.ParseFloat(v, 64)
	if err == nil && !(r >= 0 && r <= 1) {
		err = errors.New("out of range")
	}
	return r, err
}

// NotActedOn returns the telemetry variables that are set and have no
// effect with the settings s: the tracing ones without TRACING_ENABLED,
// the statsd ones without USE_STATSD.
func (s Settings) NotActedOn() []string {
	var out []string
	add := func(on bool, names []string) {
		for _, name := range names {
			if _, set := os.LookupEnv(name); set && !on {
				out = append(out, name)
			}
		}
	}
	add(s.tracing, tracingEnv)
	add(s.statsd, statsdEnv)
	add(s.dog, dogEnv)
	add(!s.dog && s.statsd, []string{"STATSD_PROTOCOL"})
	return out
}

// Telemetry is serve's tracing and statsd, running. Its zero value (and a
// nil *Telemetry) is both off: nothing installed, nothing sent.
type Telemetry struct {
	tracer *tracing.Provider // nil: tracing off
	store  gostats.Store     // nil: statsd off
	stop   context.CancelFunc
	done   chan struct{} // closed when the flush loop has flushed its last
}

// Start starts what s turns on: the tracer provider (its
// exporter connects lazily) and the statsd store with its flush loop.
func Start(ctx context.Context, s Settings, log *slog.Logger) (*Telemetry, error) {
	t := &Telemetry{}
	if s.tracing {
		cfg := s.tracer
		cfg.Logger = log
		p, err := tracing.Start(ctx, cfg)
		if err != nil {
			return nil, err
		}
		t.tracer = p
		log.Info("tracing", "service", s.tracer.ServiceName, "protocol", s.tracer.Protocol, "sampling_rate", *s.tracer.SamplingRate)
	}
	if s.statsd {
		sink, err := s.statsdSink(log)
		if err != nil {
			return nil, errors.Join(err, t.tracer.Shutdown(ctx))
		}
		t.store = gostats.NewStore(sink, false)
		// The Go runtime's gauges, ratelimit.go.*, as envoyproxy/ratelimit sends them.
		t.store.AddStatGenerator(gostats.NewRuntimeStats(t.store.ScopeWithTags("ratelimit", s.extraTags).Scope("go")))
		loop, stop := context.WithCancel(context.Background())
		t.stop, t.done = stop, make(chan struct{})
		go func() {
			defer close(t.done)
			ticker := time.NewTicker(s.flushInterval)
			defer ticker.Stop()
			t.store.StartContext(loop, ticker) // flushes once more when loop ends
		}()
		proto := s.statsdProto
		if s.dog {
			proto = "udp"
		}
		log.Info("statsd", "addr", net.JoinHostPort(s.statsdHost, strconv.Itoa(s.statsdPort)), "dogstatsd", s.dog,
			"protocol", proto, "flush_interval", s.flushInterval)
	}
	return t, nil
}

// statsdSink is the sink s asks for: DogStatsD (UDP, mogrified) or
// gostats's statsd sink (TCP by default, as envoyproxy/ratelimit's).
func (s Settings) statsdSink(log *slog.Logger) (gostats.Sink, error) {
	addr := net.JoinHostPort(s.statsdHost, strconv.Itoa(s.statsdPort))
	if s.dog {
		d, err := statsd.NewDogSink(addr, s.mogrifiers)
		if err != nil {
			return nil, err
		}
		return d, nil
	}
	return gostats.NewNetSink(gostats.WithStatsdHost(s.statsdHost), gostats.WithStatsdPort(s.statsdPort),
		gostats.WithStatsdProtocol(s.statsdProto), gostats.WithLogger(statsdLogger{log})), nil
}

// Attach makes svc count into the statsd store, when there is one.
func (t *Telemetry) Attach(svc *service.Service, s Settings) error {
	if t == nil || t.store == nil {
		return nil
	}
	return svc.SendStatsd(t.store, s.extraTags)
}

// GRPCOptions are the gRPC server options tracing needs: none when off.
func (t *Telemetry) GRPCOptions() []grpc.ServerOption {
	if t == nil {
		return nil
	}
	return t.tracer.GRPCServerOptions()
}

// Handler returns h with the decisions (POST /json and forward auth)
// traced, or h itself when tracing is off; health checks and metrics
// scrapes are not traced.
func (t *Telemetry) Handler(h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	return t.tracer.Handler(h, "/json", service.ForwardAuthPath)
}

// Shutdown flushes the spans and the stats still held, within ctx (the
// grace period of serve's drain); what is not sent by then is dropped.
func (t *Telemetry) Shutdown(ctx context.Context, log *slog.Logger) {
	if t == nil {
		return
	}
	if err := t.tracer.Shutdown(ctx); err != nil {
		log.Warn("spans not flushed", "err", err)
	}
	if t.stop != nil {
		t.stop()
		select {
		case <-t.done:
		case <-ctx.Done():
			log.Warn("stats not flushed within the grace period")
		}
	}
}

// statsdLogger is gostats's logger on slog.
type statsdLogger struct{ log *slog.Logger }

// Errorf logs gostats's error at level error.
func (l statsdLogger) Errorf(msg string, args ...any) {
	l.log.Error("statsd: " + fmt.Sprintf(msg, args...))
}

// Warnf logs gostats's warning at level warn.
func (l statsdLogger) Warnf(msg string, args ...any) {
	l.log.Warn("statsd: " + fmt.Sprintf(msg, args...))
}

// TracingOn reports whether the settings turn tracing on.
func (s Settings) TracingOn() bool { return s.tracing }

// StatsdOn reports whether the settings turn a statsd sink on (plain or
// DogStatsD).
func (s Settings) StatsdOn() bool { return s.statsd }

// ExtraTags returns EXTRA_TAGS's tags; nil when none is set.
func (s Settings) ExtraTags() map[string]string { return s.extraTags }

// Sending reports whether t has a statsd store flushing; false on nil.
func (t *Telemetry) Sending() bool { return t != nil && t.store != nil }
