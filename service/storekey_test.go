package service_test

import (
	"runtime"
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

// A store key is built in one allocation of its own length, a byte
// reserved for the trailing "_" only where the Envoy spelling writes one:
// a descriptor builds a key on every request, and one byte too many puts a
// key whose length is a size class into the next. Each spelling here is 24
// bytes (envoyproxy/ratelimit's example key), a size class of its own.
func TestStoreKeyAllocatesOnlyItsLength(t *testing.T) {
	es := []config.Entry{{Key: "database", Value: "users"}}
	for name, key := range map[string]func() string{
		"StoreKey":      func() string { return service.StoreKey("", "mongo_cps", es) },     // mongo_cps_database_users
		"EnvoyStoreKey": func() string { return service.EnvoyStoreKey("", "mongo_cp", es) }, // mongo_cp_database_users_
	} {
		if k := key(); len(k) != 24 {
			t.Fatalf("%s = %q, %d bytes; the test wants 24", name, k, len(k))
		}
		keys := make([]string, 10000)
		fill := func() {
			for i := range keys {
				keys[i] = key()
			}
		}
		fill() // a first round, so that what the first calls allocate once is not counted
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		fill()
		runtime.ReadMemStats(&after)
		// Halfway to the next size class (32): room for a stray
		// allocation of another goroutine during the loop.
		if per := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(keys)); per >= 28 {
			t.Errorf("%s: %.1f bytes allocated per key of 24 bytes, want 24", name, per)
		}
	}
}
