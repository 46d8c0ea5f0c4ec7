package service_test

import (
	"context"
	"fmt"
	"testing"

	gostats "github.com/lyft/gostats"
	"github.com/lyft/gostats/mock"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// statsdHarness is a Service counting into a recording statsd sink.
func statsdHarness(t *testing.T, cfg service.Config, tags map[string]string) (*harness, *mock.Sink, gostats.Store) {
	t.Helper()
	h := start(t, t0, cfg)
	sink := mock.NewSink()
	store := gostats.NewStore(sink, false)
	if err := h.svc.SendStatsd(store, tags); err != nil {
		t.Fatal(err)
	}
	return h, sink, store
}

// mongoAndShadowed is the rules of mongo_cps: database (users, per
// minute) and shadowed, in shadow mode (shadowed per minute).
func mongoAndShadowed(users, shadowed uint32) *fakeRules {
	rules := mongo(users, config.Minute)
	r := fixed("mongo_cps.shadowed", shadowed, config.Minute)
	r.ShadowMode = true
	rules.add(r, "shadowed", "")
	return rules
}

// The decisions are sent under envoyproxy/ratelimit's stat names, with the
// counts Prometheus has: dashboards built on its statsd output keep
// working.
func TestStatsdCountsUnderEnvoyRatelimitNames(t *testing.T) {
	h, sink, store := statsdHarness(t, service.Config{Rules: mongoAndShadowed(2, 1)}, nil)
	ctx := context.Background()
	for range 3 {
		h.svc.ShouldRateLimit(ctx, request("mongo_cps", 0, desc("database", "users")))
	}
	for range 2 {
		h.svc.ShouldRateLimit(ctx, request("mongo_cps", 0, desc("shadowed", "x")))
	}
	h.svc.ShouldRateLimit(ctx, request("", 0, desc("database", "users"))) // malformed
	store.Flush()
	const users, shadowed = "ratelimit.service.rate_limit.mongo_cps.database_users.", "ratelimit.service.rate_limit.mongo_cps.shadowed."
	want := map[string]uint64{
		users + "total_hits":      3,
		users + "within_limit":    2,
		users + "near_limit":      1,
		users + "over_limit":      1,
		shadowed + "total_hits":   2,
		shadowed + "within_limit": 1,
		shadowed + "over_limit":   1,
		shadowed + "shadow_mode":  1,
		"ratelimit.service.call.should_rate_limit.service_error": 1,
		"ratelimit_server.ShouldRateLimit.total_requests":        6,
	}
	for name, n := range want {
		if got := sink.Counter(name); got != n {
			t.Errorf("%s = %d, want %d", name, got, n)
		}
	}
	if n := sink.TimerCallCount("ratelimit_server.ShouldRateLimit.response_time"); n != 6 {
		t.Errorf("response_time observed %d times, want 6", n)
	}
	if _, ok := sink.LoadCounter(users + "shadow_mode"); ok {
		t.Error("shadow_mode counted for a rule not in shadow mode")
	}
}

// EXTRA_TAGS tag every stat, in gostats's encoding (".__key=value"), as
// envoyproxy/ratelimit sends them.
func TestStatsdTagsEveryStat(t *testing.T) {
	h, sink, store := statsdHarness(t, service.Config{Rules: mongo(2, config.Minute)}, map[string]string{"env": "prod"})
	h.svc.ShouldRateLimit(context.Background(), request("mongo_cps", 0, desc("database", "users")))
	store.Flush()
	for _, name := range []string{
		"ratelimit.service.rate_limit.mongo_cps.database_users.total_hits.__env=prod",
		"ratelimit_server.ShouldRateLimit.total_requests.__env=prod",
	} {
		if sink.Counter(name) != 1 {
			t.Errorf("%s not sent; counters: %v", name, sink.Counters())
		}
	}
}

// A descriptor's value that would break the statsd line (":", "|", a
// newline) or split an IPv4 address into name levels is sanitized in the
// stat name, as envoyproxy/ratelimit does; the Prometheus label is not.
func TestStatsdSanitizesNamesFromDescriptorValues(t *testing.T) {
	rules := (&fakeRules{domain: "d"}).add(func() *config.RateLimit {
		r := fixed("d.ip", 100, config.Minute)
		r.DetailedMetric = true
		return r
	}(), "ip", "")
	h, sink, store := statsdHarness(t, service.Config{Rules: rules}, nil)
	for _, v := range []string{"10.0.0.1", "a:b|c\nx:1|c"} {
		h.svc.ShouldRateLimit(context.Background(), request("d", 0, desc("ip", v)))
	}
	store.Flush()
	for _, name := range []string{
		"ratelimit.service.rate_limit.d.ip_10_0_0_1.total_hits",
		"ratelimit.service.rate_limit.d.ip_a_b_c_x_1_c.total_hits",
	} {
		if sink.Counter(name) != 1 {
			t.Errorf("%s not sent; counters: %v", name, sink.ListCounters())
		}
	}
	if got := seriesOf(t, h, "sluice_rls_hits_total", "d.ip_10.0.0.1"); got["d.ip_10.0.0.1"] != 1 {
		t.Errorf("Prometheus label changed: %v", got)
	}
}

// Without SendStatsd nothing reaches a sink, and a Service without
// Config.Registerer refuses it (it has no counting to feed it).
func TestSendStatsdNeedsMetrics(t *testing.T) {
	svc, err := service.New(service.Config{Limiter: start(t, t0, service.Config{}).store})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.SendStatsd(gostats.NewStore(mock.NewSink(), false), nil); err == nil {
		t.Error("SendStatsd without Config.Registerer succeeded")
	}
}

// statsd and Prometheus count the same decisions the same: every
// per-rule counter of one equals the other's, whatever the mix of
// admitted, near, over and shadowed decisions.
func TestStatsdAgreesWithPrometheus(t *testing.T) {
	h, sink, store := statsdHarness(t, service.Config{Rules: mongoAndShadowed(5, 3)}, nil)
	ctx := context.Background()
	for i := range 40 {
		d := desc("database", "users")
		if i%3 == 0 {
			d = desc("shadowed", "x")
		}
		h.svc.ShouldRateLimit(ctx, request("mongo_cps", uint32(i%4), d))
	}
	store.Flush()
	for prom, suffix := range map[string]string{
		"sluice_rls_hits_total": "total_hits", "sluice_rls_over_limit_total": "over_limit",
		"sluice_rls_near_limit_total": "near_limit", "sluice_rls_within_limit_total": "within_limit",
		"sluice_rls_shadow_mode_total": "shadow_mode",
	} {
		for label, v := range seriesOf(t, h, prom, "mongo_cps.") {
			if got := sink.Counter("ratelimit.service.rate_limit." + label + "." + suffix); float64(got) != v {
				t.Errorf("%s{rule=%q} = %v, statsd %s = %d", prom, label, v, suffix, got)
			}
		}
	}
}

// A detailed rule's values are counted under their own stat names, every
// time (their counters are kept per value), up to Config.MaxDetailedSeries
// of them; the values past the cap are counted in the rule's other bucket,
// as in Prometheus.
func TestStatsdCountsDetailedValuesUpToTheCap(t *testing.T) {
	rules := (&fakeRules{domain: "d"}).add(func() *config.RateLimit {
		r := fixed("d.ip", 100, config.Minute)
		r.DetailedMetric = true
		return r
	}(), "ip", "")
	h, sink, store := statsdHarness(t, service.Config{Rules: rules, MaxDetailedSeries: 3}, nil)
	for range 2 {
		for i := range 6 {
			h.svc.ShouldRateLimit(context.Background(), request("d", 0, desc("ip", fmt.Sprintf("v%d", i))))
		}
	}
	store.Flush()
	const prefix = "ratelimit.service.rate_limit.d."
	want := map[string]uint64{"ip_v0": 2, "ip_v1": 2, "ip_v2": 2, "ip#other": 6, "ip_v3": 0}
	for name, n := range want {
		if got := sink.Counter(prefix + name + ".total_hits"); got != n {
			t.Errorf("%s.total_hits = %d, want %d; counters: %v", name, got, n, sink.ListCounters())
		}
	}
}

// A later SendStatsd replaces the store for every rule, those counted
// before it included: nothing more goes to the first store.
func TestSendStatsdAgainReplacesTheStore(t *testing.T) {
	rules := mongoAndShadowed(100, 100)
	rules.add(func() *config.RateLimit {
		r := fixed("mongo_cps.ip", 100, config.Minute)
		r.DetailedMetric = true
		return r
	}(), "ip", "")
	h, first, firstStore := statsdHarness(t, service.Config{Rules: rules}, nil)
	ctx := context.Background()
	decide := func() {
		h.svc.ShouldRateLimit(ctx, request("mongo_cps", 0, desc("database", "users")))
		h.svc.ShouldRateLimit(ctx, request("mongo_cps", 0, desc("ip", "a")))
	}
	decide()
	second := mock.NewSink()
	secondStore := gostats.NewStore(second, false)
	if err := h.svc.SendStatsd(secondStore, nil); err != nil {
		t.Fatal(err)
	}
	decide()
	firstStore.Flush()
	secondStore.Flush()
	for _, name := range []string{"mongo_cps.database_users", "mongo_cps.ip_a"} {
		name = "ratelimit.service.rate_limit." + name + ".total_hits"
		if a, b := first.Counter(name), second.Counter(name); a != 1 || b != 1 {
			t.Errorf("%s: %d in the first store, %d in the second; want 1 and 1", name, a, b)
		}
	}
}

// Loads of the rules are counted as envoyproxy/ratelimit counts them,
// ratelimit.service.config_load_success and config_load_error, which
// Envoy Gateway's dashboards map.
func TestStatsdCountsConfigLoads(t *testing.T) {
	h, sink, store := statsdHarness(t, service.Config{Rules: mongo(1, config.Minute)}, nil)
	for _, err := range []error{nil, nil, fmt.Errorf("bad.yaml:3:1: config: broken")} {
		h.svc.ConfigLoaded(err)
	}
	store.Flush()
	for name, want := range map[string]uint64{
		"ratelimit.service.config_load_success": 2,
		"ratelimit.service.config_load_error":   1,
	} {
		if got := sink.Counter(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}
