package redisstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
)

// fakeRedis answers batches in place of Redis, after latency (of the
// bubble's clock), and records what it was sent.
type fakeRedis struct {
	latency time.Duration
	fail    error // the outcome of every decision, if set

	mu    sync.Mutex
	sizes []int      // decisions per call, in order
	keys  [][]string // the keys of each call
	at    []time.Duration
	start time.Time
}

func (f *fakeRedis) call(b *batch) {
	f.mu.Lock()
	f.sizes = append(f.sizes, len(b.live))
	f.keys = append(f.keys, append([]string(nil), b.keys...))
	f.at = append(f.at, time.Since(f.start))
	f.mu.Unlock()
	time.Sleep(f.latency)
	b.replied = true
	for j, i := range b.live {
		e := &b.entries[i]
		if f.fail != nil {
			e.err = f.fail
			continue
		}
		// Remaining says where in its call the decision was, to check
		// that each caller gets its own outcome.
		e.res = sluice.Result{Allowed: true, Remaining: j}
	}
}

// alone answers a decision sent alone, as a call of one.
func (f *fakeRedis) alone(ctx context.Context, key string) (sluice.Result, error) {
	f.mu.Lock()
	f.sizes = append(f.sizes, 1)
	f.keys = append(f.keys, []string{key})
	f.at = append(f.at, time.Since(f.start))
	f.mu.Unlock()
	select {
	case <-time.After(f.latency):
	case <-ctx.Done():
		return sluice.Result{}, ctx.Err()
	}
	return sluice.Result{Allowed: true}, f.fail
}

// newFake returns a coalescer on f.
func newFake(f *fakeRedis, wait time.Duration, cluster bool) *coalescer {
	c := newCoalescerCall(wait, cluster, f.call)
	c.fakeAlone = f.alone
	return c
}

func (f *fakeRedis) calls() ([]int, []time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.sizes...), append([]time.Duration(nil), f.at...)
}

// fixedArgs are a fixed window's five script arguments.
var fixedArgs = []string{"take", "", "1000000", "10", "1"}

func decideFake(t *testing.T, c *coalescer, ctx context.Context, key string) (sluice.Result, error) {
	t.Helper()
	return c.do(ctx, sluice.FixedWindow, fixedArgs, "p:fw:{", key, "}")
}

// busyLane returns a coalescer with wait on a fake Redis that answers after
// latency, a decision on each of first (default "slow") already with Redis,
// so that the decisions after them gather in batches, and the group those
// decisions run in, for the test to add its own to and wait on. The
// coalescer is closed when the test ends.
func busyLane(t *testing.T, latency, wait time.Duration, cluster bool, first ...string) (*coalescer, *fakeRedis, *sync.WaitGroup) {
	f := &fakeRedis{latency: latency, start: time.Now()}
	c := newFake(f, wait, cluster)
	t.Cleanup(c.close)
	if len(first) == 0 {
		first = []string{"slow"}
	}
	wg := &sync.WaitGroup{}
	for _, k := range first {
		wg.Go(func() { decideFake(t, c, t.Context(), k) })
	}
	synctest.Wait() // they are with Redis
	return c, f, wg
}

// decideEach starts a decision on each of keys in wg.
func decideEach(t *testing.T, c *coalescer, wg *sync.WaitGroup, keys ...string) {
	for _, k := range keys {
		wg.Go(func() { decideFake(t, c, t.Context(), k) })
	}
}

// numbered returns n keys, k0 to k(n-1).
func numbered(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	return keys
}

// A decision with nothing else going on is sent at once: coalescing costs
// a lone caller no wait.
func TestCoalesceLoneDecisionDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{latency: time.Millisecond, start: time.Now()}
		c := newFake(f, time.Second, false)
		defer c.close()
		for i := range 3 {
			if _, err := decideFake(t, c, t.Context(), "k"+strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
		sizes, at := f.calls()
		want := []time.Duration{0, time.Millisecond, 2 * time.Millisecond}
		if len(sizes) != 3 || at[0] != want[0] || at[1] != want[1] || at[2] != want[2] {
			t.Errorf("calls of %v sent at %v, want 3 calls of 1 at %v (none waiting for the 1 s wait)", sizes, at, want)
		}
	})
}

