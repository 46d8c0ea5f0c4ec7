package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/queue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newStore returns a memstore without a janitor that reads time from clock,
// closed when the test ends. With a nil clock created inside a synctest
// bubble it runs on the bubble's fake time.
func newStore(tb testing.TB, clock sluice.Clock) *memstore.Store {
	tb.Helper()
	s := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	tb.Cleanup(func() { s.Close() })
	return s
}

func newQueue(tb testing.TB, l sluice.Limiter, cfg queue.Config) *queue.Queue {
	tb.Helper()
	q, err := queue.New(l, cfg)
	if err != nil {
		tb.Fatalf("New(%+v): %v", cfg, err)
	}
	return q
}

// meterOnly hides every method of a Limiter but AllowN, so it is no Refunder.
type meterOnly struct{ sluice.Limiter }

// counting counts a Limiter's calls and tracks how many admitted requests are
// still in the queue (admitted, not yet done).
type counting struct {
	l                 *memstore.Store
	allows, refunds   atomic.Int64
	inQueue, maxQueue atomic.Int64
}

func (c *counting) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	c.allows.Add(1)
	res, err := c.l.AllowN(ctx, key, lim, cost)
	if res.Allowed {
		n := c.inQueue.Add(1)
		for m := c.maxQueue.Load(); n > m && !c.maxQueue.CompareAndSwap(m, n); m = c.maxQueue.Load() {
		}
	}
	return res, err
}

func (c *counting) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	c.refunds.Add(1)
	c.inQueue.Add(-1)
	return c.l.RefundN(ctx, key, lim, cost)
}

// done marks an admitted request as having left the queue.
func (c *counting) done() { c.inQueue.Add(-1) }

// failingRefund is a Refunder whose refunds fail.
type failingRefund struct{ sluice.Limiter }

var errBackend = errors.New("backend down")

func (failingRefund) RefundN(context.Context, string, sluice.Limit, int) error { return errBackend }

// outcome is what one waiter saw: its index, the Decision, the error, and
// when (since the start of the test) Wait returned.
type outcome struct {
	i   int
	d   queue.Decision
	err error
	at  time.Duration
}

func (o outcome) String() string {
	s := fmt.Sprintf("#%d %v at %v", o.i, o.d.Status(), o.at)
	if o.err != nil {
		s += " (" + o.err.Error() + ")"
	}
	return s
}

// launch starts one waiter per context, one after another, letting each
// reach its decision before starting the next, so that they arrive in order
// at the same instant. It returns the channel their outcomes arrive on.
func launch(q *queue.Queue, key string, start time.Time, ctxs ...context.Context) <-chan outcome {
	ch := make(chan outcome, len(ctxs))
	for i, ctx := range ctxs {
		go func() {
			d, err := q.Wait(ctx, key)
			ch <- outcome{i, d, err, time.Since(start)}
		}()
		synctest.Wait()
	}
	return ch
}

func backgrounds(n int) []context.Context {
	ctxs := make([]context.Context, n)
	for i := range ctxs {
		ctxs[i] = context.Background()
	}
	return ctxs
}

func collect(ch <-chan outcome, n int) []outcome {
	out := make([]outcome, n)
	for i := range out {
		out[i] = <-ch
	}
	return out
}

