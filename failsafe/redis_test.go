package failsafe_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
)

// TestRedisKilledMidLoad kills a real Redis while 16 goroutines make
// decisions, checks that each mode does what it says within the timeout and
// never panics, then restarts Redis and checks that decisions go back to it
// by themselves once the breaker's back-off has passed. In Local mode every
// answer without Redis must be the local limiter's, under the share of the
// limit: each key admitted at most its share, one unit per answer, and
// denied (with a RetryAfter, not an error) beyond it.
func TestRedisKilledMidLoad(t *testing.T) {
	for _, mode := range everyMode {
		t.Run(mode.String(), func(t *testing.T) {
			srv := redistest.StartServer(t)
			ctx := context.Background()
			store, err := redisstore.New(ctx, redisstore.Config{URL: "redis://" + srv.Addr})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			// The local store's clock stands still mid-hour, so its
			// windows never roll over while the breaker's clock moves.
			local := memstore.New(memstore.Config{SweepInterval: -1, Clock: clocktest.At(time.Unix(1700000040+1800, 0))})
			defer local.Close()
			clock := clocktest.At(time.Now())
			const nodes = 20_000 // the local share: 1,000,000 / 20,000 = 50 per hour and key
			l, err := failsafe.New(failsafe.Config{
				Primary: store, Mode: mode, Local: local, Nodes: nodes,
				Timeout: 500 * time.Millisecond, Threshold: 3, Backoff: time.Second,
				Logger: slog.New(&logs{}), Clock: clock,
			})
			if err != nil {
				t.Fatal(err)
			}
			lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1_000_000, Period: time.Hour}
			share := failsafe.Split(lim, nodes)
			key := func(g int) string { return "killed:" + mode.String() + ":" + strconv.Itoa(g) }
			// Answers from Redis leave at least half the limit (no key spends
			// half a million units in this test); answers from the local
			// share leave fewer than share.Rate.
			fromRedis := func(r sluice.Result) bool { return r.Allowed && r.Remaining >= lim.Rate/2 }
			var (
				localAdmitted [16]int // per goroutine, each its own key
				localDenied   [16]int
				lowest        [16]int // lowest Remaining of a local admission
			)

			// Load that runs through the kill and the restart.
			var (
				wg       sync.WaitGroup
				stop     = make(chan struct{})
				slowest  atomic.Int64
				outcomes [3]atomic.Int64 // answered as the mode says, denied with ErrUnavailable, anything else
			)
			for g := range 16 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						start := time.Now()
						r, err := l.Allow(ctx, key(g), lim)
						if d := int64(time.Since(start)); d > slowest.Load() {
							slowest.Store(d)
						}
						switch {
						case err == nil && fromRedis(r):
							outcomes[0].Add(1)
						case err == nil && mode == failsafe.Open && r.Allowed && r.Remaining == lim.Rate-1:
							outcomes[0].Add(1) // admitted, the allowance reported untouched
						case err == nil && mode == failsafe.Local && r.Allowed && r.Remaining < share.Rate:
							outcomes[0].Add(1)
							localAdmitted[g]++
							if localAdmitted[g] == 1 || r.Remaining < lowest[g] {
								lowest[g] = r.Remaining
							}
						case err == nil && mode == failsafe.Local && !r.Allowed && r.Remaining == 0 && r.RetryAfter > 0:
							outcomes[0].Add(1) // the local share ran out: a denial, as it should be
							localDenied[g]++
						case errors.Is(err, failsafe.ErrUnavailable) && !r.Allowed && mode == failsafe.Closed:
							outcomes[1].Add(1)
						default:
							outcomes[2].Add(1)
							t.Errorf("mode %v: unexpected outcome %+v, %v", mode, r, err)
							return
						}
					}
				})
			}
			waitFor := func(what string, cond func() bool) {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for !cond() {
					if time.Now().After(deadline) {
						t.Fatalf("timed out waiting for %s", what)
					}
					time.Sleep(5 * time.Millisecond) // polling a condition, not passing time for an algorithm
				}
			}
			waitFor("decisions on Redis", func() bool { return outcomes[0].Load() > 100 })
			srv.Kill()
			waitFor("the breaker to open", func() bool { return !l.Available() })
			switch mode {
			case failsafe.Closed:
				n := outcomes[1].Load()
				waitFor("denials while Redis is down", func() bool { return outcomes[1].Load() > n+100 })
			default:
				n := outcomes[0].Load()
				waitFor("admissions while Redis is down", func() bool { return outcomes[0].Load() > n+100 })
			}
			srv.Restart(t)
			// Move the breaker's clock past each back-off, so that calls
			// probe until one finds Redis back.
			waitFor("the breaker to close", func() bool {
				clock.Advance(time.Minute)
				return l.Available()
			})
			close(stop)
			wg.Wait()
			if outcomes[2].Load() != 0 {
				t.Fatalf("%d unexpected outcomes", outcomes[2].Load())
			}
			if mode == failsafe.Local {
				answered := 0
				for g := range localAdmitted {
					answered += localAdmitted[g] + localDenied[g]
					if localAdmitted[g] > share.Rate {
						t.Errorf("key %d: the local limiter admitted %d, more than the share %d", g, localAdmitted[g], share.Rate)
					}
					if n := localAdmitted[g]; n > 0 && lowest[g] != share.Rate-n {
						t.Errorf("key %d: %d local admissions left %d remaining, want %d: not one unit of the share each", g, n, lowest[g], share.Rate-n)
					}
				}
				if answered < 100 {
					t.Errorf("only %d answers came from the local limiter while Redis was down", answered)
				}
			}
			if d := time.Duration(slowest.Load()); d > 2*time.Second {
				t.Errorf("slowest decision took %v; the timeout is 500ms", d)
			}
			// Back on Redis: the key's state is in Redis again.
			if _, err := l.Allow(ctx, "after-restart", lim); err != nil {
				t.Fatal(err)
			}
			if got := srv.Do(t, "EXISTS", store.Key(sluice.FixedWindow, "after-restart")); !strings.HasPrefix(got, "1") {
				t.Fatalf("after recovery the decision did not reach Redis: EXISTS = %q", got)
			}
		})
	}
}
