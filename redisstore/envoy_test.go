package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/redisstore"
)

// openEnvoy returns a store with the envoy key format on url, its scripts
// on clock (nil: Redis's TIME).
func openEnvoy(t testing.TB, url string, clock sluice.Clock, jitter time.Duration) *redisstore.Store {
	t.Helper()
	return openConfig(t, redisstore.Config{URL: url, KeyFormat: redisstore.KeyEnvoy, ExpirationJitter: jitter}, clock)
}

// uniq returns a key part no other test run uses.
func uniq(name string) string { return name + strconv.FormatInt(time.Now().UnixNano(), 36) + "_" }

func fixedWindow(rate int, period time.Duration) sluice.Limit {
	return sluice.Limit{Algorithm: sluice.FixedWindow, Rate: rate, Period: period, Burst: rate}
}

// Under KeyEnvoy a fixed window counts in envoyproxy/ratelimit's key: the
// key the service gives (its cache key up to the window start) followed by
// the window start in Unix seconds, holding a plain integer (INCRBY), with
// a time to live of the period plus at most the jitter.
func TestEnvoyKeyLayout(t *testing.T) {
	srv := redistest.Single(t)
	now := time.Unix(1_700_000_123, 456_000_000) // minute window 1_700_000_100
	s := openEnvoy(t, "redis://"+srv.Addr, clocktest.At(now), 5*time.Second)
	base := uniq("layout_domain_user_")
	lim := fixedWindow(5, time.Minute)
	for i := range 3 {
		r, err := s.AllowN(context.Background(), base, lim, 1)
		if err != nil || !r.Allowed || r.Remaining != 4-i {
			t.Fatalf("AllowN %d = %+v, %v; want allowed, remaining %d", i, r, err, 4-i)
		}
		if want := 36*time.Second + 544*time.Millisecond; r.ResetAfter != want {
			t.Errorf("ResetAfter = %v, want %v (the end of the minute)", r.ResetAfter, want)
		}
	}
	key := base + "1700000100"
	if got := strings.TrimSpace(srv.Do(t, "TYPE", key)); got != "string" {
		t.Fatalf("TYPE %s = %q, want string (keys: %s)", key, got, srv.Do(t, "KEYS", base+"*"))
	}
	if got := strings.TrimSpace(srv.Do(t, "GET", key)); got != "3" {
		t.Errorf("GET %s = %q, want 3", key, got)
	}
	ttl, err := strconv.Atoi(strings.TrimSpace(srv.Do(t, "TTL", key)))
	if err != nil || ttl < 59 || ttl > 65 {
		t.Errorf("TTL %s = %d (%v), want the unit plus a jitter below 5 s: 60 to 64", key, ttl, err)
	}
}

// The window start is Redis's (the clock Sluice's scripts use), not the
// Sluice host's: a host whose clock is 2.5 hours off still counts in the
// key of the window Redis is in, and learns the offset, so that the next
// decision takes one round trip again.
func TestEnvoyWindowFromRedisClock(t *testing.T) {
	srv := redistest.StartServer(t)
	s := openEnvoy(t, "redis://"+srv.Addr, nil, 0)
	redisstore.SetGuessClock(s, func() time.Time { return time.Now().Add(150 * time.Minute) })
	base := uniq("skew_d_k_v_")
	lim := fixedWindow(10, time.Hour)
	calls := func() int {
		for line := range strings.SplitSeq(srv.Do(t, "INFO", "commandstats"), "\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
				n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				return n
			}
		}
		return 0
	}
	for range 2 {
		if r, err := s.Allow(context.Background(), base, lim); err != nil || !r.Allowed {
			t.Fatalf("Allow = %+v, %v", r, err)
		}
	}
	before := calls()
	if _, err := s.Allow(context.Background(), base, lim); err != nil {
		t.Fatal(err)
	}
	if n := calls() - before; n != 1 {
		t.Errorf("a decision after the offset was learned took %d script calls, want 1", n)
	}
	sec, _, _ := strings.Cut(srv.Do(t, "TIME"), "\n")
	now, err := strconv.ParseInt(strings.TrimSpace(sec), 10, 64)
	if err != nil {
		t.Fatalf("TIME: %q", sec)
	}
	key := base + strconv.FormatInt(now-now%3600, 10)
	if got := strings.TrimSpace(srv.Do(t, "GET", key)); got != "3" {
		t.Errorf("GET %s = %q, want 3 (keys: %s)", key, got, srv.Do(t, "KEYS", base+"*"))
	}
}

