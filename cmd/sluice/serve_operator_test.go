package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/testlog"
)

// serve's /metrics has the Go runtime's and the process's series, as the
// proxy's has: go_goroutines, go_memstats_*, process_resident_memory_bytes
// and process_open_fds. Before, it had none of them.
func TestServeMetricsHaveGoAndProcessCollectors(t *testing.T) {
	s := launch(t)
	_, b := call(t, http.MethodGet, s.url+"/metrics", "", nil)
	for _, name := range []string{"go_goroutines ", "go_memstats_heap_alloc_bytes ", "process_resident_memory_bytes ", "process_open_fds "} {
		if !strings.Contains(string(b), "\n"+name) {
			t.Errorf("/metrics has no %s", strings.TrimSpace(name))
		}
	}
}

// With LOG_FORMAT=json the start-up banner is JSON too: every line serve
// prints on stdout is a JSON object with envoyproxy/ratelimit's keys,
// naming the HTTP URL, the gRPC target and the debug listener. Before, it
// was plain text lines.
func TestServeBannerIsJSONWithJSONLogs(t *testing.T) {
	t.Setenv("LOG_FORMAT", "json")
	s := launch(t)
	out := strings.TrimSpace(s.stdout.String())
	if out == "" {
		t.Fatal("no banner")
	}
	for l := range strings.SplitSeq(out, "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a banner line that is not JSON: %q: %v", l, err)
		}
		if m["@timestamp"] == nil || m["@message"] == nil || m["level"] == nil {
			t.Errorf("a banner line without @timestamp, @message or level: %q", l)
		}
	}
	if got := post(t, s.url, reqK); got != 200 {
		t.Errorf("POST /json at the banner's URL %s: %d, want 200", s.url, got)
	}
}

// The banner names the address serve is bound to: listening on every
// interface, it says so ([::] or 0.0.0.0 and the port bound), not
// localhost. Before, it said http://localhost:PORT.
func TestServeBannerNamesTheBoundAddress(t *testing.T) {
	s := launch(t, "-http-addr", ":0")
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsUnspecified() {
		t.Errorf("banner's HTTP URL %s for -http-addr :0, want the unspecified address it is bound to", s.url)
	}
	if !strings.Contains(s.stdout.String(), "every interface") {
		t.Errorf("banner does not say it listens on every interface: %q", s.stdout.String())
	}
	// The loopback address is what it names when bound to it.
	s2 := launch(t)
	if !strings.HasPrefix(s2.url, "http://127.0.0.1:") {
		t.Errorf("banner's HTTP URL %s for -http-addr 127.0.0.1:0", s2.url)
	}
}

// serve and the proxy log one line when they stop: why (the signal, as
// the context's cause names it) and how long the drain took. Before,
// serve logged nothing at shutdown; the proxy shares the line (app.run).
func TestServeAndProxyLogOneLineAtShutdown(t *testing.T) {
	for _, c := range []struct {
		name   string
		run    func(context.Context, []string, io.Writer, io.Writer) int
		args   []string
		banner string
	}{
		{"serve", runServe, []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-log-format", "json"}, `"http"`},
		{"proxy", runProxy, []string{"-listen", "127.0.0.1:0", "-admin-addr", "", "-upstream", "http://127.0.0.1:1", "-log-format", "json"}, `"listen"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			var out, errb testlog.Buffer
			done := make(chan int, 1)
			go func() { done <- c.run(ctx, c.args, &out, &errb) }()
			eventually(t, "the banner", func() bool { return strings.Contains(out.String(), c.banner) })
			cancel(errors.New("terminated signal received"))
			select {
			case code := <-done:
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errb.String())
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("%s did not stop", c.name)
			}
			var lines []map[string]any
			for l := range strings.SplitSeq(strings.TrimSpace(errb.String()), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); l != "" && err != nil {
					t.Fatalf("%q: %v", l, err)
				}
				if m["@message"] == "stopped" {
					lines = append(lines, m)
				}
			}
			if len(lines) != 1 {
				t.Fatalf("%d stopped lines, want 1: %s", len(lines), errb.String())
			}
			m := lines[0]
			d, err := time.ParseDuration(fmt.Sprint(m["drain"]))
			if m["reason"] != "terminated signal received" || err != nil || d < 0 || d > daemon.DrainGrace {
				t.Errorf("stopped line %v: want reason %q and the drain's duration", m, "terminated signal received")
			}
		})
	}
}
