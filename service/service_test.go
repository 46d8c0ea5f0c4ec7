package service_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rlheader"
	"github.com/sluicehq/sluice/service"
)

const t0 = 1700000000

// mongo is envoyproxy/ratelimit's example rule: domain mongo_cps,
// database=users, rpu per unit.
func mongo(rpu uint32, unit config.Unit) *fakeRules {
	return (&fakeRules{domain: "mongo_cps"}).add(fixed("mongo_cps.database_users", rpu, unit), "database", "users")
}

func TestMalformedRequestsRefusedOnEveryFace(t *testing.T) {
	refusesMalformed(t, start(t, t0, service.Config{Rules: mongo(500, config.Second)}))
}

// refusesMalformed sends h malformed requests through every face: each is
// refused as invalid, saying why, and the store is never called. h's rules
// are mongo's.
func refusesMalformed(t *testing.T, h *harness) {
	t.Helper()
	cases := []struct {
		name string
		req  *pb.RateLimitRequest
		msg  string
	}{
		{"empty domain", request("", 0, desc("database", "users")), "empty domain"},
		{"no descriptors", request("mongo_cps", 0), "no descriptors"},
		{"descriptor without entries", request("mongo_cps", 0, desc()), "descriptor 0 has no entries"},
		{"empty key", request("mongo_cps", 0, desc("database", "users"), desc("", "x")), "descriptor 1 entry 0 has an empty key"},
		{"override without unit", request("mongo_cps", 0, &rlpb.RateLimitDescriptor{
			Entries: desc("a", "b").Entries,
			Limit:   &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5},
		}), "limit override has unit UNKNOWN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := h.svc.ShouldRateLimit(context.Background(), c.req)
			if !errors.Is(err, service.ErrInvalidRequest) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("direct: err = %v, want ErrInvalidRequest with %q", err, c.msg)
			}
			_, err = h.grpc.ShouldRateLimit(context.Background(), c.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.msg) {
				t.Errorf("grpc: err = %v, want InvalidArgument with %q", err, c.msg)
			}
			resp, body := h.postJSON(c.req)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), c.msg) {
				t.Errorf("http: %d %q, want 400 with %q", resp.StatusCode, body, c.msg)
			}
		})
	}
	if got := h.store.calls(); len(got) != 0 {
		t.Errorf("store called for bad requests: %q", got)
	}
}

func TestPerSecondRuleFirstHitStatus(t *testing.T) {
	forEachFace(t, t0, service.Config{Rules: mongo(500, config.Second)}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		resp := call(request("mongo_cps", 0, desc("database", "users")))
		if resp.GetOverallCode() != pb.RateLimitResponse_OK {
			t.Errorf("overall_code = %v, want OK", resp.GetOverallCode())
		}
		const want = `OK remaining=499 limit={500 SECOND ""} reset=1s`
		if got := statusString(resp.GetStatuses()[0]); got != want {
			t.Errorf("status = %s, want %s", got, want)
		}
		if got := h.store.calls(); len(got) != 1 || got[0] != "mongo_cps_database_users" {
			t.Errorf("store keys = %q, want [mongo_cps_database_users]", got)
		}
	})
}

func TestPerMinuteRuleResetsAtMinuteBoundary(t *testing.T) {
	forEachFace(t, t0+30, service.Config{Rules: mongo(10, config.Minute)}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		resp := call(request("mongo_cps", 0, desc("database", "users")))
		const want = `OK remaining=9 limit={10 MINUTE ""} reset=10s`
		if got := statusString(resp.GetStatuses()[0]); got != want {
			t.Errorf("status = %s, want %s", got, want)
		}
	})
}

func TestHitOverLimitIsOverLimitWithTimeToReset(t *testing.T) {
	forEachFace(t, t0, service.Config{Rules: mongo(5, config.Second)}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		req := request("mongo_cps", 0, desc("database", "users"))
		for i := 1; i <= 5; i++ {
			if resp := call(req); resp.GetOverallCode() != pb.RateLimitResponse_OK {
				t.Fatalf("hit %d: %v, want OK", i, resp.GetOverallCode())
			}
		}
		h.clock.Advance(250 * time.Millisecond)
		resp := call(req)
		if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("6th hit: overall_code = %v, want OVER_LIMIT", resp.GetOverallCode())
		}
		// 750 ms left, reported in whole seconds as envoyproxy/ratelimit
		// reports it: Envoy writes X-RateLimit-Reset from the seconds
		// alone, so 750ms would reach the client as 0.
		const want = `OVER_LIMIT remaining=0 limit={5 SECOND ""} reset=1s`
		if got := statusString(resp.GetStatuses()[0]); got != want {
			t.Errorf("6th hit: status = %s, want %s", got, want)
		}
	})
}

