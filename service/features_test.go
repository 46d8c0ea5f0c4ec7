package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/service"
)

func decideOne(t *testing.T, h *harness, req *pb.RateLimitRequest) *pb.RateLimitResponse {
	t.Helper()
	resp, err := h.svc.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// share_threshold: every value a wildcard matches counts in one counter,
// keyed by the pattern (each value had its own before); the metrics name
// keeps the pattern.
func TestShareThresholdSharesOneCounter(t *testing.T) {
	rules := configtest.Parse(t, `
domain: d
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
`)
	h := start(t, t0, service.Config{Rules: rules})
	for i, v := range []string{"files/a.pdf", "files/b.csv", "files/c.txt"} {
		resp := decideOne(t, h, request("d", 0, desc("files", v)))
		want := pb.RateLimitResponse_OK
		if i == 2 {
			want = pb.RateLimitResponse_OVER_LIMIT
		}
		if resp.GetOverallCode() != want {
			t.Errorf("hit %d (%s): %v, want %v (two values already spent the shared 2/minute)", i+1, v, resp.GetOverallCode(), want)
		}
	}
	for _, k := range h.store.calls() {
		if k != "d_files_files/*" {
			t.Errorf("store key %q, want d_files_files/* (the pattern)", k)
		}
	}
	if got := counter(t, h, "sluice_rls_hits_total", "d.files_files/*"); got != 3 {
		t.Errorf("hits under d.files_files/* = %v, want 3", got)
	}
}

// The metrics series a hit is counted under: value_to_metric names it by
// the request's value at a key-only level; detailed_metric names it by the
// whole descriptor; a share_threshold level keeps its pattern, even with
// value_to_metric on that level (the value would give each its own series,
// where the values share one counter).
func TestMetricNamesFromRequestValues(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
		hits        []*rlpb.RateLimitDescriptor // each in a request of its own
		want        map[string]float64          // hits by series
	}{
		{
			// With a share_threshold level, envoyproxy/ratelimit writes the
			// other levels as its descriptorKey does: no "_" for an empty
			// value.
			name: "value_to_metric and detailed_metric",
			rules: `
domain: d
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 100}
  - key: path
    value: /api/*
    share_threshold: true
    descriptors:
      - key: tag
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 100}
`,
			hits: []*rlpb.RateLimitDescriptor{desc("route", "checkout", "user", "bob"), desc("path", "/api/x", "tag", "")},
			want: map[string]float64{"d.route_checkout.user": 1, "d.path_/api/*.tag": 1},
		},
		{
			name: "value_to_metric on a share_threshold level",
			rules: `
domain: d
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: user
        value_to_metric: true
        rate_limit: {unit: minute, requests_per_unit: 100}
`,
			hits: []*rlpb.RateLimitDescriptor{desc("files", "files/a.pdf", "user", "bob"), desc("files", "files/b.csv", "user", "bob")},
			want: map[string]float64{"d.files_files/*.user_bob": 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, t0, service.Config{Rules: configtest.Parse(t, tc.rules)})
			for _, d := range tc.hits {
				decideOne(t, h, request("d", 0, d))
			}
			for series, want := range tc.want {
				if got := counter(t, h, "sluice_rls_hits_total", series); got != want {
					t.Errorf("hits under %s = %v, want %v", series, got, want)
				}
			}
		})
	}
}

