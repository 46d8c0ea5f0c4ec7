package main

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/tracing/otlptest"
)

// telemetryConfig is a config whose one rule admits 2 an hour: a token
// bucket, which refills one request in 30 minutes, so that a test's calls
// count in one bucket whenever they run (a fixed window of a minute let
// the third call through when the minute turned between the calls).
const telemetryConfig = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 2\n      algorithm: token_bucket\n"

// callRLS makes n ShouldRateLimit calls for k=v over gRPC, each with md
// as metadata, and returns their overall codes.
func callRLS(t *testing.T, addr string, n int, md ...string) []pb.RateLimitResponse_Code {
	t.Helper()
	cc := dial(t, addr, insecure.NewCredentials())
	defer cc.Close()
	c := pb.NewRateLimitServiceClient(cc)
	var codes []pb.RateLimitResponse_Code
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
		resp, err := c.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{
			{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}},
		}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, resp.GetOverallCode())
	}
	return codes
}

// With TRACING_ENABLED=true, serve's gRPC calls and POST /json requests
// reach an OTLP collector as server spans, continuing the caller's W3C
// trace, under TRACING_SERVICE_NAME; the spans still buffered at SIGTERM
// are flushed within the drain.
func TestServeSendsSpansToAnOTLPCollector(t *testing.T) {
	for _, proto := range []string{"grpc", "http"} {
		t.Run(proto, func(t *testing.T) {
			r, err := otlptest.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			endpoint := r.HTTPURL
			if proto == "grpc" {
				endpoint = "http://" + r.GRPCAddr
			}
			t.Setenv("TRACING_ENABLED", "true")
			t.Setenv("TRACING_EXPORTER_PROTOCOL", proto)
			t.Setenv("TRACING_SERVICE_NAME", "edge-rls")
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			s := launchListening(t)
			const trace = "0af7651916cd43dd8448eb211c80319c"
			callRLS(t, s.grpc, 1, "traceparent", "00-"+trace+"-b7ad6b7169203331-01")
			if code := post(t, s.url, reqK); code != http.StatusOK {
				t.Fatalf("POST /json: %d", code)
			}
			s.stop(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			spans := r.Wait(ctx, 2)
			names := map[string]bool{}
			for _, sp := range spans {
				names[sp.Span.GetName()] = true
				if sp.Service != "edge-rls" {
					t.Errorf("span %q of service %q, want edge-rls", sp.Span.GetName(), sp.Service)
				}
				if strings.HasSuffix(sp.Span.GetName(), "/ShouldRateLimit") && sp.Span.GetTraceId() == nil {
					t.Error("gRPC span without a trace id")
				}
			}
			if !names["envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"] || !names["POST /json"] {
				t.Fatalf("spans %v, want the gRPC call's and POST /json's", names)
			}
		})
	}
}

// udpListener listens on a loopback UDP port and returns what it receives,
// line by line, on a channel.
func udpListener(t *testing.T) (port int, lines <-chan string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	ch := make(chan string, 1024)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				close(ch)
				return
			}
			for line := range strings.SplitSeq(strings.TrimSpace(string(buf[:n])), "\n") {
				select {
				case ch <- line:
				default: // the test has what it needs
				}
			}
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).Port, ch
}

