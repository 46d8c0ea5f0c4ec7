package algorithm_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// forEachKind runs prop as a rapid property for every algorithm, as subtests
// named after the algorithm.
func forEachKind(t *testing.T, prop func(t *rapid.T, k kind)) {
	for _, k := range kinds {
		t.Run(k.name(), func(t *testing.T) {
			t.Parallel()
			rapid.Check(t, func(t *rapid.T) { prop(t, k) })
		})
	}
}

// TestResultInvariants: RetryAfter is zero when allowed and positive when
// denied, Remaining and ResetAfter are never negative, an admitted request
// leaves a positive ResetAfter, and ResetAfter is
// the time until Expires: both say when the key is as good as fresh.
func TestResultInvariants(t *testing.T) {
	forEachKind(t, func(t *rapid.T, k kind) {
		lim, reqs := drawRunK(t, k, 1, 100)
		s := k.fresh()
		for i, r := range reqs {
			res := s.Take(r.at, lim, r.cost)
			switch {
			case res.Allowed && res.RetryAfter != 0:
				t.Fatalf("%v step %d: AllowN%v allowed with RetryAfter %v", lim, i, r, res.RetryAfter)
			case !res.Allowed && res.RetryAfter <= 0:
				t.Fatalf("%v step %d: AllowN%v denied with RetryAfter %v", lim, i, r, res.RetryAfter)
			case res.Remaining < 0 || res.ResetAfter < 0:
				t.Fatalf("%v step %d: AllowN%v = Remaining %d, ResetAfter %v", lim, i, r, res.Remaining, res.ResetAfter)
			case res.Allowed && res.ResetAfter <= 0:
				t.Fatalf("%v step %d: AllowN%v allowed with ResetAfter %v", lim, i, r, res.ResetAfter)
			case res.Remaining > lim.Capacity():
				t.Fatalf("%v step %d: AllowN%v = Remaining %d, above the capacity", lim, i, r, res.Remaining)
			case int64(res.ResetAfter) != max(s.Expires()-r.at, 0):
				t.Fatalf("%v step %d: AllowN%v = ResetAfter %v, but Expires() is t0%+d", lim, i, r, res.ResetAfter, s.Expires()-t0)
			}
		}
	})
}

// TestRetryAfterHonest: when a request is denied, the same request after
// RetryAfter, with no other traffic, is admitted; one nanosecond earlier it is
// still denied. RetryAfter is exact to the nanosecond for every algorithm,
// the sliding window's estimate included; the leaky bucket's retry lands on
// a millisecond boundary, so a nanosecond earlier is the millisecond before.
func TestRetryAfterHonest(t *testing.T) {
	forEachKind(t, func(t *rapid.T, k kind) {
		lim := k.with(drawLimitCR(t, k.alg, false)) // see TestRetryAfterHonestCountRejected
		reqs := drawRequests(t, lim, drawStart(t, lim), 1, 100)
		checkRetryAfter(t, k, lim, reqs)
	})
}

// TestRetryAfterHonestCountRejected is TestRetryAfterHonest for a sliding
// window that counts rejected requests: the retry must account for the
// rejected request that was just counted.
func TestRetryAfterHonestCountRejected(t *testing.T) {
	k := kindOf(sluice.SlidingWindow)
	rapid.Check(t, func(t *rapid.T) {
		lim := k.with(drawLimitCR(t, k.alg, true))
		reqs := drawRequests(t, lim, drawStart(t, lim), 1, 100)
		checkRetryAfter(t, k, lim, reqs)
	})
}

func checkRetryAfter(t *rapid.T, k kind, lim sluice.Limit, reqs []req) {
	s := k.fresh()
	for i, r := range reqs {
		res := s.Take(r.at, lim, r.cost)
		if res.Allowed {
			continue
		}
		retry := r.at + int64(res.RetryAfter)
		if got := k.clone(s).Take(retry, lim, r.cost); !got.Allowed {
			t.Fatalf("%v step %d: AllowN%v denied with RetryAfter %v, but AllowN(t0%+d, %d) after it is denied too (RetryAfter %v)",
				lim, i, r, res.RetryAfter, retry-t0, r.cost, got.RetryAfter)
		}
		if got := k.clone(s).Take(retry-1, lim, r.cost); got.Allowed {
			t.Fatalf("%v step %d: AllowN%v denied with RetryAfter %v, but AllowN(t0%+d, %d), 1ns earlier, is admitted",
				lim, i, r, res.RetryAfter, retry-1-t0, r.cost)
		}
	}
}