// TestNGINXBurst runs NGINX's burst cases: seven requests at once at
// 1r/s with burst=5, with delays on, with nodelay and with delay=3. It checks
// the order in which the waiters return and when, on the bubble's fake clock.
func TestNGINXBurst(t *testing.T) {
	type want struct {
		i      int
		status queue.Status
		at     time.Duration
	}
	p, d, r := queue.Passed, queue.Delayed, queue.Rejected
	s := time.Second
	tests := []struct {
		name string
		cfg  queue.Config
		want []want // in the order the waiters return
	}{
		{"56 burst=5", queue.Config{Rate: 1, Period: s, Burst: 5},
			[]want{{0, p, 0}, {6, r, 0}, {1, d, 1 * s}, {2, d, 2 * s}, {3, d, 3 * s}, {4, d, 4 * s}, {5, d, 5 * s}}},
		{"57 burst=5 nodelay", queue.Config{Rate: 1, Period: s, Burst: 5, NoDelay: true},
			[]want{{0, p, 0}, {1, p, 0}, {2, p, 0}, {3, p, 0}, {4, p, 0}, {5, p, 0}, {6, r, 0}}},
		{"58 burst=5 delay=3", queue.Config{Rate: 1, Period: s, Burst: 5, Delay: 3},
			[]want{{0, p, 0}, {1, p, 0}, {2, p, 0}, {3, p, 0}, {6, r, 0}, {4, d, 1 * s}, {5, d, 2 * s}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newQueue(t, newStore(t, nil), tt.cfg)
				start := time.Now()
				got := collect(launch(q, "k", start, backgrounds(7)...), 7)
				for n, o := range got {
					w := tt.want[n]
					if o.i != w.i || o.d.Status() != w.status || o.at != w.at || o.d.Delay != w.at {
						t.Errorf("return %d: %v (delay %v), want #%d %v at %v", n, o, o.d.Delay, w.i, w.status, w.at)
					}
					switch w.status {
					case r:
						if o.err != queue.ErrRejected {
							t.Errorf("#%d: err = %v, want ErrRejected", o.i, o.err)
						}
						if o.d.RetryAfter != time.Second {
							t.Errorf("#%d: RetryAfter = %v, want 1s", o.i, o.d.RetryAfter)
						}
					default:
						if o.err != nil {
							t.Errorf("#%d: err = %v", o.i, o.err)
						}
					}
				}
			})
		})
	}
}

// TestNGINXNoBurst runs NGINX's no-burst cases through the queue:
// without burst a request passes at once or is rejected, never delayed.
func TestNGINXNoBurst(t *testing.T) {
	type step struct {
		at   time.Duration // since the first request
		pass bool
	}
	ms := time.Millisecond
	tests := []struct {
		name  string
		cfg   queue.Config
		steps []step
	}{
		{"55 1r/s", queue.Config{Rate: 1, Period: time.Second},
			[]step{{0, true}, {0, false}, {500 * ms, false}, {1000 * ms, true}}},
		{"59 30r/m", queue.Config{Rate: 30, Period: time.Minute},
			[]step{{0, true}, {1000 * ms, false}, {2000 * ms, true}}},
		{"60 10r/s", queue.Config{Rate: 10, Period: time.Second},
			[]step{{0, true}, {100 * ms, true}, {150 * ms, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newQueue(t, newStore(t, nil), tt.cfg)
				start := time.Now()
				for i, s := range tt.steps {
					time.Sleep(s.at - time.Since(start))
					d, err := q.Wait(context.Background(), "k")
					if took := time.Since(start) - s.at; took != 0 {
						t.Errorf("step %d: Wait took %v, want no wait", i, took)
					}
					if s.pass {
						if err != nil || d.Status() != queue.Passed {
							t.Errorf("step %d at %v: Wait = %v, %v, want PASSED", i, s.at, d.Status(), err)
						}
						continue
					}
					if err != queue.ErrRejected || d.Status() != queue.Rejected || d.RetryAfter <= 0 {
						t.Errorf("step %d at %v: Wait = %v (retry after %v), %v, want REJECTED", i, s.at, d.Status(), d.RetryAfter, err)
					}
				}
			})
		})
	}
}

// TestRetryAfter checks that a rejected waiter that sleeps RetryAfter is
// admitted when it comes back.
func TestRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, newStore(t, nil), queue.Config{Rate: 30, Period: time.Minute, Burst: 2})
		ctx := context.Background()
		for range 3 {
			if d, err := q.Reserve(ctx, "k"); err != nil || !d.Allowed {
				t.Fatalf("Reserve = %v, %v", d.Status(), err)
			}
		}
		d, err := q.Wait(ctx, "k")
		if err != queue.ErrRejected || d.RetryAfter != 2*time.Second {
			t.Fatalf("Wait = %v, RetryAfter %v, want ErrRejected, 2s", err, d.RetryAfter)
		}
		time.Sleep(d.RetryAfter - time.Millisecond)
		if d, err := q.Reserve(ctx, "k"); err != nil || d.Allowed {
			t.Fatalf("1ms early: Reserve = %v, %v, want REJECTED", d.Status(), err)
		}
		time.Sleep(time.Millisecond)
		// Admitted behind the two still queued: they leave at 2s and 4s.
		start := time.Now()
		d, err = q.Wait(ctx, "k")
		if err != nil || d.Delay != 4*time.Second || time.Since(start) != 4*time.Second {
			t.Fatalf("on time: Wait = %v, delay %v after %v, %v; want DELAYED 4s", d.Status(), d.Delay, time.Since(start), err)
		}
	})
}

