package algorithm_test

import (
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
)

// peeker is the Peek method every state has (algorithm.Decider).
type peeker interface {
	Peek(now int64, lim sluice.Limit) sluice.Result
}

func peek(s state, now int64, lim sluice.Limit) sluice.Result {
	return s.(peeker).Peek(now, lim)
}

// contents returns s as reflect.DeepEqual compares states: all of it,
// a buffer held by pointer included.
func contents(s state) any {
	if c, ok := s.(interface{ Contents() any }); ok {
		return c.Contents()
	}
	return s
}

// TestPeekFreshKey: a key never used peeks as allowed with the limit's
// capacity remaining; only the fixed window has a reset (its window's end).
func TestPeekFreshKey(t *testing.T) {
	for _, k := range kinds {
		lim := k.with(sluice.Limit{Algorithm: k.alg, Rate: 7, Period: time.Minute, Burst: 9})
		got := outcomeOf(peek(k.fresh(), t0+20*int64(time.Second), lim))
		want := ok(lim.Capacity(), 0)
		if k.alg == sluice.FixedWindow {
			want.resetAfter = 40 * time.Second
		}
		if got != want {
			t.Errorf("%v: Peek of a fresh key = %v, want %v", lim, got, want)
		}
	}
}

// TestPeekAfterTwoHits: two hits on a 7/minute key, then a peek a little
// later: remaining 5 and the real reset, as envoyproxy/ratelimit answers a
// check-only descriptor (hits_addend 0).
func TestPeekAfterTwoHits(t *testing.T) {
	for _, k := range kinds {
		lim := k.with(sluice.Limit{Algorithm: k.alg, Rate: 7, Period: time.Minute, Burst: 7})
		s := k.fresh()
		s.Take(t0+10*int64(time.Second), lim, 1)
		last := s.Take(t0+10*int64(time.Second), lim, 1)
		got := peek(s, t0+10*int64(time.Second), lim)
		if got != last {
			t.Errorf("%v: Peek at the instant of the last AllowN = %v, want its Result %v", lim, outcomeOf(got), outcomeOf(last))
		}
		if got.Remaining != 5 || !got.Allowed || got.ResetAfter <= 0 {
			t.Errorf("%v: Peek after 2 hits = %v, want allowed, remaining 5 and a reset", lim, outcomeOf(got))
		}
	}
}

// TestPeekOverLoweredLimit: a key spent up to a limit that is then lowered
// peeks as denied, remaining 0, with a RetryAfter.
func TestPeekOverLoweredLimit(t *testing.T) {
	for _, k := range kinds {
		lim := k.with(sluice.Limit{Algorithm: k.alg, Rate: 5, Period: time.Minute, Burst: 5})
		s := k.fresh()
		s.Take(t0, lim, 5)
		lower := k.with(sluice.Limit{Algorithm: k.alg, Rate: 3, Period: time.Minute, Burst: 2})
		got := peek(s, t0, lower)
		if got.Allowed || got.Remaining != 0 || got.RetryAfter <= 0 {
			t.Errorf("%v spent 5, peeked under %v = %v, want denied, remaining 0, a RetryAfter", lim, lower, outcomeOf(got))
		}
	}
}

