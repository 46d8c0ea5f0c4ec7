package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// TestPeekAllocatesNothing: a peek at a held key and at a key the store does
// not hold allocates nothing, for every algorithm.
func TestPeekAllocatesNothing(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			lim := sluice.Limit{Algorithm: a, Rate: 100, Period: time.Second, Burst: 100}
			clock := clocktest.New()
			s := newTestStore(t, memstore.Config{Clock: clock})
			ctx := context.Background()
			for range 10 {
				if _, err := s.AllowN(ctx, "user:42", lim, 1); err != nil {
					t.Fatal(err)
				}
			}
			for _, key := range []string{"user:42", "user:absent"} {
				allocs := testing.AllocsPerRun(1000, func() {
					clock.Advance(time.Microsecond)
					if _, err := s.Peek(ctx, key, lim); err != nil {
						t.Fatal(err)
					}
				})
				if allocs != 0 {
					t.Errorf("Peek(%q): %v allocs per call, want 0", key, allocs)
				}
			}
		})
	}
}

// TestPeekCreatesNoKey: peeking at keys the store does not hold leaves it
// holding none; peeking at a held key keeps it exactly as spent.
func TestPeekCreatesNoKey(t *testing.T) {
	clock := clocktest.New()
	s := newTestStore(t, memstore.Config{Clock: clock})
	ctx := context.Background()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 7, Period: time.Minute}
	for i := range 100 {
		res, err := s.Peek(ctx, "k"+string(rune('a'+i%26))+string(rune('a'+i/26)), lim)
		if err != nil || !res.Allowed || res.Remaining != 7 {
			t.Fatalf("Peek of an unused key = %+v, %v; want allowed, remaining 7", res, err)
		}
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("after 100 peeks at unused keys the store holds %d keys, want 0", n)
	}
	if _, err := s.Peek(ctx, "", lim); !errors.Is(err, sluice.ErrInvalidKey) {
		t.Fatalf("Peek with an empty key: %v, want ErrInvalidKey", err)
	}
	if _, err := s.Peek(ctx, "k", sluice.Limit{Algorithm: sluice.FixedWindow, Period: time.Minute}); !errors.Is(err, sluice.ErrInvalidLimit) {
		t.Fatalf("Peek with rate 0: %v, want ErrInvalidLimit", err)
	}
}

func BenchmarkPeek(b *testing.B) {
	ctx := context.Background()
	forEachHotKey(b, func(b *testing.B, s *memstore.Store, lim sluice.Limit) {
		if _, err := s.AllowN(ctx, "user:42", lim, 1); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := s.Peek(ctx, "user:42", lim); err != nil {
				b.Fatal(err)
			}
		}
	})
}