// TestCancelGivesPlaceBack cancels the fourth of six queued waiters and
// checks that it returns at once with its context's error and that its place
// goes to a request that would otherwise be rejected, unless the Limiter
// cannot refund.
func TestCancelGivesPlaceBack(t *testing.T) {
	for _, tt := range []struct {
		name     string
		cancel   bool
		refunder bool
	}{
		{"cancelled", true, true},
		{"not cancelled", false, true},
		{"cancelled without refunder", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var l sluice.Limiter = newStore(t, nil)
				if !tt.refunder {
					l = meterOnly{l}
				}
				q := newQueue(t, l, queue.Config{Rate: 1, Period: time.Second, Burst: 5})
				ctxs := backgrounds(6)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				ctxs[3] = ctx
				start := time.Now()
				ch := launch(q, "k", start, ctxs...)
				if o := <-ch; o.i != 0 || o.err != nil {
					t.Fatalf("first return: %v, want #0 PASSED", o)
				}

				time.Sleep(500 * time.Millisecond)
				if tt.cancel {
					cancel()
					synctest.Wait()
					select {
					case o := <-ch:
						if o.i != 3 || o.at != 500*time.Millisecond || o.err != context.Canceled || o.d.Delay != 3*time.Second {
							t.Fatalf("after cancel: %v (delay %v), want #3 at 500ms with context.Canceled", o, o.d.Delay)
						}
					default:
						t.Fatal("cancelled waiter did not return")
					}
				}

				late := launch(q, "k", start, context.Background())
				if !tt.cancel || !tt.refunder {
					if o := <-late; o.err != queue.ErrRejected || o.at != 500*time.Millisecond {
						t.Fatalf("late request: %v, want REJECTED at 500ms", o)
					}
					queued := 5
					if tt.cancel {
						queued = 4
					}
					for _, o := range collect(ch, queued) {
						if o.err != nil || o.at != time.Duration(o.i)*time.Second {
							t.Errorf("queued waiter: %v, want done at %ds", o, o.i)
						}
					}
					return
				}
				// The bucket held 5.5 requests at 500ms, 4.5 after the
				// refund: the late request waits until 5s.
				got := collect(ch, 4)
				got = append(got, <-late)
				want := []time.Duration{1, 2, 4, 5}
				for n, o := range got[:4] {
					if o.err != nil || o.at != want[n]*time.Second {
						t.Errorf("queued waiter: %v, want done at %vs", o, want[n])
					}
				}
				if o := got[4]; o.err != nil || o.at != 5*time.Second || o.d.Delay != 4500*time.Millisecond {
					t.Errorf("late request: %v (delay %v), want DELAYED 4.5s, done at 5s", o, o.d.Delay)
				}
			})
		})
	}
}

// TestWaitDoneContext checks that a context that has already ended stops
// Wait before it asks the Limiter.
func TestWaitDoneContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &counting{l: newStore(t, nil)}
		q := newQueue(t, c, queue.Config{Rate: 1, Period: time.Second, Burst: 5})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d, err := q.Wait(ctx, "k")
		if err != context.Canceled || d != (queue.Decision{}) {
			t.Fatalf("Wait(cancelled) = %+v, %v, want zero Decision, context.Canceled", d, err)
		}
		ctx, cancel = context.WithDeadline(context.Background(), time.Now())
		defer cancel()
		if _, err := q.Wait(ctx, "k"); err != context.DeadlineExceeded {
			t.Fatalf("Wait(expired) = %v, want context.DeadlineExceeded", err)
		}
		if n := c.allows.Load(); n != 0 {
			t.Fatalf("the Limiter was asked %d times, want 0", n)
		}
	})
}

