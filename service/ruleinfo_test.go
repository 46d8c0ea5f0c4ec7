package service

import (
	"sync"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// TestRuleInfoIsDerivedOncePerRule checks the rules' cache that decisions
// read without a lock: from many goroutines, each rule gets one ruleInfo,
// the same on every call, whether it is still in the locked map or
// already published in the read-only one.
func TestRuleInfoIsDerivedOncePerRule(t *testing.T) {
	s := &Service{}
	b := &rulesBox{}
	rules := make([]*config.RateLimit, 100)
	for i := range rules {
		rules[i] = &config.RateLimit{FullKey: "r" + string(rune('a'+i%26))}
	}
	got := make([][]*ruleInfo, 8)
	var wg sync.WaitGroup
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 3 {
				for i, r := range rules {
					in := s.info(b, r)
					if round == 0 {
						got[g] = append(got[g], in)
					} else if in != got[g][i] {
						t.Errorf("goroutine %d, rule %d: a second ruleInfo on round %d", g, i, round)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for g := range got {
		for i := range rules {
			if got[g][i] == nil || got[g][i] != got[0][i] {
				t.Fatalf("rule %d: goroutine %d got ruleInfo %p, goroutine 0 %p", i, g, got[g][i], got[0][i])
			}
		}
	}
	if m := b.read.Load(); m == nil || len(*m) != len(rules) {
		t.Errorf("after 3 rounds the read map holds %v rules, want all %d", m, len(rules))
	}
}

// TestRuleInfoCacheStopsAtItsBound checks that a Rules returning a new
// rule on every lookup does not grow the cache past maxRuleInfos: past
// it, a new rule is served uncached (nil), a cached one still is.
func TestRuleInfoCacheStopsAtItsBound(t *testing.T) {
	s := &Service{}
	b := &rulesBox{}
	first := &config.RateLimit{FullKey: "first"}
	in := s.info(b, first)
	for range maxRuleInfos - 1 {
		if s.info(b, &config.RateLimit{}) == nil {
			t.Fatal("a rule under the bound was not cached")
		}
	}
	if got := s.info(b, &config.RateLimit{}); got != nil {
		t.Errorf("rule %d: cached, want nil past maxRuleInfos", maxRuleInfos+1)
	}
	if got := s.info(b, first); got != in {
		t.Errorf("the first rule's ruleInfo changed past the bound")
	}
}
