package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/redisstore"
)

// TestMain checks that closing every store leaves no goroutine behind, but
// for the ones rueidis's cluster client ends by itself.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.Wrap(m), redistest.IgnoreRueidis()...)
}

// open returns a store on url whose scripts take the time from clock, or
// from Redis's TIME when clock is nil.
func open(t testing.TB, url string, clock sluice.Clock) *redisstore.Store {
	t.Helper()
	return openConfig(t, redisstore.Config{URL: url}, clock)
}

// openConfig returns a store on cfg, closed when the test ends, whose
// scripts take the time from clock, or from Redis's TIME when clock is nil.
func openConfig(t testing.TB, cfg redisstore.Config, clock sluice.Clock) *redisstore.Store {
	t.Helper()
	var (
		s   *redisstore.Store
		err error
	)
	if clock != nil {
		s, err = redisstore.NewWithClock(context.Background(), cfg, clock)
	} else {
		s, err = redisstore.New(context.Background(), cfg)
	}
	if err != nil {
		t.Fatalf("redisstore.New(%s): %v", cfg.URL, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func singleURL(t testing.TB) string { return "redis://" + redistest.Single(t).Addr }

func clusterURL(t *testing.T) string {
	return "redis+cluster://" + strings.Join(redistest.SharedCluster(t).Addrs, ",")
}

// The conformance suite, with time in the suite's hands, on one node and on
// a Cluster.
func TestConformance(t *testing.T) {
	opts := storetest.Options{Resolution: time.Microsecond, Unbounded: true}
	t.Run("single", func(t *testing.T) {
		url := singleURL(t)
		storetest.RunWith(t, func(t *testing.T, clock sluice.Clock) sluice.Limiter { return open(t, url, clock) }, opts)
	})
	t.Run("cluster", func(t *testing.T) {
		url := clusterURL(t)
		storetest.RunWith(t, func(t *testing.T, clock sluice.Clock) sluice.Limiter { return open(t, url, clock) }, opts)
	})
}

// Decisions on Redis's own clock: a limit that does not refill within the
// test admits exactly its allowance, for every algorithm.
func TestServerClock(t *testing.T) {
	s := open(t, singleURL(t), nil)
	for _, a := range sluice.Algorithms() {
		lim := sluice.Limit{Algorithm: a, Rate: 5, Period: time.Hour, Burst: 5}
		key := "server-clock:" + a.String() + ":" + strconv.FormatInt(time.Now().UnixNano(), 36)
		admitted := 0
		for range 8 {
			r, err := s.Allow(context.Background(), key, lim)
			if err != nil {
				t.Fatalf("%v: %v", a, err)
			}
			if r.Allowed {
				admitted++
			} else if r.RetryAfter <= 0 || r.RetryAfter > time.Hour {
				t.Errorf("%v: denied with RetryAfter %v, want within (0, 1h]", a, r.RetryAfter)
			}
		}
		if admitted != 5 {
			t.Errorf("%v: admitted %d of 8, want 5", a, admitted)
		}
	}
}

// A key expires once its state is as good as fresh: its time to live is set
// and is no longer than the time to become fresh.
func TestExpiry(t *testing.T) {
	srv := redistest.Single(t)
	s := open(t, "redis://"+srv.Addr, nil)
	for _, a := range sluice.Algorithms() {
		lim := sluice.Limit{Algorithm: a, Rate: 10, Period: time.Second, Burst: 10}
		key := "expiry:" + a.String() + ":" + strconv.FormatInt(time.Now().UnixNano(), 36)
		r, err := s.AllowN(context.Background(), key, lim, 3)
		if err != nil || !r.Allowed {
			t.Fatalf("%v: AllowN = %+v, %v", a, r, err)
		}
		pttl, err := strconv.ParseInt(strings.TrimSpace(srv.Do(t, "PTTL", s.Key(a, key))), 10, 64)
		if err != nil {
			t.Fatalf("%v: PTTL: %v", a, err)
		}
		// The longest a state can take to become fresh is two periods
		// (the sliding window's previous window); PX rounds up to a ms.
		if pttl <= 0 || pttl > 2001 {
			t.Errorf("%v: PTTL = %d ms, want in (0, 2001]", a, pttl)
		}
		if pttl > r.ResetAfter.Milliseconds()+1 {
			t.Errorf("%v: PTTL %d ms outlives ResetAfter %v", a, pttl, r.ResetAfter)
		}
		// Nor may the key vanish while its state still matters: that would
		// admit too much. (A few ms pass between the decision and PTTL.)
		if pttl < r.ResetAfter.Milliseconds()-50 {
			t.Errorf("%v: PTTL %d ms is shorter than ResetAfter %v", a, pttl, r.ResetAfter)
		}
		// A refund of everything leaves nothing to remember (except for the
		// windows, which remember the boundary until it passes).
		if err := s.RefundN(context.Background(), key, lim, 3); err != nil {
			t.Fatalf("%v: RefundN: %v", a, err)
		}
		exists := strings.TrimSpace(srv.Do(t, "EXISTS", s.Key(a, key)))
		if a != sluice.FixedWindow && exists != "0" {
			t.Errorf("%v: after a full refund EXISTS = %s, want 0", a, exists)
		}
	}
}

// SCRIPT FLUSH while decisions are running fails none of them: the client
// reloads the script on NOSCRIPT.
func TestScriptFlushMidLoad(t *testing.T) {
	srv := redistest.Single(t)
	s := open(t, "redis://"+srv.Addr, nil)
	lim := sluice.PerSecond(1_000_000)
	var wg sync.WaitGroup
	var failed, done atomic.Int64
	stop := make(chan struct{})
	for g := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Allow(context.Background(), "flush:"+strconv.Itoa(g), lim); err != nil {
					failed.Add(1)
					t.Errorf("decision failed: %v", err)
					return
				}
				done.Add(1)
			}
		})
	}
	for range 20 {
		srv.Do(t, "SCRIPT", "FLUSH")
		for start := done.Load(); done.Load() < start+50; {
			time.Sleep(time.Millisecond) // let decisions run between flushes
		}
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d decisions failed across SCRIPT FLUSH", failed.Load())
	}
}

