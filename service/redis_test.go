package service_test

// The D cases of standards.md on real Redis: the service's scenarios with a
// redisstore.Store as the Limiter, on a single node and on a Redis Cluster
// (internal/redistest; skipped with a message when redis-server is missing,
// a failure with SLUICE_REQUIRE_REDIS=1).
//
// The store reads Redis's clock (TIME), which a test cannot set. Where a
// case names an instant (D34's duration_until_reset=1s at 1700000000, D35's
// 10s), these tests assert what holds at any instant: 0 < duration ≤ the
// unit. Counting cases use hour-long windows so that a run does not cross a
// window edge (it could only at the turn of an hour, for a few
// milliseconds); remaining counts are asserted exactly. Every test writes
// keys under a prefix of its own (name, time, sequence number), so runs
// never share state.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/service"
)

// backends are the Redis deployments the tests run on.
var backends = []struct {
	name string
	url  func(t *testing.T) string
}{
	{"single", func(t *testing.T) string { return "redis://" + redistest.Single(t).Addr }},
	{"cluster", func(t *testing.T) string {
		return "redis+cluster://" + strings.Join(redistest.SharedCluster(t).Addrs, ",")
	}},
}

var prefixSeq atomic.Int64

// uniquePrefix returns a key prefix no other test, run or call uses: the
// test's name, the time and a sequence number.
func uniquePrefix(t *testing.T) string {
	return fmt.Sprintf("%s-%d-%d-", strings.NewReplacer("/", ".", " ", "_").Replace(t.Name()), time.Now().UnixNano(), prefixSeq.Add(1))
}

func openRedis(t *testing.T, url string) *redisstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.New(ctx, redisstore.Config{URL: url})
	if err != nil {
		t.Fatalf("redisstore.New(%s): %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// redisHarness is start's harness with a Redis store (behind the recorder)
// as the Limiter and a unique key prefix.
func redisHarness(t *testing.T, url string, cfg service.Config) *harness {
	t.Helper()
	rec := &recorder{Limiter: openRedis(t, url)}
	cfg.Limiter = rec
	cfg.Prefix = uniquePrefix(t)
	h := start(t, t0, cfg)
	h.store, h.prefix = rec, cfg.Prefix
	return h
}

// forEachRedis runs f for every backend and face, each on a fresh harness.
func forEachRedis(t *testing.T, cfg service.Config, f faceTest) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			url := b.url(t)
			eachFace(t, func(t *testing.T) *harness { return redisHarness(t, url, cfg) }, f)
		})
	}
}

// forEachStore runs f on every face over the recording store, then over
// each Redis backend: for a case that holds whatever the store's clock.
func forEachStore(t *testing.T, cfg service.Config, f faceTest) {
	t.Run("fake", func(t *testing.T) { forEachFace(t, t0, cfg, f) })
	t.Run("redis", func(t *testing.T) { forEachRedis(t, cfg, f) })
}

// checkStatus compares a status with everything but duration_until_reset
// exactly, and requires 0 < duration_until_reset ≤ maxReset.
func checkStatus(t *testing.T, what string, st *pb.RateLimitResponse_DescriptorStatus, want string, maxReset time.Duration) {
	t.Helper()
	got := statusString(st)
	got, _, _ = strings.Cut(got, " reset=")
	if got != want {
		t.Errorf("%s: status %s, want %s", what, got, want)
	}
	if d := st.GetDurationUntilReset(); d == nil || d.AsDuration() <= 0 || d.AsDuration() > maxReset {
		t.Errorf("%s: duration_until_reset %v, want in (0, %v]", what, d.AsDuration(), maxReset)
	}
}

func TestRedisMalformedRequestsRefusedBeforeStore(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			refusesMalformed(t, redisHarness(t, b.url(t), service.Config{Rules: mongo(500, config.Second)}))
		})
	}
}

func TestRedisPerSecondRuleFirstHitStatus(t *testing.T) {
	forEachRedis(t, service.Config{Rules: mongo(500, config.Second)}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		resp := call(request("mongo_cps", 0, desc("database", "users")))
		if resp.GetOverallCode() != pb.RateLimitResponse_OK {
			t.Errorf("overall_code = %v, want OK", resp.GetOverallCode())
		}
		checkStatus(t, "first hit", resp.GetStatuses()[0], `OK remaining=499 limit={500 SECOND ""}`, time.Second)
		want := h.prefix + "mongo_cps_database_users"
		if got := h.store.calls(); len(got) != 1 || got[0] != want {
			t.Errorf("store keys = %q, want [%s]", got, want)
		}
	})
}