const quotaRules = `
domain: d
descriptors:
  - key: q1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// quota_mode: a quota descriptor over its limit does not make the
// response OVER_LIMIT while another quota descriptor admits; once every
// quota descriptor is over, it does. Statuses still say which are over.
func TestQuotaModeOverOnlyWhenAllQuotasAre(t *testing.T) {
	h := start(t, t0, service.Config{Rules: configtest.Parse(t, quotaRules)})
	decideOne(t, h, request("d", 0, desc("q1", "a")))
	resp := decideOne(t, h, request("d", 0, desc("q1", "a"), desc("q2", "a")))
	if resp.GetOverallCode() != pb.RateLimitResponse_OK {
		t.Errorf("q1 over, q2 within: overall %v, want OK", resp.GetOverallCode())
	}
	if st := resp.GetStatuses()[0]; st.GetCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("q1's status %v, want OVER_LIMIT (statuses are not rewritten)", st.GetCode())
	}
	resp = decideOne(t, h, request("d", 0, desc("q1", "a"), desc("q2", "a")))
	if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("every quota over: overall %v, want OVER_LIMIT", resp.GetOverallCode())
	}
	decideOne(t, h, request("d", 0, desc("plain", "a")))
	resp = decideOne(t, h, request("d", 0, desc("plain", "a"), desc("q1", "b")))
	if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("a plain descriptor over beside an admitting quota: overall %v, want OVER_LIMIT", resp.GetOverallCode())
	}
}

// Config.QuotaMode makes every descriptor a quota, one that matches no
// rule included: such a request is never OVER_LIMIT, as in
// envoyproxy/ratelimit; without the unmatched one it is, once all are
// over.
func TestGlobalQuotaModeCountsUnmatchedDescriptors(t *testing.T) {
	h := start(t, t0, service.Config{Rules: configtest.Parse(t, quotaRules), QuotaMode: true})
	decideOne(t, h, request("d", 0, desc("plain", "a")))
	resp := decideOne(t, h, request("d", 0, desc("plain", "a")))
	if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("the only descriptor, a quota, over: %v, want OVER_LIMIT", resp.GetOverallCode())
	}
	resp = decideOne(t, h, request("d", 0, desc("plain", "a"), desc("nomatch", "x")))
	if resp.GetOverallCode() != pb.RateLimitResponse_OK {
		t.Errorf("with a descriptor that matches no rule: %v, want OK", resp.GetOverallCode())
	}
}

// Config.DynamicMetadata: dynamic_metadata has envoyproxy/ratelimit's
// shape, and metadata merges the rules of the admitted descriptors only
// (the first value wins, mappings merge); a detailed_metric rule's
// metadata is kept (envoyproxy/ratelimit loses it).
func TestDynamicMetadata(t *testing.T) {
	rules := configtest.Parse(t, `
domain: d
descriptors:
  - key: a
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {team: pay, sub: {x: 1}}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {team: other, sub: {y: 2}}
  - key: c
    rate_limit: {unit: minute, requests_per_unit: 0}
    metadata: {blocked: true}
`)
	h := start(t, t0, service.Config{Rules: rules, DynamicMetadata: true})
	o := desc("b", "2")
	o.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 9, Unit: typepb.RateLimitUnit_HOUR}
	req := request("d", 3, desc("a", "1"), withHits(o, 2), desc("c", "3"))
	resp := decideOne(t, h, req)
	got, err := protojson.Marshal(resp.GetDynamicMetadata())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"descriptors":[{"entries":["a=1"]},{"entries":["b=2"],"hitsAddend":2,"limit":"requests_per_unit:9 unit:HOUR"},{"entries":["c=3"]}],` +
		`"domain":"d","hitsAddend":3,"metadata":{"sub":{"x":1,"y":2},"team":"pay"}}`
	if normJSON(t, got) != normJSON(t, []byte(want)) {
		t.Errorf("dynamic_metadata\n got %s\nwant %s", got, want)
	}
	// One admitted rule alone: its metadata as configured, the same in
	// every response (a cached value) and with an override too.
	for range 2 {
		one := decideOne(t, h, request("d", 0, desc("a", "1")))
		got, _ := protojson.Marshal(one.GetDynamicMetadata().GetFields()["metadata"])
		if normJSON(t, got) != `{"sub":{"x":1},"team":"pay"}` {
			t.Errorf("one rule's metadata %s", got)
		}
	}
	ov := desc("b", "3")
	ov.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 9, Unit: typepb.RateLimitUnit_HOUR}
	got, _ = protojson.Marshal(decideOne(t, h, request("d", 0, ov)).GetDynamicMetadata().GetFields()["metadata"])
	if normJSON(t, got) != `{"sub":{"y":2},"team":"other"}` {
		t.Errorf("an overridden rule's metadata %s, want its own (envoyproxy/ratelimit loses it)", got)
	}
	h2 := start(t, t0, service.Config{Rules: rules})
	if md := decideOne(t, h2, req).GetDynamicMetadata(); md != nil {
		t.Errorf("without DynamicMetadata: %v, want none", md)
	}
}

