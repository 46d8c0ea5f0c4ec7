package main

import (
	"net/http"
	"path/filepath"
	"testing"
)

// Through the binary over TCP, as NGINX calls /auth with docs/serve.md's
// configuration (X-Original-URI and X-Original-Method set, the client's
// other headers passed on): once POST /login is over its limit, a client
// that adds X-Forwarded-Uri or X-Forwarded-Method of its own gets no
// fresh allowance (400: the forwarded headers disagree), where before it
// got 200.
func TestServeAuthClientForwardedHeadersDoNotBypass(t *testing.T) {
	path := filepath.Join(t.TempDir(), "edge.yaml")
	writeAtomic(t, path, bypassAuthRules)
	s := launch(t, "-config", path)
	nginx := func(extra map[string]string) int {
		hdr := map[string]string{"X-Original-URI": "/login", "X-Original-Method": "POST"}
		for k, v := range extra {
			hdr[k] = v
		}
		return authCall(t, s.url, hdr).code
	}
	for i := range 2 {
		if code := nginx(nil); code != http.StatusOK {
			t.Fatalf("POST /login %d: %d, want 200", i+1, code)
		}
	}
	if code := nginx(nil); code != http.StatusTooManyRequests {
		t.Fatalf("3rd POST /login: %d, want 429", code)
	}
	for _, extra := range []map[string]string{
		{"X-Forwarded-Uri": "/elsewhere"},
		{"X-Forwarded-Method": "GET"},
	} {
		if code := nginx(extra); code != http.StatusBadRequest {
			t.Errorf("POST /login over its limit with the client's %v: %d, want 400", extra, code)
		}
	}
}
