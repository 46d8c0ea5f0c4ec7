package eventq

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Values come out in the order of their instants, whatever the order they
// went in, with pops interleaved with pushes.
func TestQueuePopsInOrderOfInstant(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q Queue[int]
	var held []time.Duration // what q holds, sorted
	pop := func() {
		t.Helper()
		next := q.Next()
		at, v := q.Pop()
		if at != next || time.Duration(v) != at || at != held[0] {
			t.Fatalf("Pop = %v, %v after Next = %v; want the earliest held, %v", at, v, next, held[0])
		}
		held = held[1:]
	}
	for round := range 300 {
		for range rng.IntN(5) {
			at := time.Duration(rng.IntN(100))
			q.Push(at, int(at))
			held = append(held, at)
			slices.Sort(held)
		}
		if round%3 == 0 && q.Len() > 0 {
			pop()
		}
	}
	for q.Len() > 0 {
		pop()
	}
	if len(held) != 0 {
		t.Errorf("the queue is empty with %d values pushed and not popped", len(held))
	}
}

// Two workers serve three requests arriving together: two complete after
// one service time, the third waits for the first free worker.
func TestWorkersQueueRequestsBeyondTheirNumber(t *testing.T) {
	w := NewWorkers(2)
	var got []time.Duration
	for range 3 {
		got = append(got, w.Serve(5, 10))
	}
	if want := []time.Duration{15, 15, 25}; !slices.Equal(got, want) {
		t.Errorf("completions %v, want %v", got, want)
	}
	if end := w.Serve(100, 10); end != 110 {
		t.Errorf("a request arriving after every worker is free completes at %v, want 110", end)
	}
}

// The clock reads its epoch until set, then the epoch plus the instant it
// was set to, in whatever order the events come.
func TestClockReadsTheEventsInstantFromItsEpoch(t *testing.T) {
	epoch := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewClock(epoch)
	if got := c.Now(); !got.Equal(epoch) {
		t.Errorf("before any event: %v, want the epoch %v", got, epoch)
	}
	for _, at := range []time.Duration{3 * time.Second, time.Second} {
		c.Set(at)
		if got := c.Now(); !got.Equal(epoch.Add(at)) {
			t.Errorf("Set(%v): %v, want %v", at, got, epoch.Add(at))
		}
	}
}
