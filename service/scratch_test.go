package service

import (
	"reflect"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/sluicehq/sluice/config"
)

// A released scratch holds nothing of the request it served, whatever its
// shape (one descriptor of one entry is cleared by its own path): pooled,
// it would otherwise keep the request's descriptors, strings and rules
// alive until reused.
func TestReleasedScratchRetainsNoRequest(t *testing.T) {
	for _, c := range []struct {
		name           string
		descs, entries int
	}{
		{"one descriptor of one entry", 1, 1},
		{"one descriptor of two entries", 1, 2},
		{"three descriptors", 3, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := new(scratch)
			plans, outs, entries := sc.take(c.descs, c.entries)
			d := &rlpb.RateLimitDescriptor{}
			rule := &config.RateLimit{FullKey: "k"}
			for i := range plans {
				plans[i] = plan{rule: rule, keyDesc: d, key: "key", entries: entries, cost: 1}
				outs[i] = outcome{p: &plans[i], remain: 1}
			}
			for i := range entries {
				entries[i] = config.Entry{Key: "k", Value: "v"}
			}
			sc.release()
			if len(sc.plans) != 0 || len(sc.outs) != 0 || len(sc.entries) != 0 {
				t.Fatalf("lengths %d, %d, %d after release, want 0", len(sc.plans), len(sc.outs), len(sc.entries))
			}
			for i, p := range sc.plans[:c.descs] {
				if !reflect.ValueOf(p).IsZero() {
					t.Errorf("plan %d is %+v after release, want zero", i, p)
				}
			}
			for i, o := range sc.outs[:c.descs] {
				if o != (outcome{}) {
					t.Errorf("outcome %d is %+v after release, want zero", i, o)
				}
			}
			for i, e := range sc.entries[:c.entries] {
				if e != (config.Entry{}) {
					t.Errorf("entry %d is %+v after release, want zero", i, e)
				}
			}
		})
	}
}