// TestPeekChangesNothing: in any sequence of decisions and peeks, a peek
// leaves the state as it was (deeply equal), answers the same when repeated,
// and the decisions get exactly the Results they get without the peeks.
func TestPeekChangesNothing(t *testing.T) {
	forEachKind(t, func(t *rapid.T, k kind) {
		lim, reqs := drawRunK(t, k, 1, 80)
		peeks := rapid.SliceOfN(rapid.Bool(), len(reqs), len(reqs)).Draw(t, "peekBefore")
		gaps := gapGen(lim)
		with, without := k.fresh(), k.fresh()
		for i, r := range reqs {
			if peeks[i] {
				now := r.at - gaps.Draw(t, "back")/2 // peeks also land between and before decisions
				before := k.clone(with)
				p1 := peek(with, now, lim)
				if !reflect.DeepEqual(contents(before), contents(with)) {
					t.Fatalf("%v step %d: Peek(t0%+d) changed the state", lim, i, now-t0)
				}
				if p2 := peek(with, now, lim); p2 != p1 {
					t.Fatalf("%v step %d: Peek(t0%+d) = %v, then %v", lim, i, now-t0, outcomeOf(p1), outcomeOf(p2))
				}
			}
			a, b := with.Take(r.at, lim, r.cost), without.Take(r.at, lim, r.cost)
			if a != b {
				t.Fatalf("%v step %d: AllowN%v = %v after peeks, %v without", lim, i, r, outcomeOf(a), outcomeOf(b))
			}
		}
	})
}

// TestPeekAgreesWithTake: at any instant after any history, a peek reports
// what a decision reports: Remaining is one more than an admitted request of
// cost 1 leaves (and equal to a denied one's), Allowed whenever such a request
// is admitted, RetryAfter zero exactly when Allowed; and a peek at the
// instant of an admitted request reports that request's Result.
func TestPeekAgreesWithTake(t *testing.T) {
	forEachKind(t, func(t *rapid.T, k kind) {
		lim, reqs := drawRunK(t, k, 1, 80)
		gaps := gapGen(lim)
		s := k.fresh()
		for i, r := range reqs {
			res := s.Take(r.at, lim, r.cost)
			if res.Allowed {
				if got := peek(s, r.at, lim); got != res {
					t.Fatalf("%v step %d: AllowN%v = %v, Peek at its instant = %v", lim, i, r, outcomeOf(res), outcomeOf(got))
				}
			}
			now := r.at + gaps.Draw(t, "ahead")
			got := peek(s, now, lim)
			one := k.clone(s).Take(now, lim, 1)
			want := one.Remaining
			if one.Allowed {
				want++
			}
			switch {
			case got.Remaining != want:
				t.Fatalf("%v step %d: Peek(t0%+d) = %v, but AllowN(1) there = %v", lim, i, now-t0, outcomeOf(got), outcomeOf(one))
			case one.Allowed && !got.Allowed:
				t.Fatalf("%v step %d: Peek(t0%+d) = %v denied, but AllowN(1) there is admitted", lim, i, now-t0, outcomeOf(got))
			case got.Allowed != (got.RetryAfter == 0), got.ResetAfter < 0:
				t.Fatalf("%v step %d: Peek(t0%+d) = %v", lim, i, now-t0, outcomeOf(got))
			}
		}
	})
}

// TestPeekRetryAfterHonest: a key over a limit (lowered since it was spent,
// or a sliding window counting rejected requests) peeks as allowed again
// after RetryAfter, and one nanosecond earlier still as denied.
func TestPeekRetryAfterHonest(t *testing.T) {
	forEachKind(t, func(t *rapid.T, k kind) {
		lim, reqs := drawRunK(t, k, 1, 60)
		s := k.fresh()
		play(s, lim, reqs)
		lower := k.with(drawLimitCR(t, k.alg, lim.CountRejected))
		lower.Period = lim.Period
		now := reqs[len(reqs)-1].at
		got := peek(s, now, lower)
		if got.Allowed {
			return
		}
		at := now + int64(got.RetryAfter)
		if p := peek(s, at, lower); !p.Allowed {
			t.Fatalf("%v then %v: Peek(t0%+d) = %v, but at its RetryAfter still %v", lim, lower, now-t0, outcomeOf(got), outcomeOf(p))
		}
		if p := peek(s, at-1, lower); p.Allowed && k.alg != sluice.LeakyBucket {
			t.Fatalf("%v then %v: Peek(t0%+d) = %v, but 1ns before its RetryAfter already %v", lim, lower, now-t0, outcomeOf(got), outcomeOf(p))
		}
	})
}
