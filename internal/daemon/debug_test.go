package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/internal/daemontest"
	"github.com/sluicehq/sluice/internal/envflag"
)

// /rlconfig prints one line per rule in envoyproxy/ratelimit's form, which
// scripts and test suites written for it match ("<full key>: unit=MINUTE
// requests_per_unit=10, shadow_mode: false"), with Sluice's own reading of
// the rule after it; it follows the running config.
func TestDebugRLConfigPrintsTheRunningRules(t *testing.T) {
	rules := configtest.Parse(t, `domain: shop
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: path
    value: /admin
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 5}
    descriptors:
      - key: user
        rate_limit: {unlimited: true}
`)
	cur := rules
	srv := httptest.NewServer(DebugHandler(func() *config.Config { return cur }))
	defer srv.Close()
	code, body := get(t, srv.URL+"/rlconfig")
	if code != 200 {
		t.Fatalf("GET /rlconfig: %d %s", code, body)
	}
	for _, want := range []string{
		"shop.user: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false, sluice: fixed_window 10/1m0s\n",
		"shop.path_/admin: unit=HOUR requests_per_unit=5, shadow_mode: true, quota_mode: false, sluice: fixed_window 5/1h0m0s\n",
		"shop.path_/admin.user: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false, sluice: unlimited\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /rlconfig lacks %q:\n%s", want, body)
		}
	}
	cur = configtest.Parse(t, "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 0}\n")
	if _, body := get(t, srv.URL+"/rlconfig"); body != "other.k: unit=SECOND requests_per_unit=0, shadow_mode: false, quota_mode: false, sluice: blocked\n" {
		t.Errorf("after a reload, GET /rlconfig = %q", body)
	}
	cur = nil
	if code, body := get(t, srv.URL+"/rlconfig"); code != 200 || body != "" {
		t.Errorf("with no config loaded: %d %q", code, body)
	}
}

// The debug listener serves pprof, but not its command line (which may
// hold -store's Redis password); its index lists the endpoints.
func TestDebugServesPprofButNotTheCommandLine(t *testing.T) {
	srv := httptest.NewServer(DebugHandler(func() *config.Config { return nil }))
	defer srv.Close()
	if code, body := get(t, srv.URL+"/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile") {
		t.Errorf("GET /debug/pprof/goroutine: %d %.100s", code, body)
	}
	if code, body := get(t, srv.URL+"/debug/pprof/cmdline"); code == 200 || strings.Contains(body, os.Args[0]) {
		t.Errorf("GET /debug/pprof/cmdline: %d %.100s", code, body)
	}
	if code, body := get(t, srv.URL+"/"); code != 200 || !strings.Contains(body, "/rlconfig") || !strings.Contains(body, "/debug/pprof/") {
		t.Errorf("GET /: %d %s", code, body)
	}
	if code, _ := get(t, srv.URL+"/nothing"); code != 404 {
		t.Errorf("GET /nothing: %d, want 404", code)
	}
}

// DEBUG_HOST and DEBUG_PORT name the debug listener: none when neither
// is set (envoyproxy/ratelimit serves pprof on 0.0.0.0:6070 regardless;
// Sluice only when asked), loopback unless DEBUG_HOST says otherwise,
// port 6070 unless DEBUG_PORT does.
func TestDebugAddrFromEnv(t *testing.T) {
	for _, c := range []struct{ host, port, want string }{
		{"", "", ""},
		{"127.0.0.1", "", "127.0.0.1:6070"},
		{"0.0.0.0", "", "0.0.0.0:6070"},
		{"", "7000", "127.0.0.1:7000"},
		{"::1", "7000", "[::1]:7000"},
	} {
		t.Setenv("DEBUG_HOST", c.host)
		t.Setenv("DEBUG_PORT", c.port)
		if addr := debugAddrFromEnv(); addr != c.want {
			t.Errorf("DEBUG_HOST=%q DEBUG_PORT=%q: %q, want %q", c.host, c.port, addr, c.want)
		}
	}
}

// A debug address that cannot be listened on is an error (the operator
// asked for it); an empty address is no debug listener.
func TestListenDebugFailsOnABusyAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var lo ListenerOptions
	lo.Flags(newTestFlagSet(), new(envflag.Errs))
	h := http.NotFoundHandler()
	if d, err := ListenDebug(busy.Addr().String(), &lo, h, daemontest.QuietLogger()); err == nil {
		d.ln.Close()
		t.Error("a busy address: no error")
	}
	if d, err := ListenDebug("", &lo, h, daemontest.QuietLogger()); d != nil || err != nil {
		t.Errorf("an empty address: %v %v, want none", d, err)
	}
}

// The debug listener has the HTTP listener's header, read and idle
// timeouts, and a write timeout long enough for a default 30-second CPU
// profile; a profile in flight ends when serve stops instead of holding
// the stop for its length.
func TestDebugListenerTimeoutsAndStop(t *testing.T) {
	var lo ListenerOptions
	lo.Flags(newTestFlagSet(), new(envflag.Errs))
	d, err := ListenDebug("127.0.0.1:0", &lo, DebugHandler(func() *config.Config { return nil }), daemontest.QuietLogger())
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	s := d.srv
	if s.ReadHeaderTimeout != lo.readHeader || s.ReadTimeout != lo.read || s.IdleTimeout != lo.idle || s.WriteTimeout < 31*time.Second {
		t.Errorf("timeouts: header %v read %v idle %v write %v", s.ReadHeaderTimeout, s.ReadTimeout, s.IdleTimeout, s.WriteTimeout)
	}
	url := "http://" + d.Addr().String()
	got := make(chan int, 1)
	go func() {
		resp, err := http.Get(url + "/debug/pprof/profile?seconds=60")
		if err != nil {
			got <- -1
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	daemontest.Eventually(t, "the profile is running", func() bool {
		var b strings.Builder
		pprof.Lookup("goroutine").WriteTo(&b, 2)
		return strings.Contains(b.String(), "net/http/pprof.Profile(")
	})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d.Shutdown(ctx)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("stopping with a 60s profile in flight took %v", took)
	}
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Error("the profile request did not end")
	}
	if err := <-served; err != http.ErrServerClosed {
		t.Errorf("serve returned %v, want http.ErrServerClosed", err)
	}
}