// TestWaitDeadline checks that a wait the deadline would cut short fails at
// once, without waiting, and gives its place back.
func TestWaitDeadline(t *testing.T) {
	ms := time.Millisecond
	for _, tt := range []struct {
		timeout time.Duration
		ok      bool
	}{
		{2500 * ms, false},
		{3000 * ms, false}, // the deadline would arrive with the turn: no time left to run
		{3001 * ms, true},
	} {
		t.Run(tt.timeout.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &counting{l: newStore(t, nil)}
				q := newQueue(t, c, queue.Config{Rate: 1, Period: time.Second, Burst: 5})
				for range 3 {
					q.Reserve(context.Background(), "k")
				}
				ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
				defer cancel()
				start := time.Now()
				d, err := q.Wait(ctx, "k")
				took := time.Since(start)
				if tt.ok {
					if err != nil || took != 3*time.Second {
						t.Fatalf("Wait = %v after %v, want nil after 3s", err, took)
					}
					return
				}
				if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "queue: ") || took != 0 {
					t.Fatalf("Wait = %v after %v, want an immediate queue error wrapping context.DeadlineExceeded", err, took)
				}
				if d.Delay != 3*time.Second || c.refunds.Load() != 1 {
					t.Fatalf("Delay = %v, refunds = %d, want 3s, 1", d.Delay, c.refunds.Load())
				}
				// The place was given back: the next request gets it.
				if d, err := q.Reserve(context.Background(), "k"); err != nil || d.Delay != 3*time.Second {
					t.Fatalf("next Reserve = %v, delay %v, %v, want DELAYED 3s", d.Status(), d.Delay, err)
				}
			})
		})
	}
}

// TestWaitRefundError checks that a failed refund is reported alongside the
// context's error.
func TestWaitRefundError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, failingRefund{newStore(t, nil)}, queue.Config{Rate: 1, Period: time.Second, Burst: 1})
		q.Reserve(context.Background(), "k")
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := q.Wait(ctx, "k")
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errBackend) {
			t.Fatalf("Wait = %v, want both context.DeadlineExceeded and the refund's error", err)
		}

		ctx, cancel = context.WithCancel(context.Background())
		ch := make(chan error, 1)
		q2 := newQueue(t, failingRefund{newStore(t, nil)}, queue.Config{Rate: 1, Period: time.Second, Burst: 1})
		q2.Reserve(ctx, "k")
		go func() { _, err := q2.Wait(ctx, "k"); ch <- err }()
		synctest.Wait()
		cancel()
		if err := <-ch; !errors.Is(err, context.Canceled) || !errors.Is(err, errBackend) {
			t.Fatalf("Wait = %v, want both context.Canceled and the refund's error", err)
		}
	})
}

// TestManyWaiters starts 1,000 waiters on one key at once: Burst+1 are
// admitted, each waits its own turn, the rest are rejected at once, and the
// queue never holds more than Burst+1.
func TestManyWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, burst = 1000, 9
		c := &counting{l: newStore(t, nil)}
		q := newQueue(t, c, queue.Config{Rate: 1, Period: time.Second, Burst: burst})
		start := time.Now()
		ch := make(chan outcome, n)
		for i := range n {
			go func() {
				d, err := q.Wait(context.Background(), "k")
				if err == nil {
					c.done()
				}
				ch <- outcome{i, d, err, time.Since(start)}
			}()
		}
		var admitted []outcome
		for _, o := range collect(ch, n) {
			switch {
			case o.err == nil:
				admitted = append(admitted, o)
				if o.at != o.d.Delay {
					t.Errorf("%v: returned after %v, want its delay %v", o, o.at, o.d.Delay)
				}
			case o.err != queue.ErrRejected || o.at != 0:
				t.Errorf("%v: want REJECTED at 0s", o)
			}
		}
		if len(admitted) != burst+1 {
			t.Fatalf("%d admitted, want %d", len(admitted), burst+1)
		}
		for k, o := range admitted {
			if o.at != time.Duration(k)*time.Second {
				t.Errorf("return %d of the admitted: %v, want at %ds", k, o, k)
			}
		}
		if m := c.maxQueue.Load(); m > burst+1 {
			t.Errorf("the queue held %d, want at most %d", m, burst+1)
		}
	})
}

