// Package storetest is the conformance suite every sluice.Limiter runs, the
// stores and the wrappers around them (failsafe in each mode, relief's
// over-limit cache, hybrid and batcher): the same step tables on fixed
// instants, the same bad input, the same concurrency check, the same flood
// of distinct spent keys against a store bounded in memory, so that every
// Limiter is held to one behaviour. Where a limiter legitimately differs,
// Options names the difference.
//
// A store under test takes its time from the sluice.Clock the suite passes,
// so the suite can move time by hand. A store whose clock is coarser than a
// nanosecond (Redis's TIME counts microseconds) declares its resolution: the
// suite then rounds the durations it expects up to that resolution (a store
// may round a wait up, never down) and skips the steps that need finer time.
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// NewStore returns a fresh store that reads time from clock. The suite calls
// it once per subtest; the store is closed through t.Cleanup by the caller if
// it needs closing.
type NewStore func(t *testing.T, clock sluice.Clock) sluice.Limiter

// Step is one request of a step table: advance the clock by Advance, then ask
// for Cost units of Key; the decision must match the want fields. A Fine step
// needs nanosecond time and is skipped, with the rest of its case, for a
// coarser store.
type Step struct {
	Fine       bool
	Advance    time.Duration
	Key        string // "" means "k"
	Cost       int    // 0 means 1
	Allowed    bool
	Remaining  int
	RetryAfter time.Duration
	ResetAfter time.Duration
}

// Case is a named step table under one limit, starting at Start.
type Case struct {
	Name  string
	Start time.Time // zero means clocktest.Epoch
	Limit sluice.Limit
	Steps []Step
}

// minute0 is a minute boundary: 1700000040 is a multiple of 60.
var minute0 = time.Unix(1700000040, 0).UTC()

