package service_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// The store key a one-descriptor call hands the store is written in its
// response's memory when it fits, and must still be a string like any
// other: a store that keeps it without copying (the recorder keeps every
// key) sees each kept key unchanged by the calls after it, and spelled as
// StoreKey (EnvoyStoreKey) spells it, for keys shorter than the room, of
// its length, longer, and escaped past it.
func TestStoreKeysKeptByAStoreStayAsSpelled(t *testing.T) {
	values := []string{
		"1",
		strings.Repeat("v", 33), // a key of 39 bytes, "api_a_" and the value
		strings.Repeat("w", 34), // 40
		strings.Repeat("x", 35), // 41
		strings.Repeat("_", 12), // 18 bytes before escaping, 42 after
		"p%q_r",
		"2",
	}
	for _, format := range []service.KeyFormat{service.KeySluice, service.KeyEnvoy} {
		t.Run(format.String(), func(t *testing.T) {
			rules := (&fakeRules{domain: "api"}).add(fixed("api.a", 1<<30, config.Second), "a", "")
			h := start(t, t0, service.Config{Rules: rules, KeyFormat: format})
			var want []string
			for round := range 3 {
				for _, v := range values {
					if _, err := h.svc.ShouldRateLimit(context.Background(), request("api", 0, desc("a", v))); err != nil {
						t.Fatalf("round %d, value %q: %v", round, v, err)
					}
					es := []config.Entry{{Key: "a", Value: v}}
					if format == service.KeyEnvoy {
						want = append(want, service.EnvoyStoreKey("", "api", es))
					} else {
						want = append(want, service.StoreKey("", "api", es))
					}
				}
			}
			got := h.store.keys
			if len(got) != len(want) {
				t.Fatalf("the store was asked %d times, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("kept key %d is %q after the later calls, want %q", i, got[i], want[i])
				}
			}
		})
	}
}
