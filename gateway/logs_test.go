package gateway_test

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testlog"
)

const secretKeyConfig = `
limits: [{name: by_key, key: "header:X-Api-Key", rate: 1r/m, algorithm: fixed_window}]
conns: [{name: conn_key, key: "header:X-Api-Key", max: 1}]
routes: [{name: api, match: /, limits: [by_key], conns: [conn_key]}]
`

// refuse sends two requests with the API key, the second refused.
func refuse(t *testing.T, url string, c *http.Client) {
	t.Helper()
	for i, want := range []int{200, 429} {
		if code := getHeaders(t, c, url+"/x", "X-Api-Key", "sk_live_SECRET").StatusCode; code != want {
			t.Fatalf("request %d: %d, want %d", i+1, code, want)
		}
	}
}

// A refusal is one line at info level: the access log's when there is
// one, else the logger's; and no line carries the API key the limit is
// keyed by, unless log_keys says so.
func TestRefusalIsOneLineWithoutTheKey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		accessLog bool
		logKeys   bool
	}{{"access log", true, false}, {"no access log", false, false}, {"log_keys", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t)
			cfg := parsed(t, secretKeyConfig, up)
			var access, logs testlog.Buffer
			if tc.accessLog {
				cfg.AccessLog = &access
			}
			cfg.LogKeys = tc.logKeys
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			_, srv := front(t, cfg)
			refuse(t, srv.URL, srv.Client())
			lines := strings.Count(access.String(), "\n") + strings.Count(logs.String(), "\n")
			if lines != 1 {
				t.Errorf("%d lines for one refusal, want 1:\naccess: %s\nlog: %s", lines, access.String(), logs.String())
			}
			if tc.accessLog && logs.String() != "" {
				t.Errorf("with an access log, the logger has the refusal too: %s", logs.String())
			}
			leaked := strings.Contains(access.String()+logs.String(), "sk_live_SECRET")
			if leaked != tc.logKeys {
				t.Errorf("key in the logs: %v, want %v:\naccess: %s\nlog: %s", leaked, tc.logKeys, access.String(), logs.String())
			}
		})
	}
}

// Without an access log, a flood of refusals is not a flood of lines: the
// first is logged, the rest of each 10 s counted into the next line. 100
// refusals were 100 lines of the logger's before.
func TestRefusalFloodWithoutAccessLogIsBounded(t *testing.T) {
	up := newUpstream(t)
	cfg := parsed(t, secretKeyConfig, up)
	var logs testlog.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	_, srv := front(t, cfg)
	refuse(t, srv.URL, srv.Client())
	for range 99 {
		if code := getHeaders(t, srv.Client(), srv.URL+"/x", "X-Api-Key", "sk_live_SECRET").StatusCode; code != http.StatusTooManyRequests {
			t.Fatalf("a request past the limit: %d, want 429", code)
		}
	}
	// Two lines at most: the 100 requests take far less than 10 s, but a
	// loaded machine may cross one boundary.
	if n := strings.Count(logs.String(), "httplimit: refused"); n < 1 || n > 2 {
		t.Errorf("%d lines for 100 refusals, want 1 (or 2 across a 10 s boundary):\n%s", n, logs.String())
	}
}

// A flood of requests an adaptive max_in_flight sheds is not a flood of
// the logger's lines either: the first shed is logged, the rest of each
// 10 s counted into the next. 100 sheds were 100 lines before.
func TestAdaptiveShedFloodWithoutAccessLogIsBounded(t *testing.T) {
	up := holding{entered: make(chan struct{}, 1), release: make(chan struct{})}
	var logs testlog.Buffer
	g := adaptiveGateway(t, up, func(c *gateway.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	done := make(chan int)
	go func() { done <- served(g, "GET", "/api/x").Code }()
	<-up.entered
	for range 100 {
		if code := served(g, "GET", "/api/x").Code; code != http.StatusServiceUnavailable {
			t.Fatalf("a request beyond the adaptive limit: %d, want 503", code)
		}
	}
	close(up.release)
	<-done
	// Two lines at most: the 100 requests take far less than 10 s, but a
	// loaded machine may cross one boundary.
	if n := strings.Count(logs.String(), "httplimit: refused"); n < 1 || n > 2 {
		t.Errorf("%d lines for 100 sheds, want 1 (or 2 across a 10 s boundary):\n%s", n, logs.String())
	}
}

// downTransport is an upstream that refuses every connection.
type downTransport struct{}

func (downTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("connection refused")
}

// With the upstream down, a flood of requests is not a flood of lines:
// the first failure is logged, the rest of each 10 s counted into the
// next line. 100 failures were 100 lines before.
func TestUpstreamFailureFloodIsBounded(t *testing.T) {
	var logs testlog.Buffer
	g := gatewayOf(t, "routes: [{name: api, match: /api/}]", "http://upstream.invalid", downTransport{}, func(c *gateway.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	for range 100 {
		if code := served(g, "GET", "/api/x").Code; code != http.StatusBadGateway {
			t.Fatalf("a request with the upstream down: %d, want 502", code)
		}
	}
	// Two lines at most: the 100 requests take far less than 10 s, but a
	// loaded machine may cross one boundary.
	if n := strings.Count(logs.String(), "gateway: upstream failed"); n < 1 || n > 2 {
		t.Errorf("%d lines for 100 failures, want 1 (or 2 across a 10 s boundary):\n%.2000s", n, logs.String())
	}
}
