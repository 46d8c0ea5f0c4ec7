package service_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// threeRules has a rule for each of the keys a, b and c, with different
// limits and names, so that a status tells which descriptor it answers.
func threeRules() *fakeRules {
	a, b, c := fixed("api.a", 10, config.Second), fixed("api.b", 20, config.Minute), fixed("api.c", 30, config.Hour)
	b.Name = "bee"
	return (&fakeRules{domain: "api"}).add(a, "a", "").add(b, "b", "").add(c, "c", "")
}

// A response owns its memory: the calls after it, of any shape, do not
// change it (the service reuses its working memory between calls, never a
// response's).
func TestResponsesOutliveCalls(t *testing.T) {
	for _, mode := range []service.HeaderMode{service.HeadersOff, service.HeadersLegacy, service.HeadersDraft11} {
		t.Run(mode.String(), func(t *testing.T) {
			h := start(t, t0, service.Config{Rules: threeRules(), Headers: mode})
			reqs := []*pb.RateLimitRequest{
				request("api", 0, desc("a", "1"), desc("b", "1"), desc("c", "1")),
				request("api", 0, desc("b", "2")),
				request("api", 0, desc("c", "3"), desc("a", "3")),
				request("api", 0, desc("zzz", "no rule")),
			}
			var kept, want []*pb.RateLimitResponse
			for round := range 3 {
				for _, req := range reqs {
					resp, err := h.svc.ShouldRateLimit(context.Background(), req)
					if err != nil {
						t.Fatal(err)
					}
					if round == 0 {
						kept = append(kept, resp)
						want = append(want, proto.Clone(resp).(*pb.RateLimitResponse))
					}
				}
			}
			for i := range kept {
				if !proto.Equal(kept[i], want[i]) {
					t.Errorf("response %d changed after later calls:\n got %v\nwant %v", i, kept[i], want[i])
				}
			}
		})
	}
}

// Concurrent calls of different shapes each get the statuses of their own
// descriptors, in order (run with -race).
func TestConcurrentCallsKeepTheirDescriptors(t *testing.T) {
	h := start(t, t0, service.Config{Rules: threeRules(), Headers: service.HeadersDraft11})
	shapes := [][]string{{"a"}, {"b", "c"}, {"c", "a", "b"}, {"b"}}
	limits := map[string]string{"a": "10 SECOND", "b": "20 MINUTE", "c": "30 HOUR"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				keys := shapes[(g+i)%len(shapes)]
				var req pb.RateLimitRequest
				req.Domain = "api"
				for _, k := range keys {
					req.Descriptors = append(req.Descriptors, desc(k, fmt.Sprint(g, "-", i)))
				}
				resp, err := h.svc.ShouldRateLimit(context.Background(), &req)
				if err != nil {
					t.Error(err)
					return
				}
				if len(resp.GetStatuses()) != len(keys) {
					t.Errorf("%v: %d statuses", keys, len(resp.GetStatuses()))
					return
				}
				for j, k := range keys {
					l := resp.GetStatuses()[j].GetCurrentLimit()
					if got := fmt.Sprint(l.GetRequestsPerUnit(), " ", l.GetUnit()); got != limits[k] {
						t.Errorf("%v: status %d has limit %s, want %s", keys, j, got, limits[k])
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// What the service derives from a rule once (its RateLimit-Policy value)
// is derived again from the rules SetRules installs.
func TestSetRulesRederivesHeaders(t *testing.T) {
	for _, mode := range []service.HeaderMode{service.HeadersLegacy, service.HeadersDraft11} {
		t.Run(mode.String(), func(t *testing.T) {
			rules := func(rpu uint32) *fakeRules {
				r := fixed("api.user", rpu, config.Minute)
				r.Name = "per-user"
				return (&fakeRules{domain: "api"}).add(r, "user", "")
			}
			h := start(t, t0, service.Config{Rules: rules(100), Headers: mode})
			req := request("api", 0, desc("user", "bob"))
			limit := func() string {
				resp, err := h.svc.ShouldRateLimit(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				m := headerMap(resp)
				if mode == service.HeadersDraft11 {
					return m["RateLimit-Policy"]
				}
				return m["RateLimit-Limit"]
			}
			want100, want50 := "100", "50"
			if mode == service.HeadersDraft11 {
				want100, want50 = `"per-user";q=100;w=60`, `"per-user";q=50;w=60`
			}
			if got := limit(); got != want100 {
				t.Fatalf("before SetRules: %q, want %q", got, want100)
			}
			h.svc.SetRules(rules(50))
			if got := limit(); got != want50 {
				t.Fatalf("after SetRules: %q, want %q", got, want50)
			}
		})
	}
}

// A rule's series appear when first counted, as before the counters were
// cached: admissions alone make no over_limit_total or store_errors_total
// series, and no decision_seconds series for over_limit or error.
func TestMetricSeriesAppearOnFirstUse(t *testing.T) {
	h := start(t, t0, service.Config{Rules: mongo(5, config.Minute)})
	req := request("mongo_cps", 0, desc("database", "users"))
	for range 5 {
		if resp, err := h.svc.ShouldRateLimit(context.Background(), req); err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OK {
			t.Fatalf("%v, %v; want OK", resp, err)
		}
	}
	series := func() string {
		mfs, err := h.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				fmt.Fprint(&b, mf.GetName())
				for _, l := range m.GetLabel() {
					fmt.Fprintf(&b, " %s=%s", l.GetName(), l.GetValue())
				}
				b.WriteByte('\n')
			}
		}
		return b.String()
	}
	const admitted = `sluice_rls_decision_seconds code=ok
sluice_rls_hits_total rule=mongo_cps.database_users
sluice_rls_near_limit_total rule=mongo_cps.database_users
sluice_rls_within_limit_total rule=mongo_cps.database_users
`
	if got := series(); got != admitted {
		t.Errorf("after admissions, series:\n%s\nwant:\n%s", got, admitted)
	}
	if resp, err := h.svc.ShouldRateLimit(context.Background(), req); err != nil {
		t.Fatal(err)
	} else if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("6th hit: %v, want OVER_LIMIT", resp.GetOverallCode())
	}
	const denied = `sluice_rls_decision_seconds code=ok
sluice_rls_decision_seconds code=over_limit
sluice_rls_hits_total rule=mongo_cps.database_users
sluice_rls_near_limit_total rule=mongo_cps.database_users
sluice_rls_over_limit_total rule=mongo_cps.database_users
sluice_rls_within_limit_total rule=mongo_cps.database_users
`
	if got := series(); got != denied {
		t.Errorf("after a denial, series:\n%s\nwant:\n%s", got, denied)
	}
	if got := counter(t, h, "sluice_rls_hits_total", "mongo_cps.database_users"); got != 6 {
		t.Errorf("hits_total = %v, want 6", got)
	}
}
