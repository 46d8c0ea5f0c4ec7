package telemetry

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/envflag"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Tracing and statsd are off by default: nothing is installed on the
// gRPC server or around the HTTP handler, and nothing is started.
func TestTelemetryOffByDefaultInstallsNothing(t *testing.T) {
	var errs envflag.Errs
	s := FromEnv(&errs)
	if len(errs) != 0 || s.TracingOn() || s.StatsdOn() {
		t.Fatalf("defaults: tracing %v, statsd %v, errors %v", s.TracingOn(), s.StatsdOn(), errs)
	}
	tel, err := Start(context.Background(), s, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if opts := tel.GRPCOptions(); len(opts) != 0 {
		t.Errorf("%d gRPC server options with tracing off, want none", len(opts))
	}
	h := http.NewServeMux()
	if got, ok := tel.Handler(h).(*http.ServeMux); !ok || got != h {
		t.Error("the HTTP handler was wrapped with tracing off")
	}
	if tel.Sending() {
		t.Error("a statsd store was started with USE_STATSD unset")
	}
	tel.Shutdown(context.Background(), quietLog())
}

// Malformed telemetry variables are refused at start-up (serve exits 2)
// instead of falling back to a default the operator did not ask for.
func TestTelemetryRefusesMalformedEnv(t *testing.T) {
	for _, kv := range [][2]string{
		{"TRACING_ENABLED", "yes please"},
		{"TRACING_SAMPLING_RATE", "2"},
		{"TRACING_SAMPLING_RATE", "often"},
		{"TRACING_EXPORTER_PROTOCOL", "zipkin"},
		{"USE_STATSD", "maybe"},
		{"STATSD_PORT", "99999"},
		{"STATSD_PROTOCOL", "sctp"},
		{"EXTRA_TAGS", "novalue"},
		{"STATS_FLUSH_INTERVAL", "0"},
		{"USE_DOG_STATSD_MOGRIFIERS", "NOPATTERN"},
	} {
		t.Run(kv[0]+"="+kv[1], func(t *testing.T) {
			t.Setenv(kv[0], kv[1])
			t.Setenv("USE_DOG_STATSD", strconv.FormatBool(kv[0] == "USE_DOG_STATSD_MOGRIFIERS"))
			var errs envflag.Errs
			FromEnv(&errs)
			if len(errs) == 0 || !strings.Contains(errs[0].Error(), kv[0]) {
				t.Fatalf("errors %v, want one naming %s", errs, kv[0])
			}
		})
	}
}

// envoyproxy/ratelimit refuses two stats sinks; so does serve.
func TestTelemetryRefusesStatsdAndDogStatsDTogether(t *testing.T) {
	t.Setenv("USE_STATSD", "true")
	t.Setenv("USE_DOG_STATSD", "true")
	var errs envflag.Errs
	FromEnv(&errs)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "USE_DOG_STATSD") {
		t.Fatalf("errors %v, want one naming both", errs)
	}
}

// A statsd or tracing variable set while its feature is off does nothing,
// and is named in the start-up line; turned on, it is not.
func TestTelemetryNamesSettingsOfAFeatureThatIsOff(t *testing.T) {
	t.Setenv("STATSD_HOST", "statsd.internal")
	t.Setenv("TRACING_SAMPLING_RATE", "0.5")
	var errs envflag.Errs
	got := FromEnv(&errs).NotActedOn()
	if !slices.Contains(got, "STATSD_HOST") || !slices.Contains(got, "TRACING_SAMPLING_RATE") {
		t.Errorf("off: notActedOn = %v, want STATSD_HOST and TRACING_SAMPLING_RATE", got)
	}
	t.Setenv("USE_STATSD", "true")
	t.Setenv("TRACING_ENABLED", "true")
	if got := FromEnv(&errs).NotActedOn(); len(got) != 0 {
		t.Errorf("on: notActedOn = %v, want nothing", got)
	}
	t.Setenv("DISABLE_STATS", "true")
	if s := FromEnv(&errs); s.StatsdOn() || !slices.Contains(s.NotActedOn(), "STATSD_HOST") {
		t.Errorf("DISABLE_STATS=true left statsd on (or its settings unnamed)")
	}
}