// several limits on one descriptor: a request is charged on all of them
// or none; the status names the limit that refused, else the tightest.
func TestSeveralLimitsChargeAllOrNone(t *testing.T) {
	t.Run("store", func(t *testing.T) { severalLimits(t, nil) })
	// With a failure policy each limit is decided through its failure
	// mode's Limiter, and refunds go the same way.
	t.Run("failure-policy", func(t *testing.T) { severalLimits(t, &service.FailurePolicy{}) })
}

func severalLimits(t *testing.T, fp *service.FailurePolicy) {
	rules := configtest.Parse(t, `
domain: d
descriptors:
  - key: user
    rate_limits:
      - {name: burst, unit: second, requests_per_unit: 2}
      - {name: daily, unit: day, requests_per_unit: 3}
`)
	h := start(t, t0, service.Config{Rules: rules, Headers: service.HeadersLegacy, Failure: fp})
	hit := func() *pb.RateLimitResponse { return decideOne(t, h, request("d", 0, desc("user", "bob"))) }
	r1, r2, r3 := hit(), hit(), hit()
	if r1.GetOverallCode() != pb.RateLimitResponse_OK || r2.GetOverallCode() != pb.RateLimitResponse_OK {
		t.Fatalf("first two hits: %v %v, want OK", r1.GetOverallCode(), r2.GetOverallCode())
	}
	if got := r2.GetStatuses()[0].GetCurrentLimit().GetName(); got != "burst" {
		t.Errorf("second hit reports %q, want burst (0 left of 2/s, 1 of 3/day)", got)
	}
	if st := r3.GetStatuses()[0]; r3.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT || st.GetCurrentLimit().GetName() != "burst" {
		t.Errorf("third hit in the same second: %v by %q, want OVER_LIMIT by burst", r3.GetOverallCode(), st.GetCurrentLimit().GetName())
	}
	h.clock.Advance(time.Second)
	r4 := hit()
	if st := r4.GetStatuses()[0]; r4.GetOverallCode() != pb.RateLimitResponse_OK || st.GetCurrentLimit().GetName() != "daily" || st.GetLimitRemaining() != 0 {
		t.Errorf("next second: %s, want OK by daily with 0 left (the refused hit was refunded)", statusString(st))
	}
	h.clock.Advance(time.Second)
	r5 := hit()
	if st := r5.GetStatuses()[0]; r5.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT || st.GetCurrentLimit().GetName() != "daily" {
		t.Errorf("fourth admitted-worthy hit of the day: %s, want OVER_LIMIT by daily", statusString(st))
	}
	if hd := headerMap(r5); hd["RateLimit-Limit"] != "3" {
		t.Errorf("headers %v, want the daily limit's", hd)
	}
	h.clock.Advance(time.Second)
	// The burst limit was refunded when daily refused: 2 fresh hits... but
	// daily is spent, so still over; a check reports daily.
	ck := decideOne(t, h, request("d", 0, withHits(desc("user", "bob"), 0)))
	if st := ck.GetStatuses()[0]; st.GetCurrentLimit().GetName() != "daily" || st.GetLimitRemaining() != 0 {
		t.Errorf("check: %s, want daily with 0 left", statusString(st))
	}
	// A cost the per-second limit can never admit is refused there
	// first; the day's limit, spent, would refuse it for longer, and the
	// status says so (its reset, not a second).
	big := decideOne(t, h, request("d", 0, withHits(desc("user", "bob"), 3)))
	if st := big.GetStatuses()[0]; st.GetCurrentLimit().GetName() != "daily" || st.GetDurationUntilReset().AsDuration() <= time.Second {
		t.Errorf("a cost of 3: %s, want refused by daily until the day ends", statusString(st))
	}
}

