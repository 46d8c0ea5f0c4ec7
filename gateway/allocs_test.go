//go:build !race

package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// forwardAllocs is the most allocations one admitted request may take
// through the gateway's handler in TestForwardAllocationsDoNotGrow,
// request, recorder and canned response included.
const forwardAllocs = 50

// TestForwardAllocationsDoNotGrow guards the proxy's forward path: one
// request through the handler, routed, admitted by one rate limit (with
// its RateLimit headers) and forwarded by the ReverseProxy to an upstream
// answered in process (canned), so the count is the gateway's own and
// does not depend on the network. An allocation added on the path fails
// it: lower forwardAllocs when you remove one, and say why in the commit
// before raising it (docs/adr/0001-proxy-engine.md has the figures). It is
// not built under -race, whose sync.Pool drops items at random.
func TestForwardAllocationsDoNotGrow(t *testing.T) {
	g := gatewayOf(t, `
limits: [{name: l, key: ip, rate: 1000000000r/s, burst: 1000000, nodelay: true}]
routes: [{name: api, match: /api/, limits: [l]}]
`, "http://upstream.invalid", canned{}, nil)
	n := testing.AllocsPerRun(500, func() {
		if w := served(g, "GET", "/api/users/42"); w.Code != 200 {
			t.Fatalf("status %d", w.Code)
		}
	})
	t.Logf("%.0f allocations per request", n)
	if n > forwardAllocs {
		t.Errorf("%.0f allocations per forwarded request, more than the %d allowed", n, forwardAllocs)
	}
}

// refusalAllocs is the most allocations one refused request may take
// through the gateway's handler in TestRefusalAllocationsDoNotGrow,
// request and writer reused, the access log off (8 when set, 15 before:
// routing 5, the key 2 (the client's address as a string, the policy's
// store key), the writer's deadline 1; the decision and the response's
// headers and body none, made once per route or per policy and wait).
// The access log on adds refusalLogAllocs.
const (
	refusalAllocs    = 8
	refusalLogAllocs = 2
)

// TestRefusalAllocationsDoNotGrow guards the proxy's refusal path, the
// access log off and on: a 429 forwards nothing, and its problem body,
// Content-Length, RateLimit, RateLimit-Policy, Retry-After and reason
// values are made once, not per request. Lower refusalAllocs when you
// remove one.
func TestRefusalAllocationsDoNotGrow(t *testing.T) {
	for _, log := range []bool{false, true} {
		budget := refusalAllocs
		if log {
			budget += refusalLogAllocs
		}
		g := refusingGateway(t, log)
		r := httptest.NewRequest("GET", "/api/users/42", nil)
		w := &discardWriter{h: http.Header{}}
		g.ServeHTTP(w, r) // the one admitted
		n := testing.AllocsPerRun(500, func() {
			clear(w.h)
			if g.ServeHTTP(w, r); w.code != http.StatusTooManyRequests {
				t.Fatalf("status %d", w.code)
			}
		})
		t.Logf("access log %v: %.0f allocations per refusal", log, n)
		if n > float64(budget) {
			t.Errorf("access log %v: %.0f allocations per refused request, more than the %d allowed", log, n, budget)
		}
	}
}
