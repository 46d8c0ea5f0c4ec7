package service_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/service"
)

// decisions is an Observer that keeps what it is given.
type decisions struct {
	mu  sync.Mutex
	got []service.Decision
}

func (d *decisions) Observe(x service.Decision) {
	d.mu.Lock()
	d.got = append(d.got, x)
	d.mu.Unlock()
}

// The observer sees each spending descriptor with its rule and outcome,
// and the store key of a refusal only; unmatched, unlimited and
// check-only descriptors are not observed.
func TestObserverSeesRuleOutcomeAndTheKeyOfRefusals(t *testing.T) {
	rules := configtest.Parse(t, `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: s
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: u
    rate_limit: {unlimited: true}
`)
	obs := &decisions{}
	h := start(t, 1_000_000, service.Config{Rules: rules, Observer: obs})
	req := request("d", 0, desc("a", "1"), desc("s", "2"), desc("u", "3"), desc("none", "4"))
	decideOne(t, h, req)
	decideOne(t, h, req)
	decideOne(t, h, request("d", 0, withHits(desc("a", "1"), 0)))
	want := []struct {
		rule    string
		outcome service.Outcome
		keyHas  string
	}{
		{"d.a", service.Allowed, ""}, {"d.s", service.Allowed, ""},
		{"d.a", service.Limited, "1"}, {"d.s", service.Shadow, "2"},
	}
	if len(obs.got) != len(want) {
		t.Fatalf("observed %+v, want %d decisions", obs.got, len(want))
	}
	for i, w := range want {
		g := obs.got[i]
		if g.Rule != w.rule || g.Outcome != w.outcome || g.Domain != "d" || g.Cost != 1 {
			t.Errorf("decision %d: %+v, want rule %s %v", i, g, w.rule, w.outcome)
		}
		if (w.keyHas == "") != (g.Key == "") || !strings.Contains(g.Key, w.keyHas) {
			t.Errorf("decision %d: key %q, want one holding %q only for a refusal", i, g.Key, w.keyHas)
		}
	}
}