func TestShadowModeRuleAllowsAndCounts(t *testing.T) {
	rules := mongo(5, config.Second)
	rules.rules[0].rl.ShadowMode = true
	forEachFace(t, t0, service.Config{Rules: rules, Headers: service.HeadersDraft11}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		req := request("mongo_cps", 0, desc("database", "users"))
		for i := 1; i <= 6; i++ {
			resp := call(req)
			if resp.GetOverallCode() != pb.RateLimitResponse_OK || resp.GetStatuses()[0].GetCode() != pb.RateLimitResponse_OK {
				t.Errorf("hit %d: %v, want OK", i, resp)
			}
			if len(resp.GetResponseHeadersToAdd()) != 0 {
				t.Errorf("hit %d: headers %v for a shadow rule", i, resp.GetResponseHeadersToAdd())
			}
		}
		wantCounters(t, h, "mongo_cps.database_users", map[string]float64{
			"sluice_rls_hits_total":         6,
			"sluice_rls_within_limit_total": 5,
			"sluice_rls_over_limit_total":   1,
			"sluice_rls_shadow_mode_total":  1,
		})
	})
}

func TestServiceWideShadowMode(t *testing.T) {
	h := start(t, t0, service.Config{Rules: mongo(1, config.Second), ShadowMode: true})
	req := request("mongo_cps", 0, desc("database", "users"))
	for i := 0; i < 3; i++ {
		resp, err := h.svc.ShouldRateLimit(context.Background(), req)
		if err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OK {
			t.Fatalf("hit %d: %v, %v; want OK", i+1, resp, err)
		}
	}
	// Counted as without it: over the limit, not a rule's shadow mode.
	wantCounters(t, h, "mongo_cps.database_users", map[string]float64{
		"sluice_rls_over_limit_total":  2,
		"sluice_rls_shadow_mode_total": 0,
	})
	if global := counterSum(t, h, "sluice_rls_global_shadow_mode_total"); global != 2 {
		t.Errorf("sluice_rls_global_shadow_mode_total = %v, want 2", global)
	}
}

// Config.ShadowMode is envoyproxy/ratelimit's SHADOW_MODE: the request is
// decided as without it (statuses OVER_LIMIT, over_limit counted, no
// metadata from an over descriptor, the headers of the descriptor closest
// to its limit), and only the overall code turns OK, counted in
// global_shadow_mode.
func TestGlobalShadowModeFlipsOnlyTheOverallCode(t *testing.T) {
	rules := configtest.Parse(t, `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {from: a}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {from: b}
`)
	h, sink, store := statsdHarness(t, service.Config{
		Rules: rules, ShadowMode: true, DynamicMetadata: true, Headers: service.HeadersLegacy,
	}, nil)
	req := request("d", 0, desc("a", "1"), desc("b", "2"))
	decideOne(t, h, req)
	resp := decideOne(t, h, req)
	if resp.GetOverallCode() != pb.RateLimitResponse_OK {
		t.Errorf("overall %v, want OK", resp.GetOverallCode())
	}
	if st := resp.GetStatuses()[0]; st.GetCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("a's status %s, want OVER_LIMIT", statusString(st))
	}
	md := resp.GetDynamicMetadata().GetFields()["metadata"].GetStructValue().AsMap()
	if md["from"] != "b" {
		t.Errorf("metadata %v, want b's only (a is over)", md)
	}
	if hm := headerMap(resp); hm["RateLimit-Remaining"] != "0" || hm["RateLimit-Limit"] != "1" {
		t.Errorf("headers %v, want a's (limit 1, remaining 0)", hm)
	}
	wantCounters(t, h, "d.a", map[string]float64{
		"sluice_rls_over_limit_total":  1,
		"sluice_rls_shadow_mode_total": 0,
	})
	store.Flush()
	for name, n := range map[string]uint64{
		"ratelimit.service.rate_limit.d.a.over_limit": 1,
		"ratelimit.service.global_shadow_mode":        1,
	} {
		if got := sink.Counter(name); got != n {
			t.Errorf("%s = %d, want %d", name, got, n)
		}
	}
	if _, ok := sink.LoadCounter("ratelimit.service.rate_limit.d.a.shadow_mode"); ok {
		t.Error("shadow_mode counted for a rule not in shadow mode")
	}
}