func TestBadInput(t *testing.T) {
	s := open(t, singleURL(t), nil)
	tests := []struct {
		name string
		lim  sluice.Limit
		want error
	}{
		{"sub-microsecond period", sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: 1500 * time.Nanosecond}, sluice.ErrInvalidLimit},
		{"invalid limit", sluice.Limit{Rate: 0, Period: time.Second, Burst: 1}, sluice.ErrInvalidLimit},
		{"token bucket of 2^52 units refilled faster than one per microsecond", sluice.Limit{Rate: 1 << 29, Period: time.Second, Burst: 1 << 52}, sluice.ErrInvalidLimit},
	}
	for _, tt := range tests {
		_, err := s.Allow(context.Background(), "bad", tt.lim)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: error %v, want one wrapping %v", tt.name, err, tt.want)
		}
	}
}

func TestUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A port nothing listens on: a fresh server's, after it is closed.
	srv := redistest.StartServer(t)
	addr := srv.Addr
	srv.Close()
	_, err := redisstore.New(ctx, redisstore.Config{URL: "redis://" + addr})
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("New on a closed port: error %v, want one naming %s", err, addr)
	}
	if _, err := redisstore.New(ctx, redisstore.Config{}); err == nil {
		t.Fatal("New with neither URL nor Client: no error")
	}
}

// A sliding log whose entries expire at the very instant it logs new ones
// (a shorter period on a config reload) keeps counting every unit: no log
// entry name is used twice.
func TestSlidingLogPeriodShrinks(t *testing.T) {
	clock := clocktest.New()
	s := open(t, singleURL(t), clock)
	ctx := context.Background()
	key := "shrink:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	long := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 5, Period: 10 * time.Second}
	for range 2 {
		s.Allow(ctx, key, long)
	}
	clock.Advance(5 * time.Second)
	for range 2 {
		s.Allow(ctx, key, long)
	}
	// Same instant, period 2 s: the two old entries leave, two remain.
	short := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 5, Period: 2 * time.Second}
	admitted := storetest.CountAllowed(t, 10, func() (sluice.Result, error) { return s.Allow(ctx, key, short) })
	if admitted != 3 {
		t.Fatalf("after the period shrank, %d admitted, want 3 (5 minus the 2 still in the window)", admitted)
	}
}

// Replies of an unexpected shape are errors, never panics.
func TestUnexpectedReplies(t *testing.T) {
	srv := redistest.Single(t)
	s := open(t, "redis://"+srv.Addr, nil)
	for _, body := range []string{"return 'x'", "return {1, 2}", "return {1, 2, 3, -4}", "return {2, 0, 0, 0}", "return nil", "return {1, 'a', 0, 0}", "return redis.error_reply('boom')"} {
		_, err := redisstore.RunScript(context.Background(), s, body)
		if err == nil {
			t.Errorf("script %q: no error", body)
		}
	}
}

// TestSlidingLogIsExactAtEveryLimit: the script's decisions are the exact
// definition's at 1, 64, 1000 and 100,000 per minute (it merged entries
// above 64 per period, refusing requests the definition admits).
func TestSlidingLogIsExactAtEveryLimit(t *testing.T) {
	url := singleURL(t)
	storetest.RunSlidingLogExact(t, func(t *testing.T, clock sluice.Clock) sluice.Limiter { return open(t, url, clock) }, time.Microsecond, true)
}