// perSecondAndDay is a rule of two unnamed limits, 5 a second and 2 a
// day, for user.
const perSecondAndDay = `
domain: d
descriptors:
  - key: user
    rate_limits:
      - {unit: second, requests_per_unit: 5}
      - {unit: day, requests_per_unit: 2}
`

// The draft-11 RateLimit-Policy of a rate_limits list lists every limit
// (unnamed ones as FullKey#<seconds>s), and RateLimit names the tightest.
func TestSeveralLimitsHeaders(t *testing.T) {
	rules := configtest.Parse(t, perSecondAndDay)
	h := start(t, t0, service.Config{Rules: rules, Headers: service.HeadersDraft11})
	hd := headerMap(decideOne(t, h, request("d", 0, desc("user", "bob"))))
	if got, want := hd["RateLimit-Policy"], `"d.user";q=5;w=1, "d.user#86400s";q=2;w=86400`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	if got := hd["RateLimit"]; !strings.HasPrefix(got, `"d.user#86400s";r=1;`) {
		t.Errorf("RateLimit %q, want the daily limit's, 1 left", got)
	}
}

// Config.StopIncrementWhenOverLimit: when one descriptor of a request is
// over, the others spend nothing (without it, they spend).
func TestStopIncrementWhenOverLimit(t *testing.T) {
	rules := configtest.Parse(t, `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 1}
`)
	for _, stop := range []bool{false, true} {
		h := start(t, t0, service.Config{Rules: rules, StopIncrementWhenOverLimit: stop})
		decideOne(t, h, request("d", 0, desc("b", "1")))
		resp := decideOne(t, h, request("d", 0, desc("a", "1"), desc("b", "1")))
		if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("stop=%v: %v, want OVER_LIMIT", stop, resp.GetOverallCode())
		}
		wantReported, wantLeft := uint32(4), uint32(3)
		if stop {
			wantReported, wantLeft = 5, 4
		}
		if got := resp.GetStatuses()[0].GetLimitRemaining(); got != wantReported {
			t.Errorf("stop=%v: a's remaining %d, want %d", stop, got, wantReported)
		}
		after := decideOne(t, h, request("d", 0, desc("a", "1")))
		if got := after.GetStatuses()[0].GetLimitRemaining(); got != wantLeft {
			t.Errorf("stop=%v: a's next hit leaves %d, want %d", stop, got, wantLeft)
		}
	}
}

// Config.NearLimitRatio sets where near_limit starts: with 0.5 on a
// 10/minute rule, the 6th hit is the first near the limit.
func TestNearLimitRatio(t *testing.T) {
	rules := configtest.Parse(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10}\n")
	h := start(t, t0, service.Config{Rules: rules, NearLimitRatio: 0.5})
	for range 6 {
		decideOne(t, h, request("d", 0, desc("k", "v")))
	}
	if got := counter(t, h, "sluice_rls_near_limit_total", "d.k"); got != 1 {
		t.Errorf("near_limit after 6 of 10 with ratio 0.5 = %v, want 1", got)
	}
	if _, err := service.New(service.Config{Limiter: h.store, NearLimitRatio: 1.5}); err == nil {
		t.Error("NearLimitRatio 1.5: no error")
	}
}

// normJSON re-encodes a JSON document with sorted keys and no spaces.
func normJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// An unlimited rule with quota_mode is not a quota (as under QUOTA_MODE):
// beside a quota over its limit, it does not keep the answer OK.
func TestUnlimitedRuleWithQuotaModeIsNotAQuota(t *testing.T) {
	h := start(t, t0, service.Config{Rules: configtest.Parse(t, `
domain: d
descriptors:
  - key: q
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: free
    quota_mode: true
    rate_limit: {unlimited: true}
`)})
	decideOne(t, h, request("d", 0, desc("q", "a")))
	resp := decideOne(t, h, request("d", 0, desc("q", "a"), desc("free", "a")))
	if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("the only quota over, beside an unlimited one: overall %v, want OVER_LIMIT", resp.GetOverallCode())
	}
}
