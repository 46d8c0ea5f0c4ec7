package service_test

import (
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// A descriptor value is the client's (a header through /auth or Envoy):
// it must not be able to spell another descriptor's store key and spend
// its allowance. Before, tenant "victim_path_/login" at depth one was the
// key of tenant "victim" with path "/login" at depth two, so that three
// requests of the attacker (within its own 100 per minute) made the
// victim's first POST /login (2 per minute) a 429 through sluice serve's
// /auth. Values with "_" or "%" are escaped; other keys are as before.
func TestStoreKeyValuesCannotSpellAnotherKey(t *testing.T) {
	for _, tt := range []struct{ a, b []config.Entry }{
		{
			[]config.Entry{{Key: "tenant", Value: "victim_path_/login"}},
			[]config.Entry{{Key: "tenant", Value: "victim"}, {Key: "path", Value: "/login"}},
		},
		{
			[]config.Entry{{Key: "tenant", Value: "a_"}, {Key: "b", Value: ""}},
			[]config.Entry{{Key: "tenant", Value: "a"}, {Key: "", Value: "b_"}},
		},
		{
			[]config.Entry{{Key: "k", Value: "a%5Fb"}},
			[]config.Entry{{Key: "k", Value: "a_b"}},
		},
	} {
		if ka, kb := service.StoreKey("", "edge", tt.a), service.StoreKey("", "edge", tt.b); ka == kb {
			t.Errorf("%v and %v share the store key %q", tt.a, tt.b, ka)
		}
	}
	// Values without "_" or "%" keep envoyproxy/ratelimit's spelling.
	if got, want := service.StoreKey("", "edge", []config.Entry{{Key: "remote_address", Value: "203.0.113.7"}}), "edge_remote_address_203.0.113.7"; got != want {
		t.Errorf("StoreKey = %q, want %q", got, want)
	}
}
