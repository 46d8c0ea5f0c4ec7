package service_test

import (
	"context"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/plans"
	"github.com/sluicehq/sluice/service"
)

// A key decided by turns with and without Envoy's per-request override of
// the same limit stays in the rule's layout (the config's default, moments)
// and keeps admitting a client at the limit, 10 a minute, one request every
// 6 s: an override decided under the two-window counter would move the key
// between layouts at every request, each seeding the other with what it
// counted, and refuse nearly all of them.
func TestOverrideKeepsTheRulesLayoutForAKeyAtTheLimit(t *testing.T) {
	rules := configtest.Parse(t, `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window}
`)
	h := start(t, t0, service.Config{Rules: rules})
	admitted := admittedEvery6s(t, h, func(i int) *rlpb.RateLimitDescriptor {
		d := desc("a", "1")
		if i%2 == 1 {
			d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 10, Unit: typepb.RateLimitUnit_MINUTE}
		}
		return d
	})
	// One layout alone admits about 9 in 10 at this pace (moments'
	// estimate rounds; the pace sits at the rate).
	if admitted < layoutSteps*8/10 {
		t.Errorf("admitted %d of %d requests at the limit, alternating with an override; want at least %d", admitted, layoutSteps, layoutSteps*8/10)
	}
	t.Logf("admitted %d of %d", admitted, layoutSteps)
}

// layoutSteps is how many requests admittedEvery6s sends.
const layoutSteps = 200

// admittedEvery6s sends layoutSteps requests of domain "d", one every 6 s
// of h's clock, the i-th of the descriptor d(i), and returns how many
// were admitted.
func admittedEvery6s(t *testing.T, h *harness, d func(i int) *rlpb.RateLimitDescriptor) int {
	t.Helper()
	return admittedEvery(t, h, 6*time.Second, layoutSteps, d)
}

// admittedEvery is admittedEvery6s for n requests a step apart.
func admittedEvery(t *testing.T, h *harness, step time.Duration, n int, d func(i int) *rlpb.RateLimitDescriptor) int {
	t.Helper()
	admitted := 0
	for i := range n {
		h.clock.Advance(step)
		if decideOne(t, h, request("d", 1, d(i))).GetOverallCode() == pb.RateLimitResponse_OK {
			admitted++
		}
	}
	return admitted
}

// A key decided by turns under its tenant's plan and under the file's rule,
// the same 10 a minute on a sliding window, stays in one layout: a plan's
// limit, which has no buckets or moments, gets the config's default as the
// rule does, and a client at the limit keeps being admitted.
func TestPlanKeepsTheRulesLayoutForAKeyAtTheLimit(t *testing.T) {
	rules := configtest.Parse(t, `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window}
`)
	plan, err := plans.ParseLimit([]byte(`{"algorithm": "sliding_window", "rate": 10, "period": "1m"}`))
	if err != nil {
		t.Fatal(err)
	}
	var withPlan bool
	h := start(t, t0, service.Config{Rules: rules, TenantLimit: func(context.Context, string, []config.Entry) (sluice.Limit, bool) {
		return plan, withPlan
	}})
	admitted := admittedEvery6s(t, h, func(i int) *rlpb.RateLimitDescriptor {
		withPlan = i%2 == 1
		return desc("a", "1")
	})
	if admitted < layoutSteps*8/10 {
		t.Errorf("admitted %d of %d requests at the limit, alternating with a plan; want at least %d", admitted, layoutSteps, layoutSteps*8/10)
	}
	t.Logf("admitted %d of %d", admitted, layoutSteps)
}

// A plan on a rule that sets its layout (buckets: 1, the two-window
// counter; buckets: 8 with moments: 4) is decided in the rule's layout, so
// a key decided by turns under its tenant's plan and under the rule stays
// in one layout: a client at the limit, 10 a minute, one request every
// 6 s, keeps being admitted, and one at twice the limit, a request every
// 3 s, is admitted no more than the limit.
func TestPlanKeepsAnExplicitLayoutOfTheRule(t *testing.T) {
	plan, err := plans.ParseLimit([]byte(`{"algorithm": "sliding_window", "rate": 10, "period": "1m"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, layout := range []string{"buckets: 1", "buckets: 8, moments: 4"} {
		rules := configtest.Parse(t, `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window, `+layout+`}
`)
		for _, pace := range []struct {
			step time.Duration
			n    int
		}{{6 * time.Second, layoutSteps}, {3 * time.Second, 2 * layoutSteps}} {
			var withPlan bool
			h := start(t, t0, service.Config{Rules: rules, TenantLimit: func(context.Context, string, []config.Entry) (sluice.Limit, bool) {
				return plan, withPlan
			}})
			admitted := admittedEvery(t, h, pace.step, pace.n, func(i int) *rlpb.RateLimitDescriptor {
				withPlan = i%2 == 1
				return desc("a", "1")
			})
			// 10 a minute for n requests a step apart: at most the limit
			// in each of the minutes they span and one more, and at the
			// limit's pace about 9 in 10 (one layout alone, as above).
			minutes := int(time.Duration(pace.n) * pace.step / time.Minute)
			if most := 10 * (minutes + 1); admitted > most {
				t.Errorf("%s, a request every %v: admitted %d of %d, over the limit's %d", layout, pace.step, admitted, pace.n, most)
			}
			if least := 10 * minutes * 8 / 10; admitted < least {
				t.Errorf("%s, a request every %v: admitted %d of %d alternating with a plan; want at least %d", layout, pace.step, admitted, pace.n, least)
			}
			t.Logf("%s, a request every %v: admitted %d of %d", layout, pace.step, admitted, pace.n)
		}
	}
}
