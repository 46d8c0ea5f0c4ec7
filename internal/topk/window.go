package topk

import (
	"sync"
	"time"
)

// Window is the heavy hitters of the last few spans of time: one Sketch
// per span, the oldest cleared and reused when a new span begins, so that
// its memory is fixed by k and the number of spans. It is safe for
// concurrent use. The zero value is not usable: make one with NewWindow.
type Window struct {
	mu      sync.Mutex
	span    time.Duration
	now     func() time.Time
	spans   []*Sketch
	starts  []int64 // span number of each sketch; -1: never used
	current int
}

// NewWindow returns the heavy hitters of the last n spans of length span,
// k counters each, with time told by now (nil: time.Now). n below 1 is 1,
// a span below a second is a second.
func NewWindow(k, n int, span time.Duration, now func() time.Time) *Window {
	n, span = max(n, 1), max(span, time.Second)
	if now == nil {
		now = time.Now
	}
	w := &Window{span: span, now: now, spans: make([]*Sketch, n), starts: make([]int64, n)}
	for i := range w.spans {
		w.spans[i], w.starts[i] = New(k), -1
	}
	return w
}

// Span returns how much time the window covers: its spans' total.
func (w *Window) Span() time.Duration { return w.span * time.Duration(len(w.spans)) }

// sketch returns the sketch of the current span, clearing a stale one.
func (w *Window) sketch() *Sketch {
	n := w.now().UnixNano() / int64(w.span)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.starts[w.current] != n {
		w.current = (w.current + 1) % len(w.spans)
		w.spans[w.current].Reset()
		w.starts[w.current] = n
	}
	return w.spans[w.current]
}

// Add counts weight more of key in the current span.
func (w *Window) Add(key string, weight uint64) { w.sketch().Add(key, weight) }

// Top returns up to n keys, heaviest first, over the spans of the window
// that are not older than it: each key's counts summed across them. A
// span whose sketch is full and does not hold a key counts for it its
// smallest counter, in Count and Error alike (the most the key can have
// had there), so that, as for a Sketch, a key's true weight over the
// window is in [Count-Error, Count].
func (w *Window) Top(n int) []Item {
	now := w.now().UnixNano() / int64(w.span)
	w.mu.Lock()
	var live []*Sketch
	for i, s := range w.spans {
		if st := w.starts[i]; st >= 0 && now-st < int64(len(w.spans)) {
			live = append(live, s)
		}
	}
	w.mu.Unlock()
	type sum struct {
		Item
		floors uint64 // of the spans that hold the key
	}
	sums := map[string]sum{}
	var floors uint64 // of every span
	for _, s := range live {
		items, floor := s.summary()
		floors += floor
		for _, it := range items { // summed, then sorted once below
			t := sums[it.Key]
			t.Key, t.Count, t.Error, t.floors = it.Key, t.Count+it.Count, t.Error+it.Error, t.floors+floor
			sums[it.Key] = t
		}
	}
	items := make([]Item, 0, len(sums))
	for _, t := range sums {
		absent := floors - t.floors
		items = append(items, Item{Key: t.Key, Count: t.Count + absent, Error: t.Error + absent})
	}
	SortItems(items)
	return items[:min(max(n, 0), len(items))]
}
