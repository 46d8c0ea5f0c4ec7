package memstore

import (
	"sync/atomic"
	"time"
)

// coarseClock is the store's optional coarse clock (Config.ClockResolution):
// one goroutine reads the store's exact clock every resolution and
// publishes the reading; a decision loads it, one atomic load instead of a
// clock read (on the machine of BENCHMARKS.md a clock read is about half of
// a decision).
//
// The error it introduces, with readings published at least every r: a
// decision at instant t sees a reading c with t−r ≤ c ≤ t, and readings
// never go back. So the store decides at every instant exactly as the exact
// store would have decided up to r earlier:
//   - a token bucket's refill is at most r late, and over any span of real
//     time L it admits at most what the exact store admits over L+r: Burst
//     plus (L+r)/T units for an emission interval T (at most one unit more
//     than over L while r < T, that is while Rate < Period/r);
//   - a fixed window's windows end up to r late: within each window less
//     its first r the store admits at most Rate.
//
// The bound assumes the publishing goroutine runs every r: on a machine so
// loaded that it waits for a CPU, the reading lags by r plus that wait (the
// error stays one-sided: late, never early).
type coarseClock struct {
	_   [64]byte // off the cache lines of the Store's read-only fields
	ns  atomic.Int64
	_   [56]byte
	now func() int64 // the exact reading
}

// noCoarse is the coarse clock of every store without one: it never
// publishes, so its reading is always 0 and now reads the exact clock.
var noCoarse coarseClock

// newCoarseClock returns a coarse clock over now, already holding a
// reading. It publishes nothing more until run or tick is called.
func newCoarseClock(now func() int64) *coarseClock {
	c := &coarseClock{now: now}
	c.tick()
	return c
}

// tick publishes a fresh reading, never one earlier than the last.
func (c *coarseClock) tick() {
	if t := c.now(); t > c.ns.Load() {
		c.ns.Store(t)
	}
}

// run publishes a reading every resolution until stop is closed, then
// publishes 0: the store's now reads 0 as no reading, so that a store used
// after Close reads its exact clock rather than a frozen one. Close waits
// at most one resolution for it.
func (c *coarseClock) run(resolution time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	pinThread()
	defer unpinThread()
	for {
		select {
		case <-stop:
			c.ns.Store(0)
			return
		default:
		}
		pause(resolution)
		c.tick()
	}
}