// TestRemainingExact: right after a decision, exactly Remaining requests of
// cost 1 at the same instant are admitted, and the next is denied.
func TestRemainingExact(t *testing.T) {
	forEachKind(t, func(t *rapid.T, k kind) {
		lim, reqs := drawRunK(t, k, 1, 100)
		s := k.fresh()
		for i, r := range reqs {
			res := s.Take(r.at, lim, r.cost)
			probe := k.clone(s)
			for j := range res.Remaining {
				if !probe.Take(r.at, lim, 1).Allowed {
					t.Fatalf("%v step %d: AllowN%v = allowed %v Remaining %d, but only %d more of cost 1 are admitted",
						lim, i, r, res.Allowed, res.Remaining, j)
				}
			}
			if probe.Take(r.at, lim, 1).Allowed {
				t.Fatalf("%v step %d: AllowN%v = allowed %v Remaining %d, but %d more of cost 1 are admitted",
					lim, i, r, res.Allowed, res.Remaining, res.Remaining+1)
			}
		}
	})
}

// TestRefund: after an admitted Take and a Refund of the same cost at the
// same instant, the state decides every following sequence as it would have
// without them, Result for Result.
//
// The leaky bucket is exact only when the Take left Last alone (the same
// millisecond as the last admitted request, or a fresh key). Otherwise the
// Take re-based Last to now and NGINX's truncated drain, rate·ms/1000, lost
// the fraction of a milli-request that a Refund cannot know: the refunded
// bucket may then drain up to one milli-request less than the untouched one,
// so it may deny a request the untouched one admits, never the reverse.
//
// The sliding log takes refunded units from its oldest entries, not from the
// one just logged, so the refunded log holds the same number of units with
// later instants: it admits a request of the refunded cost at once, and
// afterwards may deny a request the untouched one admits, never the reverse.
//
// The moments counter does not know which of the current sub-window's
// units a refund gives back, and keeps its means (the sums scale by
// after/before): the units left look as late as all of them on average,
// no earlier than without the refunded ones, which came last. It admits a
// request of the refunded cost at once, and afterwards may deny a request
// the untouched one admits, never the reverse.
func TestRefund(t *testing.T) {
	forEachKind(t, func(t *rapid.T, k kind) {
		lim, history := drawRunK(t, k, 0, 60)
		s := k.fresh()
		play(s, lim, history)
		now := t0
		if len(history) > 0 {
			now = history[len(history)-1].at
		}
		now += gapGen(lim).Draw(t, "gap")
		cost := costGen(lim).Draw(t, "cost")
		before := k.clone(s)
		if !s.Take(now, lim, cost).Allowed {
			return
		}
		exact := true
		if lb, ok := s.(*algorithm.LeakyBucket); ok {
			b := before.(*algorithm.LeakyBucket)
			exact = b.Until == 0 || b.Last == lb.Last
		}
		s.Refund(now, lim, cost)
		switch s.(type) {
		case *algorithm.SlidingLog, *algorithm.SlidingMoments:
			exact = false
			if !k.clone(s).Take(now, lim, cost).Allowed {
				t.Fatalf("%v: AllowN(t0%+d, %d) is denied right after the same request was admitted and refunded", lim, now-t0, cost)
			}
		}
		future := drawRequests(t, lim, now, 1, 60)
		if exact {
			compareFuture(t, lim, "refunded", s, "untouched", before, future)
			return
		}
		for i, r := range future {
			ra, rb := s.Take(r.at, lim, r.cost), before.Take(r.at, lim, r.cost)
			if ra.Allowed == rb.Allowed {
				continue
			}
			if ra.Allowed {
				t.Fatalf("%v step %d: AllowN%v is admitted on the refunded state, denied on the untouched one", lim, i, r)
			}
			return // the refunded bucket was stricter; from here on they differ
		}
	})
}

// TestExpires: from Expires() on, the state decides exactly like a fresh one
// for any following sequence, Result for Result.
func TestExpires(t *testing.T) {
	forEachKind(t, func(t *rapid.T, k kind) {
		lim, history := drawRunK(t, k, 1, 60)
		s := k.fresh()
		play(s, lim, history)
		start := max(s.Expires(), history[len(history)-1].at)
		compareFuture(t, lim, "expired", s, "fresh", k.fresh(), drawRequests(t, lim, start, 1, 60))
	})
}

// compareFuture plays future on a and b and fails at the first Result that
// differs.
func compareFuture(t *rapid.T, lim sluice.Limit, aName string, a state, bName string, b state, future []req) {
	for i, r := range future {
		ra, rb := a.Take(r.at, lim, r.cost), b.Take(r.at, lim, r.cost)
		if ra != rb {
			t.Fatalf("%v step %d: AllowN%v = %v on the %s state, %v on the %s one",
				lim, i, r, outcomeOf(ra), aName, outcomeOf(rb), bName)
		}
	}
}