// wantCounters checks the per-rule counters of rule named in want.
func wantCounters(t *testing.T, h *harness, rule string, want map[string]float64) {
	t.Helper()
	for name, w := range want {
		if got := counter(t, h, name, rule); got != w {
			t.Errorf("%s = %v, want %v", name, got, w)
		}
	}
}

// counter reads a per-rule counter of h's registry (0 when the rule has no
// series).
func counter(t *testing.T, h *harness, name, rule string) float64 {
	t.Helper()
	return ruleCounters(t, h, name, func(r string) bool { return r == rule })[rule]
}

// ruleCounters returns the values of counter name by rule label, for the
// rules match accepts.
func ruleCounters(t *testing.T, h *harness, name string, match func(rule string) bool) map[string]float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "rule" && match(l.GetValue()) {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

func TestUnlimitedRuleSkipsStore(t *testing.T) {
	rules := (&fakeRules{domain: "internal"}).add(&config.RateLimit{FullKey: "internal.ldap", Unlimited: true}, "ldap", "")
	forEachStore(t, service.Config{Rules: rules}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		for i := 0; i < 3; i++ {
			resp := call(request("internal", 0, desc("ldap", "bob")))
			if got, want := statusString(resp.GetStatuses()[0]), "OK remaining=4294967295"; got != want {
				t.Errorf("status = %s, want %s", got, want)
			}
		}
		if got := h.store.calls(); len(got) != 0 {
			t.Errorf("store called for an unlimited rule: %q", got)
		}
	})
}

func TestHitsAddendCountsAndCheckOnlySpendsNothing(t *testing.T) {
	forEachFace(t, t0, service.Config{Rules: mongo(5, config.Second)}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		// hits_addend 0 at request level counts as 1.
		resp := call(request("mongo_cps", 0, desc("database", "users")))
		if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 4 {
			t.Errorf("request hits_addend 0: remaining %d, want 4", got)
		}
		// A descriptor hits_addend of 0 is a check: the key is peeked, its
		// remaining and reset reported, nothing spent.
		resp = call(request("mongo_cps", 7, withHits(desc("database", "users"), 0)))
		if got, want := statusString(resp.GetStatuses()[0]), `OK remaining=4 limit={5 SECOND ""} reset=1s`; got != want {
			t.Errorf("check only: status = %s, want %s", got, want)
		}
		if got := h.store.calls(); len(got) != 1 {
			t.Errorf("store AllowN calls = %q, want just the first", got)
		}
		if got := h.store.peeked(); len(got) != 1 || got[0] != "mongo_cps_database_users" {
			t.Errorf("store Peek calls = %q, want [mongo_cps_database_users]", got)
		}
		// Two more hits make 3; a request hits_addend of 3 makes 6 > 5.
		call(request("mongo_cps", 2, desc("database", "users")))
		resp = call(request("mongo_cps", 3, desc("database", "users")))
		if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("3 more after 3 on a limit of 5: %v, want OVER_LIMIT", resp.GetOverallCode())
		}
		// The descriptor's hits_addend wins over the request's.
		resp = call(request("mongo_cps", 3, withHits(desc("database", "users"), 2)))
		if got := statusString(resp.GetStatuses()[0]); got != `OK remaining=0 limit={5 SECOND ""} reset=1s` {
			t.Errorf("descriptor hits_addend 2 over request 3: %s", got)
		}
	})
}

func TestDescriptorDeeperThanRuleIsUnlimited(t *testing.T) {
	rules := (&fakeRules{domain: "d"}).add(fixed("d.key_value", 1, config.Second), "key", "value")
	forEachStore(t, service.Config{Rules: rules, Headers: service.HeadersDraft11}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		for i := 0; i < 3; i++ {
			resp := call(request("d", 0, desc("key", "value", "subkey", "subvalue")))
			if resp.GetOverallCode() != pb.RateLimitResponse_OK {
				t.Errorf("overall_code = %v, want OK", resp.GetOverallCode())
			}
			st := resp.GetStatuses()[0]
			if st.GetCurrentLimit() != nil || st.GetCode() != pb.RateLimitResponse_OK {
				t.Errorf("status = %s, want OK with current_limit unset", statusString(st))
			}
			if len(resp.GetResponseHeadersToAdd()) != 0 {
				t.Errorf("headers %v with no rule", resp.GetResponseHeadersToAdd())
			}
		}
		if got := h.store.calls(); len(got) != 0 {
			t.Errorf("store called with no rule: %q", got)
		}
	})
}