// Decisions made while another batch of their lane is with Redis gather in
// one batch, which leaves as soon as that batch is answered: one call for
// all of them, and each caller gets its own outcome.
func TestCoalesceGathersWhileLaneIsBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, f, wg := busyLane(t, time.Millisecond, time.Second, false)
		got := make([]sluice.Result, 10)
		for i := range got {
			wg.Go(func() {
				r, err := decideFake(t, c, t.Context(), "k"+strconv.Itoa(i))
				if err != nil {
					t.Error(err)
				}
				got[i] = r
			})
		}
		wg.Wait()
		sizes, at := f.calls()
		if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != 10 || at[1] != time.Millisecond {
			t.Fatalf("calls of %v at %v, want [1 10] at [0 1ms]", sizes, at)
		}
		seen := map[int]bool{}
		for _, r := range got {
			seen[r.Remaining] = true
		}
		if len(seen) != 10 {
			t.Errorf("the 10 callers got %v: want each its own place in the call", got)
		}
	})
}

// A batch whose lane stays busy leaves after the wait, not later.
func TestCoalesceWaitBoundsTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, f, wg := busyLane(t, time.Second, 20*time.Microsecond, false)
		decideEach(t, c, wg, numbered(3)...)
		wg.Wait()
		sizes, at := f.calls()
		if len(sizes) != 2 || sizes[1] != 3 || at[1] != 20*time.Microsecond {
			t.Errorf("calls of %v at %v, want [1 3] at [0 20µs]", sizes, at)
		}
	})
}

// A full batch leaves at once, and the next decision opens another.
func TestCoalesceFullBatchLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, f, wg := busyLane(t, time.Second, time.Hour, false)
		decideEach(t, c, wg, numbered(maxBatch+1)...)
		wg.Wait()
		sizes, at := f.calls()
		if len(sizes) != 3 || sizes[1] != maxBatch || at[1] != 0 || sizes[2] != 1 || at[2] != time.Second {
			t.Errorf("calls of %v at %v, want [1 %d 1] at [0 0 1s]", sizes, at, maxBatch)
		}
	})
}

// A batch's keys are bounded in bytes as well as in number.
func TestCoalesceBatchKeyBytesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, f, wg := busyLane(t, time.Second, time.Hour, false)
		long := string(make([]byte, sluice.MaxKeyLen))
		decideEach(t, c, wg, long, long, long, long, long)
		wg.Wait()
		sizes, _ := f.calls()
		if len(sizes) != 3 || sizes[1] != 4 || sizes[2] != 1 {
			t.Errorf("calls of %v, want [1 4 1]: a batch closes at %d key bytes", sizes, maxBatchKeyBytes)
		}
	})
}

// On a Cluster, decisions on keys of different hash slots never share a
// call; keys of one slot do.
func TestCoalesceGroupsBySlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, f, wg := busyLane(t, time.Millisecond, time.Second, true, "a", "b")
		decideEach(t, c, wg, "a", "b", "a", "b", "a")
		wg.Wait()
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.keys) != 4 {
			t.Fatalf("calls %v, want 4: one per slot while busy, then one per slot", f.keys)
		}
		for _, keys := range f.keys {
			for _, k := range keys {
				if keySlot([]string{k}) != keySlot([]string{keys[0]}) {
					t.Errorf("one call holds keys of two slots: %v", keys)
				}
			}
		}
	})
}