// TestRedisStoreKeyExpiresWithinWindow checks the key the store writes and that it expires
// within the window (the store's own form of envoyproxy/ratelimit's EXPIRE).
func TestRedisStoreKeyExpiresWithinWindow(t *testing.T) {
	srv := redistest.Single(t)
	rs := openRedis(t, "redis://"+srv.Addr)
	prefix := uniquePrefix(t)
	svc, err := service.New(service.Config{Limiter: rs, Rules: mongo(500, config.Second), Prefix: prefix, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ShouldRateLimit(context.Background(), request("mongo_cps", 0, desc("database", "users"))); err != nil {
		t.Fatal(err)
	}
	key := rs.Key(sluice.FixedWindow, prefix+"mongo_cps_database_users")
	var ttl int
	if _, err := fmt.Sscan(srv.Do(t, "PTTL", key), &ttl); err != nil || ttl <= 0 || ttl > 1000 {
		t.Errorf("PTTL %s = %d (%v), want in (0, 1000] ms", key, ttl, err)
	}
}

func TestRedisPerMinuteRuleFirstHitStatus(t *testing.T) {
	forEachRedis(t, service.Config{Rules: mongo(10, config.Minute)}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		resp := call(request("mongo_cps", 0, desc("database", "users")))
		checkStatus(t, "first hit", resp.GetStatuses()[0], `OK remaining=9 limit={10 MINUTE ""}`, time.Minute)
	})
}

func TestRedisHitOverLimitIsOverLimitWithReset(t *testing.T) {
	forEachRedis(t, service.Config{Rules: mongo(5, config.Hour)}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		req := request("mongo_cps", 0, desc("database", "users"))
		for i := 1; i <= 5; i++ {
			resp := call(req)
			checkStatus(t, fmt.Sprintf("hit %d", i), resp.GetStatuses()[0], fmt.Sprintf(`OK remaining=%d limit={5 HOUR ""}`, 5-i), time.Hour)
		}
		resp := call(req)
		if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("6th hit: overall_code = %v, want OVER_LIMIT", resp.GetOverallCode())
		}
		checkStatus(t, "6th hit", resp.GetStatuses()[0], `OVER_LIMIT remaining=0 limit={5 HOUR ""}`, time.Hour)
	})
}

func TestRedisShadowModeRuleAllowsAndCounts(t *testing.T) {
	rules := mongo(5, config.Hour)
	rules.rules[0].rl.ShadowMode = true
	forEachRedis(t, service.Config{Rules: rules}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		for i := 1; i <= 6; i++ {
			if resp := call(request("mongo_cps", 0, desc("database", "users"))); resp.GetOverallCode() != pb.RateLimitResponse_OK {
				t.Errorf("hit %d: %v, want OK", i, resp.GetOverallCode())
			}
		}
		wantCounters(t, h, "mongo_cps.database_users", map[string]float64{"sluice_rls_over_limit_total": 1, "sluice_rls_shadow_mode_total": 1})
	})
}

func TestRedisHitsAddendCountsAndCheckOnlySpendsNothing(t *testing.T) {
	forEachRedis(t, service.Config{Rules: mongo(5, config.Hour)}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		resp := call(request("mongo_cps", 0, desc("database", "users")))
		checkStatus(t, "request hits_addend 0", resp.GetStatuses()[0], `OK remaining=4 limit={5 HOUR ""}`, time.Hour)
		// A check (descriptor hits_addend 0) peeks the key: its remaining
		// and its real reset, nothing spent.
		resp = call(request("mongo_cps", 7, withHits(desc("database", "users"), 0)))
		checkStatus(t, "check only", resp.GetStatuses()[0], `OK remaining=4 limit={5 HOUR ""}`, time.Hour)
		if got := h.store.calls(); len(got) != 1 {
			t.Errorf("store AllowN calls = %q, want just the first", got)
		}
		if got := h.store.peeked(); len(got) != 1 {
			t.Errorf("store Peek calls = %q, want one", got)
		}
		resp = call(request("mongo_cps", 2, desc("database", "users")))
		checkStatus(t, "2 more", resp.GetStatuses()[0], `OK remaining=2 limit={5 HOUR ""}`, time.Hour)
		resp = call(request("mongo_cps", 3, desc("database", "users")))
		if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("3 more after 3 on a limit of 5: %v, want OVER_LIMIT", resp.GetOverallCode())
		}
		resp = call(request("mongo_cps", 3, withHits(desc("database", "users"), 2)))
		checkStatus(t, "descriptor hits_addend 2", resp.GetStatuses()[0], `OK remaining=0 limit={5 HOUR ""}`, time.Hour)
	})
}