// Cases returns the step tables of the suite: worked examples of the
// sliding window counter and the token bucket, and NGINX limit_req cases.
// It is one table literal, data rather than logic, so it stays one function
// however many lines the cases take.
func Cases() []Case {
	ms := time.Millisecond
	tb := sluice.PerSecond(5).WithBurst(10)
	fw := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Minute}
	sw50 := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 50, Period: time.Minute}
	sw100 := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Minute}
	log3 := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 3, Period: time.Second}
	lb := func(rate int, per time.Duration, burst int) sluice.Limit {
		return sluice.Limit{Algorithm: sluice.LeakyBucket, Rate: rate, Period: per, Burst: burst}
	}
	repeat := func(n int, s Step) []Step {
		out := make([]Step, n)
		for i := range out {
			out[i] = s
			out[i].Remaining = s.Remaining - i
			if i > 0 {
				out[i].Advance = 0
			}
		}
		return out
	}
	var tbSteps []Step
	for i := range 10 {
		tbSteps = append(tbSteps, Step{Allowed: true, Remaining: 9 - i, ResetAfter: time.Duration(i+1) * 200 * ms})
	}
	tbSteps = append(tbSteps,
		Step{Allowed: false, Remaining: 0, RetryAfter: 200 * ms, ResetAfter: 2 * time.Second},
		Step{Advance: 199 * ms, Allowed: false, Remaining: 0, RetryAfter: 1 * ms, ResetAfter: 1801 * ms},
		Step{Advance: 1 * ms, Allowed: true, Remaining: 0, ResetAfter: 2 * time.Second},
		Step{Advance: time.Second, Cost: 5, Allowed: true, Remaining: 0, ResetAfter: 2 * time.Second},
		Step{Advance: 600 * ms, Cost: 4, Allowed: false, Remaining: 3, RetryAfter: 200 * ms, ResetAfter: 1400 * ms},
	)

	// Sliding window, 50/min: 42 in the previous minute, 18 in this one, 15 s
	// in: the estimate is 42·45/60 + 18 = 49.5, so the next is allowed.
	sw50Steps := []Step{
		{Advance: 30 * time.Second, Cost: 42, Allowed: true, Remaining: 8, ResetAfter: 90 * time.Second},
		// 15 s into the next minute: ⌊42·45/60⌋ = 31, and 31 + 18 ≤ 50.
		{Advance: 45 * time.Second, Cost: 18, Allowed: true, Remaining: 50 - 31 - 18, ResetAfter: 105 * time.Second},
		// The estimate is now 49.5 (49 after the floor): one more fits.
		{Allowed: true, Remaining: 0, ResetAfter: 105 * time.Second},
		// 50 is full; the previous minute's weight must fall to 30, which
		// ⌊42·(60−e)/60⌋ reaches at e = 15.714285715 s.
		{Allowed: false, Remaining: 0, RetryAfter: 714285715, ResetAfter: 105 * time.Second},
		{Fine: true, Advance: 714285714, Allowed: false, Remaining: 0, RetryAfter: 1, ResetAfter: 105*time.Second - 714285714},
		{Fine: true, Advance: 1, Allowed: true, Remaining: 0, ResetAfter: 105*time.Second - 714285715},
	}
	// Sliding window, 100/min: 80 at t=30 s, 30 at t=70 s; at t=75 s exactly
	// 10 more are admitted.
	sw100Steps := []Step{
		{Advance: 30 * time.Second, Cost: 80, Allowed: true, Remaining: 20, ResetAfter: 90 * time.Second},
		{Advance: 40 * time.Second, Cost: 30, Allowed: true, Remaining: 100 - 30 - 66, ResetAfter: 110 * time.Second},
	}
	sw100Steps = append(sw100Steps, repeat(10, Step{Advance: 5 * time.Second, Allowed: true, Remaining: 9, ResetAfter: 105 * time.Second})...)
	sw100Steps = append(sw100Steps, Step{Allowed: false, Remaining: 0, RetryAfter: 1, ResetAfter: 105 * time.Second})

	// Sliding window in 4 sub-windows of 15 s, 10/min: 10 at 0 s weigh
	// whole for a minute; from 60.75 s + 1 ns 10·(15s−e)/15s rounds to 9
	// (it is below 9.5), which leaves room for one.
	swb := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute, Buckets: 4}
	swbSteps := []Step{
		{Cost: 10, Allowed: true, Remaining: 0, ResetAfter: 75 * time.Second},
		{Advance: time.Second, Allowed: false, Remaining: 0, RetryAfter: 59750*time.Millisecond + 1, ResetAfter: 74 * time.Second},
		{Advance: 59 * time.Second, Allowed: false, Remaining: 0, RetryAfter: 750*time.Millisecond + 1, ResetAfter: 15 * time.Second},
		// 61 s: 10·14/15 = 9.33 rounds to 9, and 9 + 1 = 10.
		{Advance: time.Second, Allowed: true, Remaining: 0, ResetAfter: 74 * time.Second},
		// 75 s: the first sub-window has left; the unit of 61 s weighs.
		{Advance: 14 * time.Second, Allowed: true, Remaining: 8, ResetAfter: 75 * time.Second},
	}

	// The same with two moments per sub-window: the 10 units came at 0 s,
	// at the start of their sub-window, so they leave the estimate as soon
	// as it begins to leave the period rather than evenly: the share still
	// inside is (1−x) + (P0−P2)(z)/2·m1 + (P1−P3)(z)/2·m2 with the means
	// m1 = −127/128 and m2 = 127/128 (one signed byte each) at z = 2x−1,
	// x the midpoint of the offset level (2^13 per sub-window): 0.95091 at
	// level 45 (9.51 units: rounds to 10) and 0.94984 at level 46 (9.498:
	// 9, room for one), whose first nanosecond is 46·15s/8192, rounded up,
	// = 84,228,516 ns into the sub-window.
	swm := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute, Buckets: 4, Moments: 2}
	swmSteps := []Step{
		{Cost: 10, Allowed: true, Remaining: 0, ResetAfter: 75 * time.Second},
		{Advance: time.Second, Allowed: false, Remaining: 0, RetryAfter: 59*time.Second + 84228516, ResetAfter: 74 * time.Second},
		{Advance: 59 * time.Second, Allowed: false, Remaining: 0, RetryAfter: 84228516, ResetAfter: 15 * time.Second},
		// At the microsecond after it (the level a store in microseconds
		// reads there too): admitted; the unit weighs until 135 s.
		{Advance: 84229 * time.Microsecond, Allowed: true, Remaining: 0, ResetAfter: 135*time.Second - 60084229*time.Microsecond},
		// 75 s: the first sub-window has left; the unit of 60.08 s weighs.
		{Advance: 75*time.Second - 60084229*time.Microsecond, Allowed: true, Remaining: 8, ResetAfter: 75 * time.Second},
	}

	return []Case{
		{Name: "token_bucket/5ps-burst10", Limit: tb, Steps: tbSteps},
		{Name: "fixed_window/boundary-burst", Start: minute0, Limit: fw, Steps: []Step{
			{Advance: 59 * time.Second, Cost: 100, Allowed: true, Remaining: 0, ResetAfter: time.Second},
			{Allowed: false, Remaining: 0, RetryAfter: time.Second, ResetAfter: time.Second},
			{Advance: time.Second, Cost: 100, Allowed: true, Remaining: 0, ResetAfter: time.Minute},
			{Advance: 30 * time.Second, Allowed: false, Remaining: 0, RetryAfter: 30 * time.Second, ResetAfter: 30 * time.Second},
			{Advance: 30 * time.Second, Cost: 7, Allowed: true, Remaining: 93, ResetAfter: time.Minute},
		}},
		{Name: "sliding_window/50pm-estimate-49.5", Start: minute0, Limit: sw50, Steps: sw50Steps},
		{Name: "sliding_window/100pm-ten-more", Start: minute0, Limit: sw100, Steps: sw100Steps},
		{Name: "sliding_window/buckets-4-10pm", Start: minute0, Limit: swb, Steps: swbSteps},
		{Name: "sliding_window/buckets-4-moments-2-10pm", Start: minute0, Limit: swm, Steps: swmSteps},
		{Name: "sliding_log/3ps", Limit: log3, Steps: []Step{
			{Allowed: true, Remaining: 2, ResetAfter: time.Second},
			{Advance: 100 * ms, Allowed: true, Remaining: 1, ResetAfter: time.Second},
			{Advance: 100 * ms, Allowed: true, Remaining: 0, ResetAfter: time.Second},
			{Advance: 100 * ms, Allowed: false, Remaining: 0, RetryAfter: 700 * ms, ResetAfter: 900 * ms},
			{Advance: 699 * ms, Allowed: false, Remaining: 0, RetryAfter: 1 * ms, ResetAfter: 201 * ms},
			{Advance: 1 * ms, Allowed: true, Remaining: 0, ResetAfter: time.Second},
			{Advance: 200 * ms, Cost: 2, Allowed: true, Remaining: 0, ResetAfter: time.Second},
			{Advance: 0, Allowed: false, Remaining: 0, RetryAfter: 800 * ms, ResetAfter: time.Second},
		}},
		// NGINX case 55: rate=1r/s, no burst.
		{Name: "leaky_bucket/nginx-55", Limit: lb(1, time.Second, 1), Steps: []Step{
			{Allowed: true, Remaining: 0, ResetAfter: time.Second},
			{Allowed: false, Remaining: 0, RetryAfter: time.Second, ResetAfter: time.Second},
			{Advance: 500 * ms, Allowed: false, Remaining: 0, RetryAfter: 500 * ms, ResetAfter: 500 * ms},
			{Advance: 500 * ms, Allowed: true, Remaining: 0, ResetAfter: time.Second},
		}},
		// NGINX cases 56/57: rate=1r/s burst=5 (Burst 6): six back to back.
		{Name: "leaky_bucket/nginx-56", Limit: lb(1, time.Second, 6), Steps: []Step{
			{Allowed: true, Remaining: 5, ResetAfter: 1 * time.Second},
			{Allowed: true, Remaining: 4, ResetAfter: 2 * time.Second},
			{Allowed: true, Remaining: 3, ResetAfter: 3 * time.Second},
			{Allowed: true, Remaining: 2, ResetAfter: 4 * time.Second},
			{Allowed: true, Remaining: 1, ResetAfter: 5 * time.Second},
			{Allowed: true, Remaining: 0, ResetAfter: 6 * time.Second},
			{Allowed: false, Remaining: 0, RetryAfter: time.Second, ResetAfter: 6 * time.Second},
			{Advance: 1500 * ms, Allowed: true, Remaining: 0, ResetAfter: 5500 * ms},
		}},
		// NGINX case 59: rate=30r/m is 500 milli-requests per second.
		{Name: "leaky_bucket/nginx-59", Limit: lb(30, time.Minute, 1), Steps: []Step{
			{Allowed: true, Remaining: 0, ResetAfter: 2 * time.Second},
			{Advance: time.Second, Allowed: false, Remaining: 0, RetryAfter: time.Second, ResetAfter: time.Second},
			{Advance: time.Second, Allowed: true, Remaining: 0, ResetAfter: 2 * time.Second},
		}},
		// NGINX case 60: rate=10r/s, no burst.
		{Name: "leaky_bucket/nginx-60", Limit: lb(10, time.Second, 1), Steps: []Step{
			{Allowed: true, Remaining: 0, ResetAfter: 100 * ms},
			{Advance: 100 * ms, Allowed: true, Remaining: 0, ResetAfter: 100 * ms},
			{Advance: 50 * ms, Allowed: false, Remaining: 0, RetryAfter: 50 * ms, ResetAfter: 50 * ms},
		}},
	}
}