// A caller that gives up before its batch leaves is dropped from it (not
// counted) and gets its context's error at once; the others are answered.
func TestCoalesceCanceledBeforeSendIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, f, wg := busyLane(t, time.Second, time.Hour, false)
		ctx, cancel := context.WithCancel(t.Context())
		var gaveUp error
		var gaveUpAt time.Duration
		wg.Go(func() {
			_, gaveUp = decideFake(t, c, ctx, "quitter")
			gaveUpAt = time.Since(f.start)
		})
		wg.Go(func() {
			if _, err := decideFake(t, c, t.Context(), "stayer"); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait()
		time.Sleep(time.Millisecond)
		cancel()
		wg.Wait()
		if !errors.Is(gaveUp, context.Canceled) || gaveUpAt != time.Millisecond {
			t.Errorf("the caller that gave up got %v at %v, want context.Canceled at 1ms", gaveUp, gaveUpAt)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.keys) != 2 || len(f.keys[1]) != 1 || f.keys[1][0] != "p:fw:{stayer}" {
			t.Errorf("calls %v, want the second to hold only the one still waiting", f.keys)
		}
	})
}

// A caller that gives up while its batch is with Redis returns at once; the
// batch and the other callers go on.
func TestCoalesceCanceledAfterSendDoesNotBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, f, wg := busyLane(t, time.Second, time.Millisecond, false)
		wg.Go(func() {
			if _, err := decideFake(t, c, t.Context(), "stayer"); err != nil {
				t.Errorf("the caller that waited: %v", err)
			}
		})
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Millisecond)
		defer cancel()
		_, err := decideFake(t, c, ctx, "quitter")
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(f.start) != 2*time.Millisecond {
			t.Errorf("got %v after %v, want context.DeadlineExceeded after 2ms", err, time.Since(f.start))
		}
		wg.Wait()
		sizes, at := f.calls()
		if len(sizes) != 2 || sizes[1] != 2 || at[1] != time.Millisecond {
			t.Errorf("calls of %v at %v, want [1 2] at [0 1ms]: the caller that gave up was sent", sizes, at)
		}
	})
}

// An error of the call reaches every caller of the batch.
func TestCoalesceErrorReachesEveryCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		f := &fakeRedis{latency: time.Millisecond, start: time.Now(), fail: boom}
		c := newFake(f, time.Second, false)
		defer c.close()
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				if _, err := decideFake(t, c, t.Context(), "k"+strconv.Itoa(i)); !errors.Is(err, boom) {
					t.Errorf("caller %d got %v, want the call's error", i, err)
				}
			})
		}
		wg.Wait()
	})
}

// Close waits for the batches on their way, ends the workers (synctest
// fails a test that leaves a goroutine) and fails decisions after it.
func TestCoalesceClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{latency: time.Second, start: time.Now()}
		c := newFake(f, time.Millisecond, false)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				if _, err := decideFake(t, c, t.Context(), "k"+strconv.Itoa(i)); err != nil {
					t.Error(err)
				}
			})
		}
		synctest.Wait()
		c.close()
		if d := time.Since(f.start); d < time.Second {
			t.Errorf("close returned after %v, before the batch on its way was answered", d)
		}
		wg.Wait()
		if _, err := decideFake(t, c, t.Context(), "late"); !errors.Is(err, errClosed) {
			t.Errorf("after close: %v, want errClosed", err)
		}
	})
}

// keySlot agrees with Redis Cluster's rules on hash tags, however the key
// is cut into parts.
func TestKeySlot(t *testing.T) {
	for _, c := range []struct {
		key, same string
	}{
		{"{user1000}.following", "user1000"},
		{"foo{}{bar}", "foo{}{bar}"},
		{"foo{{bar}}zap", "{bar"},
		{"foo{bar}{zap}", "bar"},
		{"nobraces", "nobraces"},
		{"open{only", "open{only"},
		{"p:fw:{a}b}", "a"},
	} {
		want := keySlot([]string{c.same})
		for cut := range len(c.key) + 1 {
			if got := keySlot([]string{c.key[:cut], "", c.key[cut:]}); got != want {
				t.Errorf("keySlot(%q cut at %d) = %d, want %d (the slot of %q)", c.key, cut, got, want, c.same)
			}
		}
	}
	// The check value of CRC-16/XMODEM, and Redis Cluster's own example.
	if got := keySlot([]string{"123456789"}); got != 0x31C3&16383 {
		t.Errorf("keySlot(123456789) = %#x, want %#x", got, 0x31C3&16383)
	}
}
