package topk

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/internal/clocktest"
)

// TestEveryKeyAboveNOverKIsListed is the sketch's error bound: whatever
// the stream, a key whose true weight is above N/k is listed, its count
// is at least its true weight and at most that plus its error, and its
// error is at most N/k.
func TestEveryKeyAboveNOverKIsListed(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, 16).Draw(t, "k")
		keys := rapid.IntRange(1, 64).Draw(t, "keys")
		stream := rapid.SliceOfN(rapid.IntRange(0, keys-1), 0, 2000).Draw(t, "stream")
		weights := rapid.SliceOfN(rapid.Uint64Range(1, 5), len(stream), len(stream)).Draw(t, "weights")
		s := New(k)
		truth := map[string]uint64{}
		var n uint64
		for i, x := range stream {
			key := fmt.Sprint("key", x)
			s.Add(key, weights[i])
			truth[key] += weights[i]
			n += weights[i]
		}
		if s.Total() != n {
			t.Fatalf("Total = %d, want %d", s.Total(), n)
		}
		listed := map[string]Item{}
		for _, it := range s.Top(k) {
			listed[it.Key] = it
		}
		for key, w := range truth {
			it, ok := listed[key]
			if w*uint64(k) > n && !ok {
				t.Fatalf("%s has %d of %d (> N/k with k=%d) but is not listed: %v", key, w, n, k, listed)
			}
			if ok && (it.Count < w || it.Count-it.Error > w || it.Error*uint64(k) > n) {
				t.Fatalf("%s: true %d, listed %+v, N=%d k=%d", key, w, it, n, k)
			}
		}
	})
}

// TestMemoryIsFixedByK: a million distinct keys leave the sketch holding
// k of them, its heap and index no larger than k, and the process's live
// heap no larger than a few kilobytes per counter.
func TestMemoryIsFixedByK(t *testing.T) {
	const k = 64
	s := New(k)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 1_000_000 {
		s.Add(fmt.Sprint("distinct-", i), 1)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s.Len() != k || len(s.index) != k || cap(s.heap) != k {
		t.Fatalf("Len %d, index %d, heap cap %d; want %d", s.Len(), len(s.index), cap(s.heap), k)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 256<<10 {
		t.Fatalf("the live heap grew by %d bytes over a million keys", grew)
	}
	runtime.KeepAlive(s)
}

// TestAddOfAListedKeyAllocatesNothing keeps the hot path cheap: counting
// a key already listed, or replacing the smallest with a key the caller
// already holds, allocates nothing.
func TestAddOfAListedKeyAllocatesNothing(t *testing.T) {
	s := New(8)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	for _, k := range keys {
		s.Add(k, 1)
	}
	i := 0
	if a := testing.AllocsPerRun(1000, func() { s.Add(keys[i%len(keys)], 1); i++ }); a != 0 {
		t.Fatalf("Add allocates %v times per call", a)
	}
}

func TestTopIsHeaviestFirstAndBoundedByN(t *testing.T) {
	s := New(4)
	s.Add("x", 5)
	s.Add("y", 9)
	s.Add("z", 1)
	got := s.Top(2)
	if len(got) != 2 || got[0].Key != "y" || got[1].Key != "x" || got[0].Count != 9 {
		t.Fatalf("Top(2) = %+v", got)
	}
	if s.Top(-1) == nil || len(s.Top(-1)) != 0 {
		t.Fatalf("Top(-1) = %v", s.Top(-1))
	}
}

func TestConcurrentAddsAreAllCounted(t *testing.T) {
	s := New(16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				s.Add(fmt.Sprint("k", (g+i)%20), 1)
			}
		})
	}
	wg.Wait()
	if s.Total() != 8000 {
		t.Fatalf("Total = %d", s.Total())
	}
}

func TestWindowForgetsSpansOlderThanIt(t *testing.T) {
	c := clocktest.At(time.Unix(1_000_000, 0))
	w := NewWindow(8, 3, time.Minute, c.Now)
	w.Add("old", 10)
	c.Advance(time.Minute)
	w.Add("new", 3)
	w.Add("old", 1)
	if top := w.Top(5); len(top) != 2 || top[0].Key != "old" || top[0].Count != 11 || top[1].Count != 3 {
		t.Fatalf("within the window: %+v", top)
	}
	c.Advance(2 * time.Minute) // the first span is now 3 minutes old
	if top := w.Top(5); len(top) != 2 || top[0].Key != "new" || top[1].Key != "old" || top[1].Count != 1 {
		t.Fatalf("after the first span expired, want new 3 and old 1 (its second span's): %+v", top)
	}
	c.Advance(time.Hour)
	if top := w.Top(5); len(top) != 0 {
		t.Fatalf("an hour later: %+v", top)
	}
	if w.Span() != 3*time.Minute {
		t.Fatalf("Span = %v", w.Span())
	}
}

// TestWindowCountsBoundEveryKeysTrueWeight is the window's error bound, as
// the sketch's: whatever the stream and however it spreads over the
// spans, a listed key's count is at least its true weight over the spans
// still in the window and at most that plus its error, also when a span's
// sketch dropped the key to make room for another.
func TestWindowCountsBoundEveryKeysTrueWeight(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, 8).Draw(t, "k")
		n := rapid.IntRange(1, 4).Draw(t, "spans")
		keys := rapid.IntRange(1, 16).Draw(t, "keys")
		stream := rapid.SliceOfN(rapid.IntRange(0, keys-1), 0, 400).Draw(t, "stream")
		c := clocktest.At(time.Unix(1_000_000, 0))
		w := NewWindow(k, n, time.Minute, c.Now)
		var spans []map[string]uint64 // true weights of each span, oldest first
		for _, x := range stream {
			if len(spans) == 0 || rapid.IntRange(0, 9).Draw(t, "next span") == 0 {
				if len(spans) > 0 {
					c.Advance(time.Minute)
				}
				spans = append(spans, map[string]uint64{})
			}
			key := fmt.Sprint("key", x)
			w.Add(key, 1)
			spans[len(spans)-1][key]++
		}
		truth := map[string]uint64{}
		for _, s := range spans[max(len(spans)-n, 0):] {
			for key, v := range s {
				truth[key] += v
			}
		}
		for _, it := range w.Top(k * n) {
			if v := truth[it.Key]; it.Count < v || it.Count-it.Error > v {
				t.Fatalf("%s: true %d over the window, listed %+v", it.Key, v, it)
			}
		}
	})
}