// Options describe the limiter under test where it legitimately differs from
// a plain store. The zero Options describe a store with nanosecond time, held
// to every check exactly. Each option relaxes one named check and says why;
// nothing else is relaxed.
type Options struct {
	// Resolution is the store's clock resolution; zero means a nanosecond.
	Resolution time.Duration
	// Reserves describes a limiter that charges its store for a batch of
	// units before the requests that spend them (relief.Batcher): an
	// admission's ResetAfter is then the store's after the whole batch,
	// later than a plain store's after the units spent so far. The step
	// tables check that such a ResetAfter is no earlier than the plain
	// store's (a key is never reported as good as new too soon) instead of
	// equal to it. Allowed, Remaining, RetryAfter and every denial are
	// still checked exactly, but for the sliding log: a batch's unspent
	// units are given back with RefundN, which takes a log's oldest units
	// (the only choice that never lets a window hold more than the rate
	// when the refund is not of the newest request), so from the first
	// step where the batcher answers more strictly than a plain store (a
	// denial for an admission, a later RetryAfter) the sliding log's steps
	// are not compared; an admission where the plain store denies is still
	// a failure.
	Reserves bool
	// HidesUnits describes a limiter that may keep units from its own
	// requests while many race on one key: an OverLimitCache in front of a
	// Batcher remembers a denial until its RetryAfter, and units that a
	// racing request reserved, or gave back to the store, meanwhile are not
	// spent until then (the cache's documented cost: what changes elsewhere
	// during a cached denial is not seen). RunConcurrent then checks that
	// no more than the allowance is admitted, and some, instead of exactly
	// the allowance. Every other check is unchanged.
	HidesUnits bool
	// Small makes a limiter like the one under test whose in-memory store
	// holds at most SmallCapacity keys (a memstore with a small MaxKeys,
	// under the wrapper), for RunEvictionFlood: a store bounded in memory
	// must evict, and eviction must never give an allowance back. A
	// limiter whose store has no bound of its own (Redis, PostgreSQL) sets
	// Unbounded instead. RunWith fails a limiter that declares neither, so
	// that no bounded store skips the check by omission.
	Small         NewStore
	SmallCapacity int
	// Unbounded says that the store under test keeps every key until its
	// state expires (its memory is bounded elsewhere: a Redis maxmemory, a
	// database's disk), so RunEvictionFlood does not apply.
	Unbounded bool
}

