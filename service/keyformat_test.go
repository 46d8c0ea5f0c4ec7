package service_test

import (
	"slices"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// Under KeyEnvoy the store keys are envoyproxy/ratelimit's cache keys up
// to their window start (the trailing "_" included): values as the client sent them, "_" and
// "%" included, so that a store writing envoyproxy/ratelimit's layout
// (redisstore's envoy key format) counts in the keys envoyproxy/ratelimit
// counts in. Decisions and check-only peeks use the same key.
func TestKeyEnvoySpellsValuesRaw(t *testing.T) {
	rules := (&fakeRules{domain: "edge"}).add(fixed("edge.tenant", 5, config.Minute), "tenant", "")
	forEachFace(t, 1_700_000_000, service.Config{Rules: rules, Prefix: "rl_", KeyFormat: service.KeyEnvoy}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		call(request("edge", 1, desc("tenant", "a_b%c")))
		call(request("edge", 0, withHits(desc("tenant", "a_b%c"), 0)))
		want := []string{"rl_edge_tenant_a_b%c_"}
		if got := h.store.calls(); !slices.Equal(got, want) {
			t.Errorf("AllowN keys = %q, want %q", got, want)
		}
		if got := h.store.peeked(); !slices.Equal(got, want) {
			t.Errorf("Peek keys = %q, want %q", got, want)
		}
	})
}

// EnvoyStoreKey is StoreKey without the escaping, and a key longer than
// sluice.MaxKeyLen is still shortened, as every store refuses longer keys.
func TestEnvoyStoreKey(t *testing.T) {
	es := []config.Entry{{Key: "database", Value: "users_1"}, {Key: "empty", Value: ""}}
	if got, want := service.EnvoyStoreKey("p", "mongo_cps", es), "pmongo_cps_database_users_1_empty__"; got != want {
		t.Errorf("EnvoyStoreKey = %q, want %q", got, want)
	}
	long := []config.Entry{{Key: "k", Value: string(make([]byte, 5000))}}
	if got := service.EnvoyStoreKey("", "d", long); len(got) != 4096 {
		t.Errorf("a long key is %d bytes, want 4096", len(got))
	}
}
