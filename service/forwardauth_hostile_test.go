package service_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// Behind NGINX as docs/serve.md configures it (X-Original-URI and
// X-Original-Method set by the proxy, the client's other headers passed
// on), a client that adds its own X-Forwarded-Uri or X-Forwarded-Method,
// or sends a forwarded header twice with two values, must not choose what
// /auth counts: the forwarded headers that disagree are a 400, never a
// fresh allowance.
func TestForwardAuthDisagreeingForwardedHeadersAreRefused(t *testing.T) {
	h := start(t, t0, service.Config{Rules: edgeRules(), ForwardAuth: edgeAuth()})
	client := 0
	hit := func(extra http.Header) int {
		client++ // a fresh client each time, so that per-ip never decides
		req := httptest.NewRequest("POST", service.ForwardAuthPath, nil)
		req.RemoteAddr = "10.0.0.2:1"
		req.Header.Set("X-Forwarded-For", "203.0.113."+strconv.Itoa(client))
		req.Header.Set("X-Original-URI", "/login")
		req.Header.Set("X-Original-Method", "POST")
		for k, vs := range extra {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		rec := httptest.NewRecorder()
		h.svc.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	if code := hit(nil); code != http.StatusOK {
		t.Fatalf("first POST /login: %d, want 200", code)
	}
	if code := hit(nil); code != http.StatusTooManyRequests {
		t.Fatalf("second POST /login: %d, want 429", code)
	}
	for _, extra := range []http.Header{
		{"X-Forwarded-Uri": {"/elsewhere"}},
		{"X-Forwarded-Method": {"GET"}},
		{"X-Forwarded-Uri": {"/elsewhere"}, "X-Forwarded-Method": {"GET"}},
		{"X-Original-Uri": {"/elsewhere"}}, // a second line, after the proxy's
		{"X-Original-Method": {"GET"}},     // likewise
		{"X-Forwarded-Host": {"a.example", "b.example"}},
	} {
		if code := hit(extra); code == http.StatusOK {
			t.Errorf("POST /login with %v: 200, a bypass of the login limit (want 400 or 429)", extra)
		} else if code != http.StatusBadRequest && code != http.StatusTooManyRequests {
			t.Errorf("POST /login with %v: %d, want 400 or 429", extra, code)
		}
	}
	// The same value sent under both names, as a proxy that sets both
	// does, is one request; so is the method in another case.
	for _, extra := range []http.Header{
		{"X-Forwarded-Uri": {"/login"}},
		{"X-Forwarded-Method": {"post"}},
	} {
		if code := hit(extra); code != http.StatusTooManyRequests {
			t.Errorf("POST /login with the agreeing %v: %d, want 429", extra, code)
		}
	}
}

// A forward_auth section that builds more descriptors, or longer ones, than
// the Service accepts in a request (Config.MaxDescriptors, MaxEntries) is
// refused when the handler is built, at start-up or on reload, instead of
// being loaded and then answering every /auth request 400: before, the
// handler was built and every request failed.
func TestForwardAuthOverTheRequestCapsIsRefused(t *testing.T) {
	h := start(t, t0, service.Config{Rules: edgeRules(), MaxDescriptors: 2, MaxEntries: 2})
	lit := func(n int) config.AuthDescriptor {
		var d config.AuthDescriptor
		for i := range n {
			d.Entries = append(d.Entries, config.AuthEntry{Key: "k" + strconv.Itoa(i), From: config.FromLiteral, Value: "v"})
		}
		return d
	}
	for _, tt := range []struct {
		name  string
		descs []config.AuthDescriptor
		msg   string
	}{
		{"descriptors", []config.AuthDescriptor{lit(1), lit(1), lit(1)}, "3 descriptors"},
		{"entries", []config.AuthDescriptor{lit(3)}, "3 entries"},
	} {
		fa := &config.ForwardAuth{Domain: "edge", Descriptors: tt.descs}
		if _, err := h.svc.ForwardAuthHandler(fa, nil); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: %v, want an error mentioning %q", tt.name, err, tt.msg)
		}
	}
	if _, err := h.svc.ForwardAuthHandler(&config.ForwardAuth{Domain: "edge", Descriptors: []config.AuthDescriptor{lit(2), lit(2)}}, nil); err != nil {
		t.Errorf("at the caps: %v", err)
	}
}
