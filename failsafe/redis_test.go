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
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/memstore"
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
			store := openRedis(t, srv.Addr)
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
			m := &midLoad{mode: mode, lim: lim, share: share}

			// Load that runs through the kill and the restart.
			var (
				wg   sync.WaitGroup
				stop = make(chan struct{})
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
						m.took(time.Since(start))
						if !m.record(g, r, err) {
							t.Errorf("mode %v: unexpected outcome %+v, %v", mode, r, err)
							return
						}
					}
				})
			}
			storetest.WaitFor(t, "decisions on Redis", func() bool { return m.outcomes[0].Load() > 100 })
			srv.Kill()
			storetest.WaitFor(t, "the breaker to open", func() bool { return !l.Available() })
			switch mode {
			case failsafe.Closed:
				n := m.outcomes[1].Load()
				storetest.WaitFor(t, "denials while Redis is down", func() bool { return m.outcomes[1].Load() > n+100 })
			default:
				n := m.outcomes[0].Load()
				storetest.WaitFor(t, "admissions while Redis is down", func() bool { return m.outcomes[0].Load() > n+100 })
			}
			srv.Restart(t)
			// Move the breaker's clock past each back-off, so that calls
			// probe until one finds Redis back.
			storetest.WaitFor(t, "the breaker to close", func() bool {
				clock.Advance(time.Minute)
				return l.Available()
			})
			close(stop)
			wg.Wait()
			if m.outcomes[2].Load() != 0 {
				t.Fatalf("%d unexpected outcomes", m.outcomes[2].Load())
			}
			if mode == failsafe.Local {
				m.checkLocal(t)
			}
			if d := time.Duration(m.slowest.Load()); d > 2*time.Second {
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

// midLoad is what TestRedisKilledMidLoad's 16 goroutines (each on a key
// of its own) were answered under mode, with limit lim and local share
// share.
type midLoad struct {
	mode          failsafe.Mode
	lim, share    sluice.Limit
	slowest       atomic.Int64    // the slowest decision's duration
	outcomes      [3]atomic.Int64 // answered as the mode says, denied with ErrUnavailable, anything else
	localAdmitted [16]int         // per goroutine
	localDenied   [16]int
	lowest        [16]int // lowest Remaining of a local admission
}

// took records a decision's duration.
func (m *midLoad) took(d time.Duration) {
	if int64(d) > m.slowest.Load() {
		m.slowest.Store(int64(d))
	}
}

// fromRedis reports whether r came from Redis: such answers leave at least
// half the limit (no key spends half a million units in the test), where
// answers from the local share leave fewer than share.Rate.
func (m *midLoad) fromRedis(r sluice.Result) bool {
	return r.Allowed && r.Remaining >= m.lim.Rate/2
}

// record counts goroutine g's answer r, err and reports whether it is one
// the mode allows, from Redis or with Redis down.
func (m *midLoad) record(g int, r sluice.Result, err error) bool {
	switch {
	case err == nil && m.fromRedis(r):
		m.outcomes[0].Add(1)
	case err == nil && m.mode == failsafe.Open && r.Allowed && r.Remaining == m.lim.Rate-1:
		m.outcomes[0].Add(1) // admitted, the allowance reported untouched
	case err == nil && m.mode == failsafe.Local && r.Allowed && r.Remaining < m.share.Rate:
		m.outcomes[0].Add(1)
		m.localAdmitted[g]++
		if m.localAdmitted[g] == 1 || r.Remaining < m.lowest[g] {
			m.lowest[g] = r.Remaining
		}
	case err == nil && m.mode == failsafe.Local && !r.Allowed && r.Remaining == 0 && r.RetryAfter > 0:
		m.outcomes[0].Add(1) // the local share ran out: a denial, as it should be
		m.localDenied[g]++
	case errors.Is(err, failsafe.ErrUnavailable) && !r.Allowed && m.mode == failsafe.Closed:
		m.outcomes[1].Add(1)
	default:
		m.outcomes[2].Add(1)
		return false
	}
	return true
}

// checkLocal checks the local limiter's answers (mode Local, once the
// goroutines have stopped): no key admitted over the share, each admission
// spent one unit of it, and at least 100 answers came from it.
func (m *midLoad) checkLocal(t *testing.T) {
	t.Helper()
	answered := 0
	for g := range m.localAdmitted {
		answered += m.localAdmitted[g] + m.localDenied[g]
		if m.localAdmitted[g] > m.share.Rate {
			t.Errorf("key %d: the local limiter admitted %d, more than the share %d", g, m.localAdmitted[g], m.share.Rate)
		}
		if n := m.localAdmitted[g]; n > 0 && m.lowest[g] != m.share.Rate-n {
			t.Errorf("key %d: %d local admissions left %d remaining, want %d: not one unit of the share each", g, n, m.lowest[g], m.share.Rate-n)
		}
	}
	if answered < 100 {
		t.Errorf("only %d answers came from the local limiter while Redis was down", answered)
	}
}