// serve sends envoyproxy/ratelimit's stats to STATSD_HOST:STATSD_PORT over
// UDP, each tagged with EXTRA_TAGS, and flushes the counts it holds at
// SIGTERM within the drain (the flush interval here is an hour): with
// USE_STATSD=true (STATSD_PROTOCOL=udp) as statsd lines, and with
// USE_DOG_STATSD=true as DogStatsD lines, EXTRA_TAGS as DogStatsD tags and
// names rewritten by the mogrifiers of USE_DOG_STATSD_MOGRIFIERS, as
// envoyproxy/ratelimit's README configures them.
func TestServeSendsEnvoyRatelimitStats(t *testing.T) {
	const rule = "ratelimit.service.rate_limit.d.k."
	for _, tt := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"statsd", map[string]string{"USE_STATSD": "true", "STATSD_PROTOCOL": "udp"}, []string{
			rule + "total_hits.__cluster=eu1:3|c",
			rule + "within_limit.__cluster=eu1:2|c",
			rule + "over_limit.__cluster=eu1:1|c",
			rule + "near_limit.__cluster=eu1:1|c",
			"ratelimit_server.ShouldRateLimit.total_requests.__cluster=eu1:3|c",
		}},
		{"DogStatsD", map[string]string{
			"USE_DOG_STATSD":                    "true",
			"USE_DOG_STATSD_MOGRIFIERS":         "HITS",
			"DOG_STATSD_MOGRIFIER_HITS_PATTERN": `^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$`,
			"DOG_STATSD_MOGRIFIER_HITS_NAME":    "ratelimit.service.rate_limit.$3",
			"DOG_STATSD_MOGRIFIER_HITS_TAGS":    "domain:$1,descriptor:$2",
		}, []string{
			"ratelimit.service.rate_limit.over_limit:1|c|#cluster:eu1,domain:d,descriptor:k",
			"ratelimit.service.rate_limit.total_hits:3|c|#cluster:eu1,domain:d,descriptor:k",
			"ratelimit_server.ShouldRateLimit.total_requests:3|c|#cluster:eu1",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			port, lines := udpListener(t)
			t.Setenv("STATSD_HOST", "127.0.0.1")
			t.Setenv("STATSD_PORT", strconv.Itoa(port))
			t.Setenv("EXTRA_TAGS", "cluster:eu1")
			t.Setenv("STATS_FLUSH_INTERVAL", "1h")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			s := launchListening(t)
			callRLS(t, s.grpc, 3)
			s.stop(t)
			awaitLines(t, tt.name, lines, tt.want...)
		})
	}
}

// awaitLines reads lines until each of want has come, failing the test
// when the channel closes first or 10 seconds pass; what names the
// listener in the failure.
func awaitLines(t *testing.T, what string, lines <-chan string, want ...string) {
	t.Helper()
	missing := map[string]bool{}
	for _, w := range want {
		missing[w] = true
	}
	var got []string
	deadline := time.After(10 * time.Second)
	for len(missing) > 0 {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the %s listener closed; it received %q, still missing %q", what, got, slices.Sorted(maps.Keys(missing)))
			}
			got = append(got, line)
			delete(missing, line)
		case <-deadline:
			t.Fatalf("within 10s the %s listener received %q; still missing %q", what, got, slices.Sorted(maps.Keys(missing)))
		}
	}
}

// EXTRA_TAGS, CONFIG_GRPC_XDS_NODE_METADATA and
// CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS are read by one rule, which
// accepts whatever envoyproxy/ratelimit accepts and reads it the same: an
// empty item (a trailing comma) is skipped, each item is cut at its first
// separator, keys and values are kept as written; an item without the
// separator is refused, naming the variable.
func TestPairVariablesShareOneRule(t *testing.T) {
	for _, v := range []struct{ name, sep string }{
		{"EXTRA_TAGS", ":"},
		{"CONFIG_GRPC_XDS_NODE_METADATA", "="},
		{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", ":"},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Setenv(v.name, "cluster"+v.sep+"eu1,, team "+v.sep+" edge,empty"+v.sep+",")
			var errs envflag.Errs
			got := errs.Pairs(v.name, v.sep)
			if len(errs) != 0 {
				t.Fatalf("errors %v", errs)
			}
			want := map[string]string{"cluster": "eu1", " team ": " edge", "empty": ""}
			if !maps.Equal(got, want) {
				t.Errorf("pairs %q, want %q", got, want)
			}
			t.Setenv(v.name, "cluster"+v.sep+"eu1,zone")
			errs = nil
			errs.Pairs(v.name, v.sep)
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), v.name) {
				t.Errorf("an item without %q: errors %v, want one naming %s", v.sep, errs, v.name)
			}
		})
	}
	t.Setenv("EXTRA_TAGS", "a:b,")
	var errs envflag.Errs
	if s := telemetry.FromEnv(&errs); len(errs) != 0 || !maps.Equal(s.ExtraTags(), map[string]string{"a": "b"}) {
		t.Errorf("EXTRA_TAGS=a:b, gives %v, %v; want the tag a:b", s.ExtraTags(), errs)
	}
}

func quietTelemetryLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
