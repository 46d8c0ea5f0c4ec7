package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestPeekWritesNothing: a peek at a key never used leaves it absent, and a
// peek at a held key leaves its value and its time to live as they were
// (on the server's own clock, TIME), for every algorithm.
func TestPeekWritesNothing(t *testing.T) {
	srv := redistest.Single(t)
	s := open(t, "redis://"+srv.Addr, nil)
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		lim := sluice.Limit{Algorithm: a, Rate: 7, Period: time.Minute, Burst: 7}
		key := "peek:" + a.String() + ":" + strconv.FormatInt(time.Now().UnixNano(), 36)
		r, err := s.Peek(ctx, key, lim)
		if err != nil || !r.Allowed || r.Remaining != 7 {
			t.Fatalf("%v: Peek of a fresh key = %+v, %v; want allowed, remaining 7", a, r, err)
		}
		if n := srv.Do(t, "EXISTS", s.Key(a, key)); n != "0" {
			t.Errorf("%v: after a peek at a fresh key, EXISTS = %s, want 0", a, n)
		}
		s.AllowN(ctx, key, lim, 1)
		if _, err := s.AllowN(ctx, key, lim, 1); err != nil {
			t.Fatal(err)
		}
		dump := srv.Do(t, "DUMP", s.Key(a, key))
		srv.Do(t, "PEXPIRE", s.Key(a, key), "3600000") // a TTL a peek that wrote one would shorten
		r, err = s.Peek(ctx, key, lim)
		if err != nil || !r.Allowed || r.Remaining != 5 || r.ResetAfter <= 0 {
			t.Fatalf("%v: Peek after 2 hits = %+v, %v; want allowed, remaining 5, a reset", a, r, err)
		}
		if got := srv.Do(t, "DUMP", s.Key(a, key)); got != dump {
			t.Errorf("%v: a peek changed the key's value", a)
		}
		if pttl, err := strconv.ParseInt(srv.Do(t, "PTTL", s.Key(a, key)), 10, 64); err != nil {
			t.Fatal(err)
		} else if pttl < 3590000 {
			t.Errorf("%v: after a peek PTTL = %d ms, want the 3600000 set before it", a, pttl)
		}
	}
}

// TestPeekAgreesWithMemstore: after the same decisions at the same instants,
// a peek on Redis and in memory answer the same, for every algorithm, at the
// instant of the last decision and later.
func TestPeekAgreesWithMemstore(t *testing.T) {
	clock := clocktest.New()
	rs, ms := pair(t, clock)
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		lim := sluice.Limit{Algorithm: a, Rate: 10, Period: 10 * time.Second, Burst: 10}
		key := "peekagree:" + a.String() + ":" + strconv.FormatInt(time.Now().UnixNano(), 36)
		for i, step := range []struct {
			advance time.Duration
			cost    int
		}{{0, 0}, {time.Second, 3}, {0, 0}, {1500 * time.Millisecond, 0}, {0, 7}, {0, 1}, {0, 0}, {2 * time.Second, 0}, {20 * time.Second, 0}} {
			clock.Advance(step.advance)
			if step.cost > 0 {
				rs.AllowN(ctx, key, lim, step.cost)
				ms.AllowN(ctx, key, lim, step.cost)
				continue
			}
			got, err := rs.Peek(ctx, key, lim)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ms.Peek(ctx, key, lim)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%v step %d: Peek = %+v on Redis, %+v in memory", a, i, got, want)
			}
		}
	}
}

// BenchmarkPeek is one peek per call on Redis's clock, per algorithm, at
// 1,000 keys spent halfway, from 16 goroutines per CPU as BenchmarkAllowN
// (so the two compare): ns/op is mostly the server's time per read-only
// script; allocs/op is the store's and rueidis's around each round trip.
func BenchmarkPeek(b *testing.B) {
	s := open(b, singleURL(b), nil)
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		b.Run("alg="+a.String(), func(b *testing.B) {
			lim := sluice.Limit{Algorithm: a, Rate: 100, Period: time.Hour, Burst: 100}
			keys := benchKeys("benchpeek:")
			for _, k := range keys {
				if _, err := s.AllowN(ctx, k, lim, 50); err != nil {
					b.Fatal(err)
				}
			}
			parallelOverKeys(b, keys, func(key string) error {
				_, err := s.Peek(ctx, key, lim)
				return err
			})
		})
	}
}