// run tells apart the keys of separate test binaries against a store that
// outlives them, such as a redis-server; keySeq counts the keys this binary
// has handed out, which tells apart the runs of one test within it (go
// test -count=2).
var (
	run    = strconv.FormatInt(time.Now().UnixNano(), 36)
	keySeq atomic.Uint64
)

// keyOf returns a key named after the test t that no other call returns,
// in this test binary or another.
func keyOf(t *testing.T) string {
	return t.Name() + "@" + run + "." + strconv.FormatUint(keySeq.Add(1), 36)
}

// Run runs the whole suite against the stores that newStore makes, which
// keep time to the nanosecond.
func Run(t *testing.T, newStore NewStore) { RunWith(t, newStore, Options{}) }

// RunWith runs the whole suite against the stores that newStore makes,
// described by opts.
func RunWith(t *testing.T, newStore NewStore, opts Options) {
	t.Run("steps", func(t *testing.T) { RunSteps(t, newStore, opts) })
	t.Run("bad-input", func(t *testing.T) { RunBadInput(t, newStore) })
	t.Run("keys-independent", func(t *testing.T) { RunKeysIndependent(t, newStore) })
	t.Run("concurrent-one-key", func(t *testing.T) { runConcurrent(t, newStore, 64, opts.HidesUnits) })
	t.Run("refund", func(t *testing.T) { RunRefund(t, newStore) })
	t.Run("peek", func(t *testing.T) { RunPeek(t, newStore) })
	t.Run("eviction-flood", func(t *testing.T) {
		switch {
		case opts.Small != nil && opts.SmallCapacity > 0:
			RunEvictionFlood(t, opts.Small, opts.SmallCapacity)
		case opts.Unbounded:
			t.Skip("the store keeps every key until it expires: it never evicts")
		default:
			t.Fatal("storetest.Options declares neither Small (with SmallCapacity) nor Unbounded: say how the store bounds its keys")
		}
	})
}