// TestSteadyOutflow keeps 100 clients sending through a queue for a while,
// each retrying after RetryAfter when rejected, and checks that requests
// leave the queue no closer together than the rate allows, that none waits
// longer than Burst turns and that the queue never holds more than Burst+1.
func TestSteadyOutflow(t *testing.T) {
	for _, cfg := range []queue.Config{
		{Rate: 1, Period: time.Second, Burst: 5},
		{Rate: 10, Period: time.Second, Burst: 20},
		{Rate: 30, Period: time.Minute, Burst: 3},
	} {
		t.Run(fmt.Sprintf("%d per %v burst %d", cfg.Rate, cfg.Period, cfg.Burst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const clients, each = 100, 3
				c := &counting{l: newStore(t, nil)}
				q := newQueue(t, c, cfg)
				interval := cfg.Period / time.Duration(cfg.Rate)
				var (
					mu   sync.Mutex
					left []time.Time
					wg   sync.WaitGroup
				)
				for i := range clients {
					wg.Go(func() {
						key := "k"
						for sent := 0; sent < each; {
							d, err := q.Wait(context.Background(), key)
							if err == queue.ErrRejected {
								time.Sleep(d.RetryAfter + time.Duration(i)*time.Millisecond)
								continue
							}
							if err != nil {
								t.Errorf("client %d: %v", i, err)
								return
							}
							if d.Delay > time.Duration(cfg.Burst)*interval {
								t.Errorf("client %d waited %v, more than %d turns", i, d.Delay, cfg.Burst)
							}
							c.done()
							mu.Lock()
							left = append(left, time.Now())
							mu.Unlock()
							sent++
						}
					})
				}
				wg.Wait()
				if len(left) != clients*each {
					t.Fatalf("%d requests left the queue, want %d", len(left), clients*each)
				}
				slices.SortFunc(left, time.Time.Compare)
				for k := 1; k < len(left); k++ {
					if gap := left[k].Sub(left[k-1]); gap < interval {
						t.Fatalf("requests %d and %d left %v apart, want at least %v", k-1, k, gap, interval)
					}
				}
				if m := c.maxQueue.Load(); m > int64(cfg.Burst+1) {
					t.Errorf("the queue held %d, want at most %d", m, cfg.Burst+1)
				}
			})
		})
	}
}

// TestJanitorEndsWithClose runs a queue over a store with its janitor,
// which must end with Close inside the bubble.
func TestJanitorEndsWithClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.Config{})
		defer s.Close()
		q := newQueue(t, s, queue.Config{Rate: 1, Period: time.Minute, Burst: 1})
		start := time.Now()
		for range 2 {
			if _, err := q.Wait(context.Background(), "k"); err != nil {
				t.Fatal(err)
			}
		}
		// 1r/m is 16 milli-requests per second, as NGINX truncates it: a
		// request takes 62.5s to leak out.
		if got := time.Since(start); got != 62500*time.Millisecond {
			t.Fatalf("the second request left at %v, want 1m2.5s", got)
		}
		time.Sleep(2 * time.Minute)
		if n := s.Len(); n != 0 {
			t.Fatalf("the janitor left %d keys, want 0", n)
		}
	})
}