func TestOverallCodeIsWorstDescriptor(t *testing.T) {
	rules := (&fakeRules{domain: "d"}).
		add(fixed("d.a", 10, config.Second), "a", "").
		add(fixed("d.b", 1, config.Second), "b", "")
	forEachFace(t, t0, service.Config{Rules: rules}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		req := request("d", 0, desc("a", "1"), desc("b", "1"))
		call(req)
		resp := call(req)
		if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("overall_code = %v, want OVER_LIMIT", resp.GetOverallCode())
		}
		got := []string{}
		for _, st := range resp.GetStatuses() {
			got = append(got, statusString(st))
		}
		want := []string{
			`OK remaining=8 limit={10 SECOND ""} reset=1s`,
			`OVER_LIMIT remaining=0 limit={1 SECOND ""} reset=1s`,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("statuses:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

func TestLimitOverride(t *testing.T) {
	override := func(rpu uint32, unit typepb.RateLimitUnit, kv ...string) *rlpb.RateLimitDescriptor {
		d := desc(kv...)
		d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
		return d
	}
	rules := mongo(500, config.Second)
	rules.rules[0].rl.Name = "users"
	rules.rules[0].rl.ShadowMode = true // an override is never in shadow mode
	forEachFace(t, t0, service.Config{Rules: rules}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		// The override replaces the matched rule's limit, keeping its name.
		req := request("mongo_cps", 0, override(2, typepb.RateLimitUnit_MINUTE, "database", "users"))
		var got []string
		for i := 0; i < 3; i++ {
			got = append(got, statusString(call(req).GetStatuses()[0]))
		}
		want := []string{
			`OK remaining=1 limit={2 MINUTE "users"} reset=40s`,
			`OK remaining=0 limit={2 MINUTE "users"} reset=40s`,
			`OVER_LIMIT remaining=0 limit={2 MINUTE "users"} reset=40s`,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("with a rule:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// It applies without a rule too.
		resp := call(request("other", 0, override(1, typepb.RateLimitUnit_SECOND, "k", "v")))
		if got, want := statusString(resp.GetStatuses()[0]), `OK remaining=0 limit={1 SECOND ""} reset=1s`; got != want {
			t.Errorf("without a rule: %s, want %s", got, want)
		}
		resp = call(request("other", 0, override(0, typepb.RateLimitUnit_SECOND, "k", "v")))
		if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("override of 0: %v, want OVER_LIMIT", resp.GetOverallCode())
		}
		if got := counter(t, h, "sluice_rls_hits_total", "_override"); got != 2 {
			t.Errorf("override hits = %v, want 2 under the label _override", got)
		}
	})
}

// A descriptor's limit override applies only in a configured domain: as
// envoyproxy/ratelimit's GetLimit returns no limit for an unknown domain
// before it looks at the override, a request on another domain is OK
// however often it comes, and writes no key. In a configured domain the
// override applies, a rule matched or not.
func TestLimitOverrideOnAnUnknownDomainIsNotApplied(t *testing.T) {
	rules := configtest.Parse(t, `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 5}
`)
	h := start(t, t0, service.Config{Rules: rules})
	over := func(domain string) *pb.RateLimitRequest {
		d := desc("user", "bob")
		d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typepb.RateLimitUnit_MINUTE}
		return request(domain, 0, d)
	}
	for i := range 2 {
		resp := decideOne(t, h, over("unknown"))
		if resp.GetOverallCode() != pb.RateLimitResponse_OK || resp.GetStatuses()[0].GetCurrentLimit() != nil {
			t.Errorf("call %d on an unknown domain: %s, want OK without a limit", i+1, statusString(resp.GetStatuses()[0]))
		}
	}
	if calls := h.store.calls(); len(calls) != 0 {
		t.Errorf("store keys written for an unknown domain: %q", calls)
	}
	decideOne(t, h, over("d"))
	if resp := decideOne(t, h, over("d")); resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("second call with an override of 1/minute in a configured domain: %v, want OVER_LIMIT", resp.GetOverallCode())
	}
}

func TestBlockRule(t *testing.T) {
	forEachFace(t, t0, service.Config{Rules: mongo(0, config.Second)}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		for _, req := range []*pb.RateLimitRequest{
			request("mongo_cps", 0, desc("database", "users")),
			request("mongo_cps", 0, withHits(desc("database", "users"), 0)),
		} {
			resp := call(req)
			if got, want := statusString(resp.GetStatuses()[0]), `OVER_LIMIT remaining=0 limit={0 SECOND ""} reset=1s`; got != want {
				t.Errorf("status = %s, want %s", got, want)
			}
		}
		if got := h.store.calls(); len(got) != 0 {
			t.Errorf("store called for a block rule: %q", got)
		}
	})
}