// RunSteps runs every case of Cases.
func RunSteps(t *testing.T, newStore NewStore, opts Options) {
	res := max(opts.Resolution, 1)
	up := func(d time.Duration) time.Duration { return (d + res - 1) / res * res }
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			start := c.Start
			if start.IsZero() {
				start = clocktest.Epoch
			}
			clock := clocktest.At(start)
			store := newStore(t, clock)
			prefix := keyOf(t) + ":"
			for i, s := range c.Steps {
				if s.Fine && res > 1 {
					t.Logf("steps %d and on need nanosecond time; the store keeps %v", i, res)
					break
				}
				clock.Advance(s.Advance)
				key, cost := s.Key, s.Cost
				if key == "" {
					key = "k"
				}
				if cost == 0 {
					cost = 1
				}
				got, err := store.AllowN(context.Background(), prefix+key, c.Limit, cost)
				if err != nil {
					t.Fatalf("step %d: AllowN(%s, %d) error: %v", i, key, cost, err)
				}
				want := sluice.Result{Allowed: s.Allowed, Remaining: s.Remaining, RetryAfter: up(s.RetryAfter), ResetAfter: up(s.ResetAfter)}
				if opts.Reserves && got.Allowed && want.Allowed && got.ResetAfter >= want.ResetAfter {
					want.ResetAfter = got.ResetAfter // a batch's reset, no earlier than the plain store's
				}
				if got != want && opts.Reserves && c.Limit.Algorithm == sluice.SlidingLog && stricter(got, want) {
					t.Logf("step %d (t+%v): %s where a plain store answers %s: the batch's refund took the log's oldest units; later steps not compared", i, clock.Now().Sub(start), show(got), show(want))
					break
				}
				if got != want {
					t.Errorf("step %d (t+%v): AllowN(%s, %d) =\n\t%s\nwant\n\t%s", i, clock.Now().Sub(start), key, cost, show(got), show(want))
				}
			}
		})
	}
}

// stricter reports whether got answers no more generously than want: a
// denial where want admits, or the same admission or denial with less
// remaining or a later RetryAfter.
func stricter(got, want sluice.Result) bool {
	switch {
	case got.Allowed && !want.Allowed:
		return false
	case !got.Allowed && want.Allowed:
		return true
	}
	return got.Remaining <= want.Remaining && got.RetryAfter >= want.RetryAfter
}

func show(r sluice.Result) string {
	return fmt.Sprintf("allowed=%v remaining=%d retry=%v reset=%v", r.Allowed, r.Remaining, r.RetryAfter, r.ResetAfter)
}

// RunBadInput checks that every kind of bad input is a clear error wrapping
// the right sentinel, and never a panic or a silent denial.
func RunBadInput(t *testing.T, newStore NewStore) {
	store := newStore(t, clocktest.New())
	ok := sluice.PerSecond(10)
	tests := []struct {
		name string
		key  string
		lim  sluice.Limit
		cost int
		want error
	}{
		{"zero rate", "k", sluice.Limit{Rate: 0, Period: time.Second, Burst: 1}, 1, sluice.ErrInvalidLimit},
		{"negative rate", "k", sluice.Limit{Rate: -5, Period: time.Second, Burst: 1}, 1, sluice.ErrInvalidLimit},
		{"zero period", "k", sluice.Limit{Rate: 1, Burst: 1}, 1, sluice.ErrInvalidLimit},
		{"negative period", "k", sluice.Limit{Rate: 1, Period: -time.Second, Burst: 1}, 1, sluice.ErrInvalidLimit},
		{"burst 0 token bucket", "k", sluice.PerSecond(5).WithBurst(0), 1, sluice.ErrInvalidLimit},
		{"burst 0 leaky bucket", "k", sluice.PerSecond(5).WithBurst(0).WithAlgorithm(sluice.LeakyBucket), 1, sluice.ErrInvalidLimit},
		{"unknown algorithm", "k", ok.WithAlgorithm(sluice.Algorithm(99)), 1, sluice.ErrInvalidLimit},
		{"count-rejected on token bucket", "k", sluice.Limit{Rate: 1, Period: time.Second, Burst: 1, CountRejected: true}, 1, sluice.ErrInvalidLimit},
		{"rate above MaxRate", "k", sluice.Limit{Algorithm: sluice.FixedWindow, Rate: sluice.MaxRate + 1, Period: time.Second}, 1, sluice.ErrInvalidLimit},
		{"burst above MaxRate", "k", sluice.PerSecond(5).WithBurst(sluice.MaxRate + 1), 1, sluice.ErrInvalidLimit},
		{"more than one per nanosecond", "k", sluice.Limit{Rate: 2e9, Period: time.Second, Burst: 1}, 1, sluice.ErrInvalidLimit},
		{"leaky rate below a milli-request per second", "k", sluice.Limit{Algorithm: sluice.LeakyBucket, Rate: 1_000_000, Period: sluice.MaxPeriod, Burst: 1}, 1, sluice.ErrInvalidLimit},
		{"period above MaxPeriod", "k", sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: sluice.MaxPeriod + 1}, 1, sluice.ErrInvalidLimit},
		{"zero cost", "k", ok, 0, sluice.ErrInvalidCost},
		{"negative cost", "k", ok, -1, sluice.ErrInvalidCost},
		{"cost above burst", "k", ok, 11, sluice.ErrCostExceedsCapacity},
		{"cost above window", "k", ok.WithAlgorithm(sluice.FixedWindow), 11, sluice.ErrCostExceedsCapacity},
		{"empty key", "", ok, 1, sluice.ErrInvalidKey},
		{"oversized key", strings.Repeat("x", sluice.MaxKeyLen+1), ok, 1, sluice.ErrInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := store.AllowN(context.Background(), tt.key, tt.lim, tt.cost)
			if !errors.Is(err, tt.want) {
				t.Fatalf("AllowN(%.20q, %v, %d) error = %v, want one wrapping %v", tt.key, tt.lim, tt.cost, err, tt.want)
			}
			if res.Allowed {
				t.Errorf("AllowN with bad input reported Allowed")
			}
			if !strings.Contains(err.Error(), ":") {
				t.Errorf("error %q carries no detail", err)
			}
		})
	}
	// A key of exactly MaxKeyLen bytes is fine.
	if _, err := store.AllowN(context.Background(), strings.Repeat("x", sluice.MaxKeyLen), ok, 1); err != nil {
		t.Errorf("AllowN with a key of MaxKeyLen bytes: %v", err)
	}
}

