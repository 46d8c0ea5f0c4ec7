package daemon

import (
	"testing"

	"github.com/sluicehq/sluice/admin/page"
)

// The live page names a store's breaker the same way for serve and proxy:
// none without a failure policy, open when the store is unavailable
// (whatever its partitions say), partial with the open partitions, else
// closed.
func TestStoreStateNamesTheBreaker(t *testing.T) {
	for _, tt := range []struct {
		name string
		b    *Breaker
		want page.StoreState
	}{
		{"no policy", nil, page.StoreState{Name: "redis", Connected: true, Breaker: "none"}},
		{"closed", &Breaker{Mode: "open", Available: true}, page.StoreState{Name: "redis", Connected: true, Breaker: "closed", FailureMode: "open"}},
		{"open", &Breaker{Mode: "closed", OpenPartitions: 3}, page.StoreState{Name: "redis", Connected: true, Breaker: "open", FailureMode: "closed"}},
		{"partial", &Breaker{Mode: "local", Available: true, OpenPartitions: 2}, page.StoreState{Name: "redis", Connected: true, Breaker: "partial", FailureMode: "local", OpenPartitions: 2}},
	} {
		if got := StoreState("redis", true, tt.b); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// Before a config is recorded the page names where it will come from; once
// one is, the page shows it, whatever source it is asked with.
func TestPageConfigShowsTheConfigRecordedLast(t *testing.T) {
	var c PageConfig
	if got := c.Running("-upstream http://app"); got.Source != "-upstream http://app" || !got.Loaded.IsZero() || got.Rules != nil {
		t.Errorf("before a load: %+v", got)
	}
	c.Loaded(nil, "proxy.yaml")
	c.Loaded(nil, "proxy2.yaml")
	if got := c.Running("-upstream http://app"); got.Source != "proxy2.yaml" || got.Loaded.IsZero() {
		t.Errorf("after two loads: %+v, want proxy2.yaml's", got)
	}
}