// A cost above the rule's capacity (and within Config.MaxCost, here
// unbounded) is a denial, not an error.
func TestCostAboveCapacity(t *testing.T) {
	forEachFace(t, t0, service.Config{Rules: mongo(5, config.Second), MaxCost: math.MaxUint64}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		for _, req := range []*pb.RateLimitRequest{
			request("mongo_cps", 6, desc("database", "users")),
			request("mongo_cps", 0, withHits(desc("database", "users"), math.MaxUint64)),
		} {
			resp := call(req)
			if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
				t.Errorf("%v: %v, want OVER_LIMIT", req, resp.GetOverallCode())
			}
		}
		resp := call(request("mongo_cps", 5, desc("database", "users")))
		if got := statusString(resp.GetStatuses()[0]); got != `OK remaining=0 limit={5 SECOND ""} reset=1s` {
			t.Errorf("cost 5 after refusals: %s", got)
		}
	})
}

func TestReplaces(t *testing.T) {
	broad := fixed("d.user", 1, config.Second)
	broad.Name = "per-user"
	vip := fixed("d.tier_vip", 100, config.Second)
	vip.Replaces = []string{"per-user"}
	rules := (&fakeRules{domain: "d"}).add(broad, "user", "").add(vip, "tier", "vip")
	h := start(t, t0, service.Config{Rules: rules})
	for i := 0; i < 3; i++ {
		resp, err := h.svc.ShouldRateLimit(context.Background(), request("d", 0, desc("user", "bob"), desc("tier", "vip")))
		if err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OK {
			t.Fatalf("hit %d: %v, %v; want OK (per-user replaced)", i+1, resp, err)
		}
		if resp.GetStatuses()[0].GetCurrentLimit() != nil {
			t.Errorf("replaced rule still reported: %s", statusString(resp.GetStatuses()[0]))
		}
	}
}

func TestSetRules(t *testing.T) {
	h := start(t, t0, service.Config{})
	req := request("mongo_cps", 0, desc("database", "users"))
	resp, err := h.svc.ShouldRateLimit(context.Background(), req)
	if err != nil || resp.GetStatuses()[0].GetCurrentLimit() != nil {
		t.Fatalf("no rules: %v, %v; want OK without a limit", resp, err)
	}
	h.svc.SetRules(mongo(1, config.Second))
	resp, err = h.svc.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := statusString(resp.GetStatuses()[0]); got != `OK remaining=0 limit={1 SECOND ""} reset=1s` {
		t.Errorf("after SetRules: %s", got)
	}
}

func TestHugeDescriptorValue(t *testing.T) {
	rules := (&fakeRules{domain: "d"}).add(fixed("d.ua", 1, config.Second), "ua", "")
	h := start(t, t0, service.Config{Rules: rules})
	long := strings.Repeat("x", 3*sluice.MaxKeyLen)
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		resp, err := h.svc.ShouldRateLimit(context.Background(), request("d", 0, desc("ua", long)))
		if err != nil || resp.GetOverallCode() != want {
			t.Fatalf("hit %d: %v, %v; want %v", i+1, resp.GetOverallCode(), err, want)
		}
	}
	other, err := h.svc.ShouldRateLimit(context.Background(), request("d", 0, desc("ua", long+"y")))
	if err != nil {
		t.Fatal(err)
	}
	if other.GetOverallCode() != pb.RateLimitResponse_OK {
		t.Errorf("a different long value shares the key: %v", other.GetOverallCode())
	}
	for _, k := range h.store.calls() {
		if len(k) > sluice.MaxKeyLen {
			t.Errorf("key of %d bytes reached the store", len(k))
		}
	}
}

func TestStoreKey(t *testing.T) {
	got := service.StoreKey("pre_", "mongo_cps", []config.Entry{{Key: "database", Value: "users"}, {Key: "op", Value: ""}})
	if want := "pre_mongo_cps_database_users_op_"; got != want {
		t.Errorf("StoreKey = %q, want %q", got, want)
	}
}

