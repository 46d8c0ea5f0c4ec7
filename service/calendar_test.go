package service_test

import (
	"context"
	"testing"
	"time"
	_ "time/tzdata"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// TestCalendarResetIsThePeriodsEnd: a rule of 1 per calendar month in
// Europe/Berlin tells the client the exact time to Berlin's midnight on
// the first of the month, in duration_until_reset, RateLimit's t and
// Retry-After, not a time derived from 30 days; from that instant the
// quota is fresh.
func TestCalendarResetIsThePeriodsEnd(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	rule := fixed("billing.tenant", 1, config.Month)
	rule.Limit.Calendar = sluice.Calendar{Location: berlin, Unit: sluice.CalendarMonth}
	rules := &fakeRules{domain: "billing"}
	rules.add(rule, "tenant", "")
	now := time.Date(2026, 1, 31, 22, 30, 0, 0, berlin)
	h := start(t, now.Unix(), service.Config{Rules: rules, Headers: service.HeadersDraft11})
	call := func() *pb.RateLimitResponse {
		t.Helper()
		resp, err := h.svc.ShouldRateLimit(context.Background(), request("billing", 1, desc("tenant", "acme")))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := call()
	st := resp.GetStatuses()[0]
	if resp.GetOverallCode() != pb.RateLimitResponse_OK || st.GetDurationUntilReset().AsDuration() != 90*time.Minute {
		t.Fatalf("first call: %v, reset in %v; want OK, 1h30m", resp.GetOverallCode(), st.GetDurationUntilReset().AsDuration())
	}
	if got := headerMap(resp)["RateLimit"]; got != `"billing.tenant";r=0;t=5400` {
		t.Errorf("RateLimit %q, want t=5400", got)
	}
	h.clock.Set(time.Date(2026, 1, 31, 23, 59, 0, 0, berlin))
	resp = call()
	st = resp.GetStatuses()[0]
	if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT || st.GetDurationUntilReset().AsDuration() != time.Minute {
		t.Fatalf("a minute before midnight: %v, reset in %v; want OVER_LIMIT, 1m", resp.GetOverallCode(), st.GetDurationUntilReset().AsDuration())
	}
	if hm := headerMap(resp); hm["Retry-After"] != "60" || hm["RateLimit"] != `"billing.tenant";r=0;t=60` {
		t.Errorf("headers %v, want Retry-After 60 and t=60", hm)
	}
	h.clock.Set(time.Date(2026, 2, 1, 0, 0, 0, 0, berlin))
	resp = call()
	if st := resp.GetStatuses()[0]; resp.GetOverallCode() != pb.RateLimitResponse_OK || st.GetDurationUntilReset().AsDuration() != 28*24*time.Hour {
		t.Fatalf("at midnight: %v, reset in %v; want OK, 672h", resp.GetOverallCode(), st.GetDurationUntilReset().AsDuration())
	}
}