// TestDecisionCancel checks Cancel on admitted, rejected and zero Decisions.
func TestDecisionCancel(t *testing.T) {
	ctx := context.Background()
	c := &counting{l: newStore(t, clocktest.New())}
	q := newQueue(t, c, queue.Config{Rate: 1, Period: time.Second, Burst: 2})
	var ds []queue.Decision
	for range 4 {
		d, err := q.Reserve(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	if ds[3].Allowed {
		t.Fatal("the fourth request was admitted")
	}
	if err := ds[3].Cancel(ctx); err != nil || c.refunds.Load() != 0 {
		t.Fatalf("Cancel(rejected) = %v with %d refunds, want nil and none", err, c.refunds.Load())
	}
	if err := (queue.Decision{}).Cancel(ctx); err != nil || c.refunds.Load() != 0 {
		t.Fatalf("Cancel(zero) = %v with %d refunds, want nil and none", err, c.refunds.Load())
	}
	if err := ds[2].Cancel(ctx); err != nil || c.refunds.Load() != 1 {
		t.Fatalf("Cancel(admitted) = %v with %d refunds, want nil and 1", err, c.refunds.Load())
	}
	if d, err := q.Reserve(ctx, "k"); err != nil || d.Delay != 2*time.Second {
		t.Fatalf("after Cancel: Reserve = %v, delay %v, %v; want DELAYED 2s", d.Status(), d.Delay, err)
	}
	if err := (queue.Decision{}).Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	fq := newQueue(t, failingRefund{c.l}, queue.Config{Rate: 1, Period: time.Second, Burst: 2})
	d, err := fq.Reserve(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Cancel(ctx); !errors.Is(err, errBackend) || !strings.HasPrefix(err.Error(), "queue: ") {
		t.Fatalf("Cancel with a failing refund = %v, want a queue error wrapping the backend's", err)
	}
}

// nginx is a model of one key of NGINX's limit_req, written from the
// accounting (ngx_http_limit_req_module.c), to compare Decision.Delay with.
type nginx struct {
	rate, burst, delay int64 // milli-requests per second; ×1000
	excess, last       int64
	used               bool
}

// request returns whether a request at nowMs passes, its delay in ms, and
// whether it is among the first delay= excess requests that proceed at once.
func (n *nginx) request(nowMs int64) (ok bool, delay int64, early bool) {
	excess, ms := int64(0), int64(1)
	if n.used {
		ms = nowMs - n.last
		if ms < -60000 {
			ms = 1
		} else if ms < 0 {
			ms = 0
		}
		excess = max(n.excess-n.rate*ms/1000+1000, 0)
	}
	if excess > n.burst {
		return false, 0, false
	}
	n.excess, n.used = excess, true
	if ms != 0 {
		n.last = nowMs
	}
	if excess <= n.delay {
		return true, 0, true
	}
	return true, (excess - n.delay) * 1000 / n.rate, false
}

// TestDelayMatchesNGINX compares the queue over memstore with the model of
// NGINX on random arrivals: the same requests pass, and each proceeds on
// the millisecond NGINX would let it, or one millisecond later. For rates
// whose times are whole milliseconds it must be the same millisecond.
func TestDelayMatchesNGINX(t *testing.T) {
	type rate struct {
		n      int
		period time.Duration
		exact  bool
	}
	rates := []rate{
		{1, time.Second, true}, {2, time.Second, true}, {10, time.Second, true},
		{100, time.Second, true}, {1000, time.Second, true}, {30, time.Minute, true},
		{3, time.Second, false}, {7, time.Second, false}, {1, time.Minute, false},
		{45, time.Minute, false}, {999, time.Second, false}, {1, 3 * time.Second, false},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, r := range rates {
		for _, subMs := range []bool{false, true} {
			name := fmt.Sprintf("%d per %v sub-ms %v", r.n, r.period, subMs)
			t.Run(name, func(t *testing.T) {
				for trial := range 50 {
					burst := rng.IntN(10)
					cfg := queue.Config{Rate: r.n, Period: r.period, Burst: burst, Delay: rng.IntN(burst + 1)}
					if rng.IntN(4) == 0 {
						cfg.Delay = 0
					}
					clock := clocktest.New()
					q := newQueue(t, newStore(t, clock), cfg)
					milli := int64(float64(r.n) * 1e12 / float64(r.period))
					ng := &nginx{rate: milli, burst: int64(burst) * 1000, delay: int64(cfg.Delay) * 1000}
					interval := int64(1e6 / milli) // ms per request
					for i := range 200 {
						clock.Advance(time.Duration(rng.Int64N(2*interval/max(int64(burst), 1)+2)) * time.Millisecond)
						if subMs {
							now := clock.Now()
							clock.Set(now.Truncate(time.Millisecond).Add(time.Duration(rng.Int64N(1e6))))
						}
						now := clock.Now()
						nowMs := now.UnixMilli()
						ok, delay, early := ng.request(nowMs)
						d, err := q.Reserve(context.Background(), "k")
						if err != nil {
							t.Fatal(err)
						}
						if d.Allowed != ok {
							t.Fatalf("trial %d %+v, request %d at %dms: Allowed = %v, NGINX %v", trial, cfg, i, nowMs%1e6, d.Allowed, ok)
						}
						if !ok {
							continue
						}
						if early && d.Delay != 0 {
							t.Fatalf("trial %d %+v, request %d at %dms: delay %v, want none within delay=%d",
								trial, cfg, i, nowMs%1e6, d.Delay, cfg.Delay)
						}
						ours := now.Add(d.Delay)
						theirs := time.UnixMilli(nowMs + delay)
						late := ours.Sub(theirs)
						if late < 0 || late > time.Millisecond || (r.exact && !subMs && late != 0) {
							t.Fatalf("trial %d %+v, request %d at %dms: proceeds %v after NGINX (delay %v, NGINX %dms)",
								trial, cfg, i, nowMs%1e6, late, d.Delay, delay)
						}
					}
				}
			})
		}
	}
}

// TestNoWaitConfigs checks configurations in which nothing ever waits.
func TestNoWaitConfigs(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []queue.Config{
		{Rate: 1, Period: time.Second},
		{Rate: 1, Period: time.Second, Burst: 4, Delay: 4},
		{Rate: 1, Period: time.Second, Burst: 4, NoDelay: true},
	} {
		q := newQueue(t, newStore(t, clocktest.New()), cfg)
		for i := range cfg.Burst + 2 {
			d, err := q.Reserve(ctx, "k")
			wantOK := i <= cfg.Burst
			if err != nil || d.Allowed != wantOK || d.Delay != 0 {
				t.Errorf("%+v: request %d: %v, delay %v, %v; want allowed %v, no delay", cfg, i, d.Status(), d.Delay, err, wantOK)
			}
		}
	}
}

func TestCost(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, newStore(t, clocktest.New()), queue.Config{Rate: 1, Period: time.Second, Burst: 5})
	for _, step := range []struct {
		cost  int
		ok    bool
		delay time.Duration
	}{
		{3, true, 2 * time.Second}, // three requests at once: the last of them waits 2s
		{2, true, 4 * time.Second},
		{2, false, 0},
		{1, true, 5 * time.Second},
	} {
		d, err := q.ReserveN(ctx, "k", step.cost)
		if err != nil || d.Allowed != step.ok || d.Delay != step.delay {
			t.Errorf("ReserveN(%d) = %v, delay %v, %v; want allowed %v, delay %v", step.cost, d.Status(), d.Delay, err, step.ok, step.delay)
		}
	}
}

func TestBadConfig(t *testing.T) {
	s := time.Second
	for _, tt := range []struct {
		cfg  queue.Config
		want string
	}{
		{queue.Config{}, "rate 0 must be at least 1"},
		{queue.Config{Rate: -1, Period: s}, "rate -1 must be at least 1"},
		{queue.Config{Rate: 1}, "period 0s must be positive"},
		{queue.Config{Rate: 1, Period: -s}, "period -1s must be positive"},
		{queue.Config{Rate: 1, Period: s, Burst: -1}, "burst -1 must not be negative"},
		{queue.Config{Rate: 1, Period: s, Burst: math.MaxInt}, "is too large"},
		{queue.Config{Rate: 1, Period: s, Burst: 2, Delay: -1}, "delay -1 must not be negative"},
		{queue.Config{Rate: 1, Period: s, Burst: 2, Delay: 3}, "delay 3 exceeds burst 2"},
		{queue.Config{Rate: 1, Period: s, Burst: 2, Delay: 1, NoDelay: true}, "nodelay and delay 1 are exclusive"},
		{queue.Config{Rate: 1, Period: 10000 * time.Hour}, "below 0.001 per second"},
		{queue.Config{Rate: 1, Period: time.Minute, Burst: math.MaxInt32 - 1}, "takes longer than"},
		{queue.Config{Rate: 1, Period: sluice.MaxPeriod + 1}, "exceeds the maximum"},
	} {
		err := tt.cfg.Validate()
		_, nerr := queue.New(meterOnly{}, tt.cfg)
		for _, e := range []error{err, nerr} {
			if !errors.Is(e, sluice.ErrInvalidLimit) || !strings.HasPrefix(e.Error(), "queue: ") || !strings.Contains(e.Error(), tt.want) {
				t.Errorf("%+v: error %v, want a queue error wrapping ErrInvalidLimit that says %q", tt.cfg, e, tt.want)
			}
		}
	}
	if _, err := queue.New(nil, queue.Config{Rate: 1, Period: s}); !errors.Is(err, sluice.ErrInvalidLimit) || !strings.Contains(err.Error(), "nil limiter") {
		t.Errorf("New(nil) = %v, want an error about the nil limiter", err)
	}
	if err := (queue.Config{Rate: 1, Period: s}).Validate(); err != nil {
		t.Errorf("Validate(no burst) = %v", err)
	}
}

func TestBadInput(t *testing.T) {
	q := newQueue(t, newStore(t, clocktest.New()), queue.Config{Rate: 1, Period: time.Second, Burst: 2})
	ctx := context.Background()
	for _, tt := range []struct {
		key  string
		cost int
		want error
	}{
		{"k", 0, sluice.ErrInvalidCost},
		{"k", -1, sluice.ErrInvalidCost},
		{"k", 4, sluice.ErrCostExceedsCapacity},
		{"", 1, sluice.ErrInvalidKey},
		{strings.Repeat("k", sluice.MaxKeyLen+1), 1, sluice.ErrInvalidKey},
	} {
		if d, err := q.WaitN(ctx, tt.key, tt.cost); !errors.Is(err, tt.want) || d.Allowed {
			t.Errorf("WaitN(%.8q, %d) = %v, %v, want %v", tt.key, tt.cost, d.Status(), err, tt.want)
		}
		if d, err := q.ReserveN(ctx, tt.key, tt.cost); !errors.Is(err, tt.want) || d.Allowed {
			t.Errorf("ReserveN(%.8q, %d) = %v, %v, want %v", tt.key, tt.cost, d.Status(), err, tt.want)
		}
	}
	// Cost Burst+1 fits: the meter's capacity counts the first request.
	if d, err := q.ReserveN(ctx, "k", 3); err != nil || !d.Allowed {
		t.Errorf("ReserveN(3) = %v, %v, want admitted", d.Status(), err)
	}
}

func TestLimit(t *testing.T) {
	q := newQueue(t, meterOnly{}, queue.Config{Rate: 30, Period: time.Minute, Burst: 5, Delay: 2})
	want := sluice.Limit{Algorithm: sluice.LeakyBucket, Rate: 30, Period: time.Minute, Burst: 6}
	if got := q.Limit(); got != want {
		t.Fatalf("Limit() = %v, want %v", got, want)
	}
}

func TestStatusString(t *testing.T) {
	for s, want := range map[queue.Status]string{
		queue.Passed: "PASSED", queue.Delayed: "DELAYED", queue.Rejected: "REJECTED", 7: "Status(7)",
	} {
		if got := s.String(); got != want {
			t.Errorf("Status(%d).String() = %q, want %q", uint8(s), got, want)
		}
	}
}

func BenchmarkReserve(b *testing.B) {
	ctx := context.Background()
	keys := benchKeys(1024)
	b.Run("admitted", func(b *testing.B) {
		// So many keys with so large a burst that every request is admitted.
		q := newQueue(b, newStore(b, nil), queue.Config{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000})
		for _, k := range keys {
			q.Reserve(ctx, k)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if d, err := q.Reserve(ctx, keys[i%len(keys)]); err != nil || !d.Allowed {
				b.Fatal(d.Status(), err)
			}
			i++
		}
	})
	b.Run("rejected", func(b *testing.B) {
		q := newQueue(b, newStore(b, nil), queue.Config{Rate: 1, Period: time.Minute})
		q.Reserve(ctx, "bench")
		b.ReportAllocs()
		for b.Loop() {
			q.Reserve(ctx, "bench")
		}
	})
	b.Run("parallel", func(b *testing.B) {
		q := newQueue(b, newStore(b, nil), queue.Config{Rate: 1, Period: time.Second, Burst: 5})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				q.Reserve(ctx, "bench")
			}
		})
	})
}

// BenchmarkWait measures the Wait paths that return without sleeping.
func BenchmarkWait(b *testing.B) {
	ctx := context.Background()
	b.Run("nodelay", func(b *testing.B) {
		keys := benchKeys(1024)
		q := newQueue(b, newStore(b, nil), queue.Config{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000, NoDelay: true})
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := q.Wait(ctx, keys[i%len(keys)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("rejected", func(b *testing.B) {
		q := newQueue(b, newStore(b, nil), queue.Config{Rate: 1, Period: time.Minute})
		q.Wait(ctx, "bench")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := q.Wait(ctx, "bench"); err != queue.ErrRejected {
				b.Fatal(err)
			}
		}
	})
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench:%d", i)
	}
	return keys
}