// allAlgorithms returns one limit per algorithm with a capacity of n units
// per minute, so nothing refills during a test that holds the clock still,
// and sliding windows with 4 buckets, without and with 3 moments.
func allAlgorithms(n int) []sluice.Limit {
	var out []sluice.Limit
	for _, a := range sluice.Algorithms() {
		out = append(out, sluice.Limit{Algorithm: a, Rate: n, Period: time.Minute, Burst: n})
	}
	return append(out, sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: n, Period: time.Minute, Buckets: 4},
		sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: n, Period: time.Minute, Buckets: 4, Moments: 3})
}

// allow is store.AllowN that fails the test on an error, so that a check for
// a denial cannot pass on an error.
func allow(t *testing.T, store sluice.Limiter, key string, lim sluice.Limit, cost int) sluice.Result {
	t.Helper()
	r, err := store.AllowN(context.Background(), key, lim, cost)
	if err != nil {
		t.Fatalf("AllowN(%s, %d): %v", key, cost, err)
	}
	return r
}

// refund is RefundN that fails the test on an error or a limiter without
// it: every store and wrapper refunds, and a skip would let one that lost
// RefundN pass the suite.
func refund(t *testing.T, store sluice.Limiter, key string, lim sluice.Limit, n int) {
	t.Helper()
	rf, ok := store.(sluice.Refunder)
	if !ok {
		t.Fatalf("%T does not implement sluice.Refunder", store)
	}
	if err := rf.RefundN(context.Background(), key, lim, n); err != nil {
		t.Fatalf("RefundN(%s, %d): %v", key, n, err)
	}
}

// RunKeysIndependent checks that spending one key's allowance leaves other
// keys alone.
func RunKeysIndependent(t *testing.T, newStore NewStore) {
	for _, lim := range allAlgorithms(3) {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			store := newStore(t, clocktest.New())
			a, b := keyOf(t)+":a", keyOf(t)+":b"
			if r := allow(t, store, a, lim, 3); !r.Allowed {
				t.Fatalf("AllowN(a, 3) = %v; want allowed", r)
			}
			if r := allow(t, store, a, lim, 1); r.Allowed {
				t.Fatalf("AllowN(a, 1) after spending all = allowed")
			}
			if r := allow(t, store, b, lim, 3); !r.Allowed {
				t.Fatalf("AllowN(b, 3) = %v; want allowed", r)
			}
		})
	}
}

// RunConcurrent has g goroutines hammer one key with the clock held still
// and checks that exactly the allowance is admitted, for every algorithm.
func RunConcurrent(t *testing.T, newStore NewStore, g int) { runConcurrent(t, newStore, g, false) }