func TestRedisOverallCodeIsWorstDescriptorAndHeadersNameIt(t *testing.T) {
	rules := (&fakeRules{domain: "d"}).
		add(fixed("d.a", 10, config.Hour), "a", "").
		add(fixed("d.b", 1, config.Hour), "b", "")
	forEachRedis(t, service.Config{Rules: rules, Headers: service.HeadersDraft11}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		req := request("d", 0, desc("a", "1"), desc("b", "1"))
		call(req)
		resp := call(req)
		if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT || len(resp.GetStatuses()) != 2 {
			t.Fatalf("%v with %d statuses, want OVER_LIMIT with 2", resp.GetOverallCode(), len(resp.GetStatuses()))
		}
		checkStatus(t, "a", resp.GetStatuses()[0], `OK remaining=8 limit={10 HOUR ""}`, time.Hour)
		checkStatus(t, "b", resp.GetStatuses()[1], `OVER_LIMIT remaining=0 limit={1 HOUR ""}`, time.Hour)
		hm := headerMap(resp)
		if hm["RateLimit-Policy"] != `"d.b";q=1;w=3600` || !strings.HasPrefix(hm["RateLimit"], `"d.b";r=0;t=`) || hm["Retry-After"] == "" {
			t.Errorf("headers %v", hm)
		}
	})
}

// TestRedisExactUnderConcurrency: 64 goroutines on one descriptor with a
// limit of 100 per hour admit exactly 100.
func TestRedisExactUnderConcurrency(t *testing.T) {
	forEachRedis(t, service.Config{Rules: mongo(100, config.Hour)}, func(t *testing.T, h *harness, call func(*pb.RateLimitRequest) *pb.RateLimitResponse) {
		const workers, each = 64, 4
		var ok, over atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					resp, err := h.svc.ShouldRateLimit(context.Background(), request("mongo_cps", 0, desc("database", "users")))
					switch {
					case err != nil:
						errs <- err
					case resp.GetOverallCode() == pb.RateLimitResponse_OK:
						ok.Add(1)
					default:
						over.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if ok.Load() != 100 || over.Load() != workers*each-100 {
			t.Errorf("admitted %d, refused %d; want exactly 100 and %d", ok.Load(), over.Load(), workers*each-100)
		}
		// The face under test agrees that the window is spent.
		if resp := call(request("mongo_cps", 0, desc("database", "users"))); resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("after 100: %v, want OVER_LIMIT", resp.GetOverallCode())
		}
	})
}

// TestRedisStoreDownAnsweredByFailureMode kills a Redis server of the test's own under the
// service: without a failure policy the service answers Unavailable (and
// Envoy's failure_mode_deny decides); with one, each rule's mode answers.
func TestRedisStoreDownAnsweredByFailureMode(t *testing.T) {
	srv := redistest.StartServer(t)
	url := "redis://" + srv.Addr
	raw := redisHarness(t, url, service.Config{Rules: modeRules(10, config.Hour)})
	guarded := redisHarness(t, url, service.Config{Rules: modeRules(10, config.Hour),
		Failure: &service.FailurePolicy{Mode: failsafe.Closed, Nodes: 2, Timeout: 200 * time.Millisecond, Threshold: 2, Local: newLocal(t, nil)}})
	for _, key := range []string{"open", "closed", "local", "default"} {
		if got := answers(t, guarded, key, 1); got != "ok" {
			t.Fatalf("%s rule on a live store: %s", key, got)
		}
	}
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := raw.svc.ShouldRateLimit(ctx, request("d", 0, desc("open", "x"))); status.Code(err) != codes.Unavailable {
		t.Errorf("no failure policy, store down: %v, want Unavailable", err)
	}
	want := map[string]string{
		"open":   "ok ok ok ok ok ok",
		"closed": "over over over over over over",
		// 10 per hour split between 2 nodes, and of the 9 the store
		// reported left after the live call, this node's share: 4.
		"local":   "ok ok ok ok over over",
		"default": "over over over over over over",
	}
	start := time.Now()
	for _, key := range []string{"open", "closed", "local", "default"} {
		if got := answers(t, guarded, key, 6); got != want[key] {
			t.Errorf("%s rule, store down: %s, want %s", key, got, want[key])
		}
	}
	// Each key's partition of the breaker opened after 2 failures: 24
	// decisions cost at most 8 failed calls (a refused connection each).
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("24 decisions with the store down took %v: the breaker did not open", d)
	}
}
