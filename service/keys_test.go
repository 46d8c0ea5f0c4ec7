package service_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/service"
)

// CountedKeys names the keys a descriptor spends, as a decision spends
// them (the prefix, every limit of a rate_limits
// list): after one request, each key it gives peeks with one unit spent
// under the limit it gives. A descriptor no rule counts (none matches,
// unlimited, a block rule) is ErrNoRule, not a fresh key.
func TestCountedKeysAreTheKeysADecisionSpends(t *testing.T) {
	rules := configtest.Parse(t, `
domain: web
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: plan
    rate_limits:
      - {name: burst, unit: second, requests_per_unit: 2}
      - {unit: day, requests_per_unit: 30}
  - key: path
    value: /free
    rate_limit: {unlimited: true}
  - key: path
    value: /blocked
    rate_limit: {unit: minute, requests_per_unit: 0}
`)
	h := start(t, t0, service.Config{Rules: rules, Prefix: "p:"})
	for _, c := range []struct {
		entries []config.Entry
		want    string // rule=key under limit, for each key
	}{
		{[]config.Entry{{Key: "user", Value: "alice"}}, "[web.user=p:web_user_alice 4/5]"},
		{[]config.Entry{{Key: "plan", Value: "pro"}}, "[burst=p:web_plan_pro 1/2 web.plan#86400s=p:web_plan_pro#86400s 29/30]"},
	} {
		decideOne(t, h, request("web", 1, desc(c.entries[0].Key, c.entries[0].Value)))
		keys, err := h.svc.CountedKeys(context.Background(), "web", c.entries)
		if err != nil {
			t.Fatalf("CountedKeys(%v): %v", c.entries, err)
		}
		var got []string
		for _, k := range keys {
			res, err := h.store.Limiter.(sluice.Peeker).Peek(context.Background(), k.Key, k.Limit)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s=%s %d/%d", k.Rule, k.Key, res.Remaining, k.Limit.Capacity()))
		}
		if fmt.Sprint(got) != c.want {
			t.Errorf("CountedKeys(%v) after one request: %v, want %s", c.entries, got, c.want)
		}
	}
	for _, es := range [][]config.Entry{
		{{Key: "nobody", Value: "x"}},
		{{Key: "path", Value: "/free"}},
		{{Key: "path", Value: "/blocked"}},
	} {
		if keys, err := h.svc.CountedKeys(context.Background(), "web", es); !errors.Is(err, service.ErrNoRule) {
			t.Errorf("CountedKeys(%v): %v %v, want ErrNoRule", es, keys, err)
		}
	}
	if _, err := h.svc.CountedKeys(context.Background(), "other", []config.Entry{{Key: "user", Value: "alice"}}); !errors.Is(err, service.ErrNoRule) {
		t.Errorf("CountedKeys of an unknown domain: %v, want ErrNoRule", err)
	}
	if _, err := h.svc.CountedKeys(context.Background(), "web", []config.Entry{{Key: "", Value: "x"}}); !errors.Is(err, service.ErrInvalidRequest) {
		t.Errorf("CountedKeys of an empty entry key: %v, want ErrInvalidRequest", err)
	}
}

// A tenant on a plan is counted against its plan's limit: CountedKeys
// gives that limit, so a reset gives back what the tenant spent under it
// (not at most the rule's capacity).
func TestCountedKeysGiveTheTenantsLimit(t *testing.T) {
	rules := configtest.Parse(t, `
domain: api
descriptors:
  - key: tenant
    rate_limit: {unit: day, requests_per_unit: 10}
`)
	pro := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 500, Period: 24 * time.Hour, Burst: 500}
	h := start(t, t0, service.Config{Rules: rules, TenantLimit: func(_ context.Context, _ string, es []config.Entry) (sluice.Limit, bool) {
		return pro, es[0].Value == "acme"
	}})
	for _, c := range []struct {
		tenant string
		want   int
	}{{"acme", 500}, {"other", 10}} {
		keys, err := h.svc.CountedKeys(context.Background(), "api", []config.Entry{{Key: "tenant", Value: c.tenant}})
		if err != nil || len(keys) != 1 || keys[0].Limit.Capacity() != c.want {
			t.Errorf("CountedKeys of tenant %s: %+v %v, want one key under %d a day", c.tenant, keys, err, c.want)
		}
	}
}