// runConcurrent is RunConcurrent; with hides (Options.HidesUnits) it checks
// that at most the allowance is admitted, and some.
func runConcurrent(t *testing.T, newStore NewStore, g int, hides bool) {
	const allowance = 100
	for _, lim := range allAlgorithms(allowance) {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			store := newStore(t, clocktest.New())
			key := keyOf(t)
			admitted, denied := Hammer(t, g, 2*allowance/g*2, func(int) (sluice.Result, error) {
				return store.AllowN(context.Background(), key, lim, 1)
			})
			if t.Failed() {
				t.FailNow()
			}
			switch n := admitted; {
			case hides && (n > allowance || n == 0):
				t.Errorf("%d goroutines admitted %d, want between 1 and %d (denied %d)", g, n, allowance, denied)
			case !hides && n != allowance:
				t.Errorf("%d goroutines admitted %d, want exactly %d (denied %d)", g, n, allowance, denied)
			}
			if denied == 0 {
				t.Errorf("nothing was denied: the test did not exceed the allowance")
			}
		})
	}
}

// Hammer calls call attempts times from each of goroutines goroutines at
// once (call receives the goroutine's index) and counts the calls allowed
// and denied. An error fails t (t.Error) and ends that goroutine's calls;
// a caller that must not go on after one checks t.Failed.
func Hammer(t testing.TB, goroutines, attempts int, call func(g int) (sluice.Result, error)) (admitted, denied int) {
	var a, d atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range attempts {
				r, err := call(g)
				if err != nil {
					t.Errorf("goroutine %d, call %d: %v", g, i, err)
					return
				}
				if r.Allowed {
					a.Add(1)
				} else {
					d.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(a.Load()), int(d.Load())
}

// CountAllowed makes n calls of call one after another and returns how many
// were allowed. An error stops t (t.Fatal), so that a count cannot come out
// right on errors.
func CountAllowed(t testing.TB, n int, call func() (sluice.Result, error)) int {
	t.Helper()
	allowed := 0
	for range n {
		r, err := call()
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			allowed++
		}
	}
	return allowed
}

// RunRefund checks, for stores that implement sluice.Refunder, that a refund
// gives back exactly what was spent and never more than a fresh key holds.
func RunRefund(t *testing.T, newStore NewStore) {
	for _, lim := range allAlgorithms(4) {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			store := newStore(t, clocktest.New())
			key := keyOf(t)
			if r := allow(t, store, key, lim, 4); !r.Allowed {
				t.Fatalf("AllowN(4) denied on a fresh key")
			}
			refund(t, store, key, lim, 2)
			if r := allow(t, store, key, lim, 2); !r.Allowed {
				t.Errorf("after refunding 2, AllowN(2) denied")
			}
			if r := allow(t, store, key, lim, 1); r.Allowed {
				t.Errorf("after refunding 2 and spending 2, AllowN(1) allowed")
			}
			// Refunding more than was spent stops at a fresh key.
			refund(t, store, key, lim, 4)
			refund(t, store, key, lim, 4)
			if r := allow(t, store, key, lim, 4); !r.Allowed {
				t.Errorf("after refunding everything, AllowN(4) denied")
			}
			if r := allow(t, store, key, lim, 1); r.Allowed {
				t.Errorf("refunds raised the key above a fresh key's allowance")
			}
		})
	}
}