// failing is a store that always fails.
type failing struct{}

var errDown = errors.New("connection refused")

func (failing) AllowN(context.Context, string, sluice.Limit, int) (sluice.Result, error) {
	return sluice.Result{}, errDown
}

func TestStoreErrors(t *testing.T) {
	req := request("mongo_cps", 0, desc("database", "users"))
	t.Run("raw", func(t *testing.T) {
		h := start(t, t0, service.Config{Rules: mongo(5, config.Second), Limiter: failing{}})
		_, err := h.svc.ShouldRateLimit(context.Background(), req)
		if !errors.Is(err, errDown) || status.Code(err) != codes.Unavailable {
			t.Errorf("direct: %v, want Unavailable wrapping the store's error", err)
		}
		if _, err := h.grpc.ShouldRateLimit(context.Background(), req); status.Code(err) != codes.Unavailable {
			t.Errorf("grpc: %v, want Unavailable", err)
		}
		if resp, body := h.postJSON(req); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("http: %d %s, want 503", resp.StatusCode, body)
		}
		if got := counter(t, h, "sluice_rls_store_errors_total", "mongo_cps.database_users"); got != 3 {
			t.Errorf("store errors = %v, want 3", got)
		}
	})
	for _, c := range []struct {
		mode failsafe.Mode
		want pb.RateLimitResponse_Code
	}{
		{failsafe.Open, pb.RateLimitResponse_OK},
		{failsafe.Closed, pb.RateLimitResponse_OVER_LIMIT},
	} {
		t.Run("failsafe "+c.mode.String(), func(t *testing.T) {
			fs, err := failsafe.New(failsafe.Config{Primary: failing{}, Mode: c.mode, Logger: discard()})
			if err != nil {
				t.Fatal(err)
			}
			h := start(t, t0, service.Config{Rules: mongo(5, config.Second), Limiter: fs})
			resp, err := h.svc.ShouldRateLimit(context.Background(), req)
			if err != nil || resp.GetOverallCode() != c.want {
				t.Errorf("%v, %v; want %v", resp.GetOverallCode(), err, c.want)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	rules := (&fakeRules{domain: "api"}).
		add(fixed("api.user", 100, config.Minute), "user", "").
		add(fixed("api.route", 1000, config.Hour), "route", "")
	rules.rules[0].rl.Name = "default"
	req := request("api", 0, desc("route", "/x"), desc("user", "bob"))

	t.Run("draft-11", func(t *testing.T) {
		// A minute window starts at 1699999980, 20 s before t0.
		h := start(t, t0-20, service.Config{Rules: rules, Headers: service.HeadersDraft11})
		resp, err := h.svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"RateLimit-Policy": `"default";q=100;w=60`,
			"RateLimit":        `"default";r=99;t=60`,
		}
		if got := headerMap(resp); !equalMaps(got, want) {
			t.Errorf("first request: %v, want %v", got, want)
		}
		h.clock.Advance(30 * time.Second)
		resp, err = h.svc.ShouldRateLimit(context.Background(), request("api", 99, desc("user", "bob")))
		if err != nil {
			t.Fatal(err)
		}
		if got := headerMap(resp)["RateLimit"]; got != `"default";r=0;t=30` {
			t.Errorf("100th: RateLimit %q", got)
		}
		resp, err = h.svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		want = map[string]string{
			"RateLimit-Policy": `"default";q=100;w=60`,
			"RateLimit":        `"default";r=0;t=30`,
			"Retry-After":      "30",
		}
		if got := headerMap(resp); !equalMaps(got, want) {
			t.Errorf("101st: %v, want %v", got, want)
		}
		// The HTTP face sets them as headers, and 429.
		r, _ := h.postJSON(req)
		if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "30" || r.Header.Get("RateLimit") == "" {
			t.Errorf("http: %d %v", r.StatusCode, r.Header)
		}
	})
	t.Run("legacy", func(t *testing.T) {
		h := start(t, t0-20, service.Config{Rules: rules, Headers: service.HeadersLegacy})
		resp, err := h.svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"RateLimit-Limit": "100", "RateLimit-Remaining": "99", "RateLimit-Reset": "60"}
		if got := headerMap(resp); !equalMaps(got, want) {
			t.Errorf("%v, want %v", got, want)
		}
		h2 := start(t, t0-20, service.Config{Rules: rules, Headers: service.HeadersLegacy,
			LegacyNames: service.LegacyNames{Limit: "X-RateLimit-Limit", Remaining: "X-RateLimit-Remaining", Reset: "X-RateLimit-Reset"}})
		if _, err := h2.svc.ShouldRateLimit(context.Background(), request("api", 100, desc("user", "bob"))); err != nil {
			t.Fatal(err)
		}
		resp, _ = h2.svc.ShouldRateLimit(context.Background(), req)
		want = map[string]string{"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "60", "Retry-After": "60"}
		if got := headerMap(resp); !equalMaps(got, want) {
			t.Errorf("custom names, over: %v, want %v", got, want)
		}
	})
	t.Run("off", func(t *testing.T) {
		h := start(t, t0, service.Config{Rules: rules})
		resp, err := h.svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetResponseHeadersToAdd()) != 0 {
			t.Errorf("headers with HeadersOff: %v", resp.GetResponseHeadersToAdd())
		}
	})
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestParseHeaderMode(t *testing.T) {
	for _, m := range []service.HeaderMode{service.HeadersOff, service.HeadersLegacy, service.HeadersDraft11} {
		got, err := service.ParseHeaderMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseHeaderMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	for _, s := range []string{"draft-03", "both"} {
		if _, err := service.ParseHeaderMode(s); err == nil {
			t.Errorf("ParseHeaderMode(%s): no error", s)
		}
	}
	// both is a mode, not one for this face: said so, not "unknown".
	if _, err := service.ParseHeaderMode("both"); err == nil || strings.Contains(err.Error(), "unknown") || !strings.Contains(err.Error(), "not for the rate limit service") {
		t.Errorf("ParseHeaderMode(both): %v, want it said not for the rate limit service", err)
	}
}

// TestNewRefusesAHeaderModeAServiceDoesNotSend checks that New names the
// header mode it refuses, Both or a value that is no mode, by what it is.
func TestNewRefusesAHeaderModeAServiceDoesNotSend(t *testing.T) {
	store := memstore.New(memstore.Config{SweepInterval: -1})
	defer store.Close()
	for mode, want := range map[service.HeaderMode]string{
		rlheader.Both:     "header mode both",
		rlheader.Both + 2: "header mode rlheader.Mode(6)",
	} {
		_, err := service.New(service.Config{Limiter: store, Headers: mode})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New with Headers %d: %v; want an error naming %q", uint8(mode), err, want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := service.New(service.Config{}); err == nil {
		t.Error("New without a Limiter: no error")
	}
}

// TestHealth checks every name a health check may ask for: the server-wide
// "", the RLS service's full name, and "ratelimit", the one name
// envoyproxy/ratelimit registers (Envoy Gateway's and Kubernetes' gRPC
// probes ask for it).
func TestHealth(t *testing.T) {
	h := start(t, t0, service.Config{})
	hc := healthpb.NewHealthClient(h.conn)
	for _, serving := range []bool{true, false, true} {
		h.svc.SetServing(serving)
		want, wantHTTP := healthpb.HealthCheckResponse_SERVING, http.StatusOK
		if !serving {
			want, wantHTTP = healthpb.HealthCheckResponse_NOT_SERVING, http.StatusServiceUnavailable
		}
		for _, name := range []string{"", service.HealthServiceName, "ratelimit"} {
			resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: name})
			if err != nil || resp.GetStatus() != want {
				t.Errorf("grpc health %q: %v, %v; want %v", name, resp.GetStatus(), err, want)
			}
		}
		r, err := http.Get(h.http.URL + "/healthcheck")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != wantHTTP {
			t.Errorf("GET /healthcheck: %d, want %d", r.StatusCode, wantHTTP)
		}
	}
}

func TestMetricsEndpoint(t *testing.T) {
	h := start(t, t0, service.Config{Rules: mongo(2, config.Second)})
	for i := 0; i < 3; i++ {
		h.svc.ShouldRateLimit(context.Background(), request("mongo_cps", 0, desc("database", "users")))
	}
	r, err := http.Get(h.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", r.StatusCode)
	}
	if n, err := testutil.GatherAndCount(h.reg, "sluice_rls_decision_seconds"); err != nil || n != 2 {
		t.Errorf("decision_seconds series = %d, %v; want 2 (ok, over_limit)", n, err)
	}
	wantCounters(t, h, "mongo_cps.database_users", map[string]float64{
		"sluice_rls_hits_total":         3,
		"sluice_rls_within_limit_total": 2,
		"sluice_rls_near_limit_total":   1,
		"sluice_rls_over_limit_total":   1,
	})
}

func TestDetailedMetric(t *testing.T) {
	rules := mongo(5, config.Second)
	rules.rules[0].entries[0].Value = ""
	rules.rules[0].rl.DetailedMetric = true
	h := start(t, t0, service.Config{Rules: rules})
	h.svc.ShouldRateLimit(context.Background(), request("mongo_cps", 0, desc("database", "orders")))
	if got := counter(t, h, "sluice_rls_hits_total", "mongo_cps.database_orders"); got != 1 {
		t.Errorf("detailed label hits = %v, want 1", got)
	}
}

func TestNegativeHitsRefund(t *testing.T) {
	clock := clocktest.At(time.Unix(t0, 0))
	store := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	defer store.Close()
	svc, err := service.New(service.Config{Limiter: store, Rules: mongo(3, config.Second), Logger: discard(), AllowRefunds: true})
	if err != nil {
		t.Fatal(err)
	}
	spend := request("mongo_cps", 3, desc("database", "users"))
	give := request("mongo_cps", 2, desc("database", "users"))
	give.Descriptors[0].IsNegativeHits = true
	var got []string
	for _, req := range []*pb.RateLimitRequest{spend, give, request("mongo_cps", 2, desc("database", "users"))} {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, statusString(resp.GetStatuses()[0]))
	}
	want := []string{
		`OK remaining=0 limit={3 SECOND ""} reset=1s`,
		`OK remaining=3 limit={3 SECOND ""}`, // a refund is answered like a check
		`OK remaining=0 limit={3 SECOND ""} reset=1s`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// refundReq is a descriptor of mongo_cps's users key that asks to give
// back n units (is_negative_hits).
func refundReq(n uint64) *pb.RateLimitRequest {
	d := withHits(desc("database", "users"), n)
	d.IsNegativeHits = true
	return request("mongo_cps", 0, d)
}

// By default is_negative_hits is counted as envoyproxy/ratelimit counts
// it, as a spend of hits_addend: a caller cannot give an exhausted key its
// allowance back, on any face.
func TestNegativeHitsAreASpendUnlessRefundsAllowed(t *testing.T) {
	forEachFace(t, t0, service.Config{Rules: mongo(3, config.Hour)}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		if got := statusString(call(request("mongo_cps", 3, desc("database", "users"))).GetStatuses()[0]); !strings.HasPrefix(got, "OK remaining=0") {
			t.Fatalf("spend 3 of 3: %s", got)
		}
		resp := call(refundReq(1000))
		if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("is_negative_hits, hits_addend 1000 on an exhausted key: %s; want OVER_LIMIT (a spend)", statusString(resp.GetStatuses()[0]))
		}
		for i := range 2 {
			resp := call(request("mongo_cps", 1, desc("database", "users")))
			if got := statusString(resp.GetStatuses()[0]); !strings.HasPrefix(got, "OVER_LIMIT remaining=0") {
				t.Errorf("request %d after the would-be refund: %s; want OVER_LIMIT remaining=0", i+1, got)
			}
		}
	})
}

// With AllowRefunds, is_negative_hits gives units back, on every face,
// but never raises a key above a fresh key's allowance (sluice.Refunder):
// a refund of 1000 to a key of 3 admits 3 requests, not 1003.
func TestAllowedRefundNeverRaisesAKeyAboveFresh(t *testing.T) {
	forEachFace(t, t0, service.Config{Rules: mongo(3, config.Hour), AllowRefunds: true}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		call(request("mongo_cps", 2, desc("database", "users")))
		if got := statusString(call(refundReq(1000)).GetStatuses()[0]); !strings.HasPrefix(got, "OK remaining=3") {
			t.Errorf("refund of 1000: %s; want OK remaining=3, answered like a check", got)
		}
		var got []string
		for range 5 {
			got = append(got, call(request("mongo_cps", 1, desc("database", "users"))).GetOverallCode().String())
		}
		if want := "OK OK OK OVER_LIMIT OVER_LIMIT"; strings.Join(got, " ") != want {
			t.Errorf("after a refund of 1000 to a key of 3 (2 spent): %s; want %s", strings.Join(got, " "), want)
		}
	})
}
