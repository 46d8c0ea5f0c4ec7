// Package topk finds the heavy hitters of a stream of keys in memory fixed
// by k: the space-saving algorithm, which keeps k counters and, when a new
// key arrives with every counter taken, gives it the smallest counter (its
// count becomes that counter's plus the new weight, and that old count is
// the new key's error bound).
//
// Its guarantee: after a stream of total weight N, every key whose true
// weight is above N/k is listed, with a count that is never below its true
// weight and over it by at most its Error (itself at most N/k).
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package topk

import (
	"cmp"
	"slices"
	"sync"
)

// Sketch counts the heaviest keys of a stream. It is safe for concurrent
// use; its memory holds at most k keys and k counters whatever the
// stream. The zero value is not usable: make one with New.
type Sketch struct {
	mu    sync.Mutex
	k     int
	total uint64
	index map[string]int // key → position in heap
	heap  []entry        // a min-heap on count
}

type entry struct {
	key          string
	count, error uint64
}

// Item is a key of the sketch with its estimated count: the key's true
// weight is in [Count-Error, Count].
type Item struct {
	Key   string `json:"key"`
	Count uint64 `json:"count"`
	Error uint64 `json:"error"`
}

// New returns a sketch of k counters; k below 1 is taken as 1.
func New(k int) *Sketch {
	k = max(k, 1)
	return &Sketch{k: k, index: make(map[string]int, k), heap: make([]entry, 0, k)}
}

// K returns the sketch's number of counters.
func (s *Sketch) K() int { return s.k }

// Add counts w more of key; a weight of 0 does nothing.
func (s *Sketch) Add(key string, w uint64) {
	if w == 0 {
		return
	}
	s.mu.Lock()
	s.total += w
	if i, ok := s.index[key]; ok {
		s.heap[i].count += w
		s.down(i)
	} else if len(s.heap) < s.k {
		s.heap = append(s.heap, entry{key: key, count: w})
		s.index[key] = len(s.heap) - 1
		s.up(len(s.heap) - 1)
	} else {
		// Replace the smallest counter: the new key inherits its count
		// as its error bound.
		min := s.heap[0]
		delete(s.index, min.key)
		s.heap[0] = entry{key: key, count: min.count + w, error: min.count}
		s.index[key] = 0
		s.down(0)
	}
	s.mu.Unlock()
}

// Total returns the weight of the whole stream counted so far.
func (s *Sketch) Total() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Len returns how many keys the sketch holds, at most k.
func (s *Sketch) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.heap)
}

// Top returns up to n keys, heaviest first (ties by key), copied.
func (s *Sketch) Top(n int) []Item {
	items := s.items()
	SortItems(items)
	return items[:min(max(n, 0), len(items))]
}

// items returns a copy of the sketch's keys, in no order.
func (s *Sketch) items() []Item {
	items, _ := s.summary()
	return items
}

// summary returns a copy of the sketch's keys, in no order, and the most
// a key it does not hold can weigh: its smallest counter when all k are
// taken, else 0.
func (s *Sketch) summary() ([]Item, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := make([]Item, len(s.heap))
	for i, e := range s.heap {
		items[i] = Item{Key: e.key, Count: e.count, Error: e.error}
	}
	var floor uint64
	if len(s.heap) == s.k {
		floor = s.heap[0].count
	}
	return items, floor
}

// Reset forgets every key and the total, keeping the memory.
func (s *Sketch) Reset() {
	s.mu.Lock()
	clear(s.index)
	clear(s.heap)
	s.heap = s.heap[:0]
	s.total = 0
	s.mu.Unlock()
}

// SortItems sorts items heaviest first, ties by key.
func SortItems(items []Item) {
	slices.SortFunc(items, func(a, b Item) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
}

func (s *Sketch) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.index[s.heap[i].key] = i
	s.index[s.heap[j].key] = j
}

func (s *Sketch) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if s.heap[p].count <= s.heap[i].count {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *Sketch) down(i int) {
	n := len(s.heap)
	for {
		l, small := 2*i+1, i
		if l < n && s.heap[l].count < s.heap[small].count {
			small = l
		}
		if r := l + 1; r < n && s.heap[r].count < s.heap[small].count {
			small = r
		}
		if small == i {
			return
		}
		s.swap(i, small)
		i = small
	}
}