// RunPeek checks, for limiters that implement sluice.Peeker, that a peek
// reads a key's state without spending it, for every algorithm: a fresh key
// peeks allowed with its capacity; after 2 hits on a 7/minute key a peek
// reports remaining 5 and the same ResetAfter as the last hit, twice; a key
// spent to its limit, and then denied, peeks allowed with remaining 0 and
// the last decision's reset (a check at the limit is not over it); and the
// decisions that follow are those of a twin key never peeked at.
func RunPeek(t *testing.T, newStore NewStore) {
	for _, lim := range allAlgorithms(7) {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			clock := clocktest.New()
			store := newStore(t, clock)
			pk, ok := store.(sluice.Peeker)
			if !ok {
				// sluice.Peeker's contract: every store and wrapper peeks.
				// A skip here would let one that lost Peek pass the suite.
				t.Fatalf("%T does not implement sluice.Peeker", store)
			}
			peeked, twin := keyOf(t)+":peeked", keyOf(t)+":twin"
			peek := func(when string) sluice.Result {
				t.Helper()
				r, err := pk.Peek(context.Background(), peeked, lim)
				if err != nil {
					t.Fatalf("Peek %s: %v", when, err)
				}
				if again, err := pk.Peek(context.Background(), peeked, lim); err != nil || again != r {
					t.Fatalf("Peek %s = %s, then %s, %v", when, show(r), show(again), err)
				}
				return r
			}
			both := func(cost int) sluice.Result {
				t.Helper()
				a, b := allow(t, store, peeked, lim, cost), allow(t, store, twin, lim, cost)
				if a != b {
					t.Fatalf("AllowN(%d) = %s on the key peeked at, %s on its twin", cost, show(a), show(b))
				}
				return a
			}
			if r := peek("of a fresh key"); !r.Allowed || r.Remaining != 7 || r.RetryAfter != 0 {
				t.Errorf("Peek of a fresh key = %s, want allowed, remaining 7", show(r))
			}
			clock.Advance(10 * time.Second)
			both(1)
			last := both(1)
			want := sluice.Result{Allowed: true, Remaining: 5, ResetAfter: last.ResetAfter}
			if r := peek("after 2 hits"); r != want {
				t.Errorf("Peek after 2 hits = %s, want %s", show(r), show(want))
			}
			clock.Advance(time.Second)
			both(1)
			last = both(4)
			if !last.Allowed || last.Remaining != 0 {
				t.Fatalf("AllowN(4) after 3 hits = %s, want allowed, remaining 0", show(last))
			}
			want = sluice.Result{Allowed: true, ResetAfter: last.ResetAfter}
			if r := peek("at the limit"); r != want {
				t.Errorf("Peek at the limit = %s, want %s", show(r), show(want))
			}
			denied := both(1)
			if denied.Allowed {
				t.Fatalf("AllowN(1) over the limit = %s, want denied", show(denied))
			}
			want = sluice.Result{Allowed: true, ResetAfter: denied.ResetAfter}
			if r := peek("after a denial"); r != want {
				t.Errorf("Peek after a denial = %s, want %s", show(r), show(want))
			}
			clock.Advance(2 * time.Minute)
			both(3)
		})
	}
}

// RunEvictionFlood checks that eviction never gives an allowance back, for
// every algorithm: a client spends key K to its limit (3 an hour), then
// floods the store with 16 times capacity distinct keys, each spent to its
// limit, one a millisecond (so that K is the spent key closest to fresh,
// the first an eviction by expiry picks). K must be refused after every
// capacity keys of the flood, and just before its reset; two periods
// later, when every key of the flood has expired too, K is admitted again
// (a store may refuse a key longer than its own state says, never
// forever). small makes a limiter whose store holds at most capacity keys.
func RunEvictionFlood(t *testing.T, small NewStore, capacity int) {
	flood := 16 * capacity
	for _, a := range sluice.Algorithms() {
		lim := sluice.Limit{Algorithm: a, Rate: 3, Period: 30 * time.Minute, Burst: 3}
		t.Run(a.String(), func(t *testing.T) {
			clock := clocktest.New()
			store := small(t, clock)
			k := keyOf(t)
			if r := allow(t, store, k, lim, 3); !r.Allowed {
				t.Fatalf("AllowN(K, 3) on a fresh key = %s, want allowed", show(r))
			}
			first := allow(t, store, k, lim, 1)
			if first.Allowed || first.RetryAfter <= 0 {
				t.Fatalf("AllowN(K, 1) after spending 3 = %s, want refused with a RetryAfter", show(first))
			}
			reset := clock.Now().Add(first.RetryAfter)
			refused := func(when string) {
				t.Helper()
				if r := allow(t, store, k, lim, 1); r.Allowed {
					t.Fatalf("%s (the store holds %d keys), K was admitted again (%s), %v before its reset: eviction gave its allowance back",
						when, capacity, show(r), reset.Sub(clock.Now()))
				}
			}
			prefix := keyOf(t) + ":flood:"
			for i := range flood {
				clock.Advance(time.Millisecond)
				key := prefix + strconv.Itoa(i)
				allow(t, store, key, lim, 3) // spent, or already refused
				if n := i + 1; n%capacity == 0 {
					refused(fmt.Sprintf("after %d distinct spent keys", n))
				}
			}
			clock.Set(reset.Add(-time.Millisecond))
			refused("a millisecond before K's reset, after the flood")
			clock.Set(reset.Add(2 * lim.Period))
			if r := allow(t, store, k, lim, 1); !r.Allowed {
				t.Errorf("two periods after K's reset, when every flood key has expired, AllowN(K, 1) = %s, want allowed", show(r))
			}
		})
	}
}
