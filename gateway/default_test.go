package gateway_test

import (
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

// A proxy file's sliding_window limit follows the rate limit config's one
// default: 16 sub-windows with 2 means each where the rate allows them,
// the two-window counter above it, and for a limit charged after the
// response (count_responses, penalty, cost_from_response_header on any
// route), which only the counter can carry.
func TestProxySlidingWindowFollowsTheConfigDefault(t *testing.T) {
	f, err := gateway.ParseFile("proxy.yaml", []byte(`
upstream: http://127.0.0.1:1
limits:
  - {name: user, key: "header:X-User", rate: 100r/m, algorithm: sliding_window}
  - {name: bulk, key: "header:X-User", rate: 20000r/m, algorithm: sliding_window}
  - {name: logins, key: "header:X-User", rate: 5r/m, algorithm: sliding_window, count_responses: [401]}
  - {name: boxed, key: "header:X-User", rate: 5r/m, algorithm: sliding_window, penalty: 1m}
  - {name: tokens, key: "header:X-User", rate: 1000r/m, algorithm: sliding_window}
routes:
  - {name: r, match: /, limits: [user, bulk, logins, boxed, tokens]}
  - {name: llm, match: /complete, limits: [{name: tokens, cost_from_response_header: X-Tokens}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"user": "sliding_window 100/1m0s buckets 16 moments 2",
		"bulk": "sliding_window 20000/1m0s",
		// Charged after the response (ChargeN serves the counter only):
		// the counter, on every route, one layout for its keys.
		"logins": "sliding_window 5/1m0s",
		"boxed":  "sliding_window 5/1m0s",
		"tokens": "sliding_window 1000/1m0s",
	}
	seen := map[string]bool{}
	for _, rt := range f.Config.Routes {
		for _, p := range rt.Policies {
			if got := p.Limit.String(); got != want[p.Name] {
				t.Errorf("route %s, limit %s: %s, want %s", rt.Name, p.Name, got, want[p.Name])
			}
			seen[p.Name] = true
		}
	}
	if len(seen) != len(want) {
		t.Errorf("limits found: %v, want %d", seen, len(want))
	}
}
