// Package eventq holds the parts of a discrete-event simulation of a
// backend: its two queues (the workers' next free instants, and the
// admitted requests ordered by when they complete) and its clock, set
// event by event.
//
// Both are binary min-heaps sifted by hand rather than through
// container/heap, whose interface boxes every value pushed and popped: one
// allocation per event, costly over the hundreds of thousands of events of
// a run (and more so under the race detector). Ties are broken the same way
// on every run, so a simulation that draws the same arrivals plays the same
// events in the same order.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package eventq

import "time"

// Workers is a backend of len(w) workers, each serving one request at a
// time, with one FIFO queue in front of them: it holds, as a min-heap, the
// instant each worker is next free, measured from the simulation's start.
// Its zero value has no workers: make one with NewWorkers.
type Workers []time.Duration

// NewWorkers returns n workers, all free from the start. n must be
// positive.
func NewWorkers(n int) Workers { return make(Workers, n) }

// Serve gives a request arriving at t the first free worker, in arrival
// order, for service, and returns when the request completes: at t plus
// service if a worker is free at t, later by the wait for one otherwise.
func (w Workers) Serve(t, service time.Duration) time.Duration {
	end := max(t, w[0]) + service
	w[0] = end
	for i := 0; ; { // sift the grown root down
		c := 2*i + 1
		if c >= len(w) {
			break
		}
		if c+1 < len(w) && w[c+1] < w[c] {
			c++
		}
		if w[i] <= w[c] {
			break
		}
		w[i], w[c] = w[c], w[i]
		i = c
	}
	return end
}

// Queue is a min-heap of values by the instant each is due, such as the
// requests in flight by when they complete. Its zero value is an empty
// queue ready to use.
type Queue[T any] struct {
	items []item[T]
}

type item[T any] struct {
	at time.Duration
	v  T
}

// Len returns how many values the queue holds.
func (q *Queue[T]) Len() int { return len(q.items) }

// Next returns the earliest instant held. The queue must not be empty.
func (q *Queue[T]) Next() time.Duration { return q.items[0].at }

// Push adds v, due at at.
func (q *Queue[T]) Push(at time.Duration, v T) {
	q.items = append(q.items, item[T]{at: at, v: v})
	h := q.items
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p].at <= h[i].at {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

// Pop removes and returns the value due first, with its instant. The queue
// must not be empty.
func (q *Queue[T]) Pop() (time.Duration, T) {
	h := q.items
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = item[T]{} // drop the reference the moved value held
	h = h[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h[c+1].at < h[c].at {
			c++
		}
		if h[i].at <= h[c].at {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	q.items = h
	return top.at, top.v
}

// Clock is a simulation's clock (a sluice.Clock), set to each event's
// instant as the event is played. It takes no lock: a simulation plays its
// events on one goroutine, and the lock of a clock shared between
// goroutines (clocktest.Clock) costs on every event, the more so under the
// race detector. Its zero value reads the zero time until Set; make one
// with NewClock.
type Clock struct {
	epoch, now time.Time
}

// NewClock returns a Clock at epoch, the simulation's start.
func NewClock(epoch time.Time) *Clock { return &Clock{epoch: epoch, now: epoch} }

// Set moves the clock to at after the simulation's start.
func (c *Clock) Set(at time.Duration) { c.now = c.epoch.Add(at) }

// Now returns the instant of the event being played.
func (c *Clock) Now() time.Time { return c.now }