// Peek reads the envoy counter without writing, refunds give units back to
// it (never below 0), and a counter pushed over the limit by
// envoyproxy/ratelimit (which counts denied hits too) peeks as over.
func TestEnvoyPeekRefund(t *testing.T) {
	srv := redistest.Single(t)
	now := time.Unix(1_700_000_000, 0)
	s := openEnvoy(t, "redis://"+srv.Addr, clocktest.At(now), 0)
	ctx := context.Background()
	base := uniq("peek_d_k_v_")
	key := base + "1700000000"
	lim := fixedWindow(5, time.Second)
	if r, err := s.Peek(ctx, base, lim); err != nil || !r.Allowed || r.Remaining != 5 || r.ResetAfter != time.Second {
		t.Fatalf("Peek of an unused key = %+v, %v; want allowed, 5 remaining, reset 1s", r, err)
	}
	if got := strings.TrimSpace(srv.Do(t, "EXISTS", key)); got != "0" {
		t.Fatalf("a peek created %s", key)
	}
	if _, err := s.AllowN(ctx, base, lim, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.RefundN(ctx, base, lim, 3); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Peek(ctx, base, lim); err != nil || r.Remaining != 4 {
		t.Fatalf("Peek after 4 spent and 3 refunded = %+v, %v; want 4 remaining", r, err)
	}
	if err := s.RefundN(ctx, base, lim, 5); err != nil { // 1 spent
		t.Fatal(err)
	}
	if got := strings.TrimSpace(srv.Do(t, "GET", key)); got != "0" {
		t.Errorf("after refunding more than was spent GET = %q, want 0", got)
	}
	srv.Do(t, "INCRBY", key, "7") // envoyproxy/ratelimit's denied hits count
	r, err := s.Peek(ctx, base, lim)
	if err != nil || r.Allowed || r.Remaining != 0 || r.RetryAfter != time.Second {
		t.Errorf("Peek of a counter at 7 of 5 = %+v, %v; want denied, 0 remaining, retry 1s", r, err)
	}
	if r, err := s.Allow(ctx, base, lim); err != nil || r.Allowed {
		t.Errorf("Allow at 7 of 5 = %+v, %v; want denied", r, err)
	}
}

// Only fixed windows of whole seconds share envoyproxy/ratelimit's layout;
// every other limit keeps Sluice's own key, which envoyproxy/ratelimit
// never reads (it has no other algorithm), and its values.
func TestEnvoyOtherLimitsKeepSluiceLayout(t *testing.T) {
	srv := redistest.Single(t)
	s := openEnvoy(t, "redis://"+srv.Addr, clocktest.At(time.Unix(1_700_000_000, 0)), 0)
	base := uniq("other_d_k_v_")
	for _, lim := range []sluice.Limit{
		{Algorithm: sluice.TokenBucket, Rate: 5, Period: time.Second, Burst: 5},
		{Algorithm: sluice.SlidingWindow, Rate: 5, Period: time.Second},
		fixedWindow(5, 1500*time.Millisecond),
	} {
		if _, err := s.Allow(context.Background(), base, lim); err != nil {
			t.Fatalf("%v: %v", lim, err)
		}
		if got := strings.TrimSpace(srv.Do(t, "EXISTS", s.Key(lim.Algorithm, base))); got != "1" {
			t.Errorf("%v: Sluice's key %s was not written", lim, s.Key(lim.Algorithm, base))
		}
	}
	if got := strings.TrimSpace(srv.Do(t, "KEYS", base+"1*")); got != "" {
		t.Errorf("envoy-layout keys written for limits that keep Sluice's layout: %s", got)
	}
}

// envoyMimic counts as envoyproxy/ratelimit's fixed-window Redis cache
// does (redis/fixed_cache_impl.go): the window start from its own clock
// in Unix seconds, INCRBY then EXPIRE unit+jitter pipelined, over the limit
// iff the count after the increment is above it. Denied hits stay counted.
type envoyMimic struct {
	client rueidis.Client
	prefix string
}

func (m envoyMimic) hit(ctx context.Context, domain, kv string, unit int64, limit, hits int64) (bool, error) {
	now := time.Now().Unix()
	key := m.prefix + domain + "_" + kv + strconv.FormatInt(now-now%unit, 10)
	res := m.client.DoMulti(ctx,
		m.client.B().Incrby().Key(key).Increment(hits).Build(),
		m.client.B().Expire().Key(key).Seconds(unit+3).Build())
	after, err := res[0].AsInt64()
	if err != nil {
		return false, err
	}
	return after <= limit, res[1].Error()
}

// The rolling swap: envoyproxy/ratelimit instances (the mimic) and Sluice
// instances with the envoy key format and the same CACHE_KEY_PREFIX serve
// one Redis at once. Requests spread over all of them, concurrently,
// admit exactly the limit together: Sluice counts in envoyproxy/ratelimit's
// keys, and its decisions count the mimic's denied hits as spent.
func TestEnvoyRollingSwapSharesTheLimit(t *testing.T) {
	srv := redistest.Single(t)
	url := "redis://" + srv.Addr
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sluices := []*redisstore.Store{openEnvoy(t, url, nil, time.Second), openEnvoy(t, url, nil, time.Second)}
	const limit, requests = 40, 200
	// A day's window, so that the requests fall in one window but for a
	// run that straddles midnight UTC, which is run again.
	for attempt := 0; ; attempt++ {
		prefix := uniq("swap")
		mimic := envoyMimic{client: client, prefix: prefix}
		day := func() string {
			s, _, _ := strings.Cut(srv.Do(t, "TIME"), "\n")
			n, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			return strconv.FormatInt(n/86400, 10)
		}
		startDay := day()
		var envoyOK, sluiceOK atomic.Int64
		var wg sync.WaitGroup
		for i := range requests {
			wg.Go(func() {
				ctx := context.Background()
				if i%3 == 0 {
					ok, err := mimic.hit(ctx, "edge", "user_alice_", 86400, limit, 1)
					if err != nil {
						t.Error(err)
					} else if ok {
						envoyOK.Add(1)
					}
					return
				}
				r, err := sluices[i%2].Allow(ctx, prefix+"edge_user_alice_", fixedWindow(limit, 24*time.Hour))
				if err != nil {
					t.Error(err)
				} else if r.Allowed {
					sluiceOK.Add(1)
				}
			})
		}
		wg.Wait()
		if day() != startDay && attempt == 0 {
			continue
		}
		if got := envoyOK.Load() + sluiceOK.Load(); got != limit {
			t.Errorf("admitted %d (envoyproxy/ratelimit %d, Sluice %d) of %d, want exactly the limit %d",
				got, envoyOK.Load(), sluiceOK.Load(), requests, limit)
		}
		if envoyOK.Load() == 0 || sluiceOK.Load() == 0 {
			t.Errorf("envoyproxy/ratelimit admitted %d and Sluice %d: both must have served", envoyOK.Load(), sluiceOK.Load())
		}
		return
	}
}

// On a Cluster, each envoy-layout key goes to its own slot's node (the
// keys have no hash tag, as envoyproxy/ratelimit's), and the limit holds.
func TestEnvoyCluster(t *testing.T) {
	url := clusterURL(t)
	s := openEnvoy(t, url, clocktest.At(time.Unix(1_700_000_000, 0)), 0)
	for k := range 20 {
		base := uniq("cluster_d_k_" + strconv.Itoa(k) + "_")
		admitted := storetest.CountAllowed(t, 4, func() (sluice.Result, error) {
			return s.Allow(context.Background(), base, fixedWindow(3, time.Minute))
		})
		if admitted != 3 {
			t.Errorf("key %s: admitted %d of 4, want 3", base, admitted)
		}
	}
}

// A denied decision writes nothing, so the units left stay for requests
// that fit: 3 of 5 spent, a cost of 4 denied, a cost of 2 still admitted.
// (envoyproxy/ratelimit INCRBYs denied hits; counting them would admit 3
// of the limit's 5 units here.)
func TestEnvoyDeniedSpendsNothing(t *testing.T) {
	srv := redistest.Single(t)
	s := openEnvoy(t, "redis://"+srv.Addr, clocktest.At(time.Unix(1_700_000_000, 0)), 0)
	ctx := context.Background()
	base := uniq("denied_d_k_v_")
	lim := fixedWindow(5, time.Minute)
	for _, step := range []struct {
		cost int
		ok   bool
	}{{3, true}, {4, false}, {2, true}, {1, false}} {
		if r, err := s.AllowN(ctx, base, lim, step.cost); err != nil || r.Allowed != step.ok {
			t.Fatalf("AllowN(%d) = %+v, %v; want allowed %v", step.cost, r, err, step.ok)
		}
	}
	if got := strings.TrimSpace(srv.Do(t, "GET", base+"1699999980")); got != "5" {
		t.Errorf("GET = %q, want 5", got)
	}
}
