package algorithm_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// nginx is a reference model of NGINX limit_req's accounting for one key,
// written from NGINX's ngx_http_limit_req_module.c accounting, independently of
// LeakyBucket: rate in milli-requests per second, a millisecond clock,
// excess in milli-requests, rejected requests not charged. A request of cost
// c adds 1000·c instead of 1000.
type nginx struct {
	exists bool  // the key has a node in the zone
	excess int64 // milli-requests
	last   int64 // ms
}

// nginxRate returns the rate in milli-requests per second, truncated:
// Rate·1000·1e9/Period.
func nginxRate(lim sluice.Limit) int64 {
	return int64(lim.Rate) * 1000 * 1e9 / int64(lim.Period) // Rate ≤ 20: no overflow
}

// take decides a request of cost at nowNs (Unix ns) and returns whether it
// passes and the excess NGINX computes for it.
func (n *nginx) take(nowNs int64, lim sluice.Limit, cost int) (pass bool, excess int64) {
	rate, burst := nginxRate(lim), int64(lim.Burst-1)*1000 // NGINX burst = Burst−1
	now := floorDiv(nowNs, 1e6)
	extra := 1000 * int64(cost-1)
	if !n.exists {
		// A new key starts at excess 0.
		excess = extra
		if excess > burst {
			return false, excess
		}
		*n = nginx{exists: true, excess: excess, last: now}
		return true, excess
	}
	ms := now - n.last
	switch {
	case ms < -60000:
		ms = 1
	case ms < 0:
		ms = 0
	}
	excess = max(n.excess-rate*ms/1000+1000, 0) + extra
	if excess > burst {
		return false, excess // not charged
	}
	n.excess = excess
	if ms != 0 {
		n.last = now
	}
	return true, excess
}

// lbStep is a step of an NGINX case: the request at t0+at of cost, whether it
// passes, the excess NGINX computes for it, and the rest of the Result.
type lbStep struct {
	at     time.Duration
	cost   int
	excess int64
	want   outcome
}

// runLeaky plays steps on a fresh LeakyBucket and on the reference model. On
// a pass the bucket must store the step's excess; on a rejection it must not
// change at all.
func runLeaky(t *testing.T, lim sluice.Limit, steps []lbStep) {
	t.Helper()
	s, ref := new(algorithm.LeakyBucket), new(nginx)
	for i, st := range steps {
		now := t0 + int64(st.at)
		before := *s
		res := s.Take(now, lim, st.cost)
		if got := outcomeOf(res); got != st.want {
			t.Errorf("step %d: AllowN(t0+%v, %v) = %v, want %v", i, st.at, st.cost, got, st.want)
		}
		if res.Allowed && s.Excess != st.excess {
			t.Errorf("step %d: AllowN(t0+%v, %v) stored excess %d, want %d", i, st.at, st.cost, s.Excess, st.excess)
		}
		if !res.Allowed && *s != before {
			t.Errorf("step %d: AllowN(t0+%v, %v) rejected but changed the state from %+v to %+v", i, st.at, st.cost, before, *s)
		}
		if pass, excess := ref.take(now, lim, st.cost); pass != st.want.allowed || excess != st.excess {
			t.Errorf("step %d: reference(t0+%v, %v) = %v excess %d, want %v excess %d", i, st.at, st.cost, pass, excess, st.want.allowed, st.excess)
		}
	}
}

// leaky returns a leaky bucket limit of NGINX's rate=n/per and burst=nginxBurst.
func leaky(n int, per time.Duration, nginxBurst int) sluice.Limit {
	return sluice.Limit{Algorithm: sluice.LeakyBucket, Rate: n, Period: per, Burst: nginxBurst + 1}
}

// NGINX limit_req cases (rate, burst, nodelay, r/m). Delays are the queue's
// business; here only acceptance, excess and the Result.
func TestLeakyBucketNGINX(t *testing.T) {
	const ms = time.Millisecond
	t.Run("55 rate=1r/s", func(t *testing.T) {
		runLeaky(t, leaky(1, time.Second, 0), []lbStep{
			{0, 1, 0, ok(0, time.Second)},
			{0, 1, 1000, no(0, time.Second, time.Second)},
			{500 * ms, 1, 500, no(0, 500*ms, 500*ms)},
			{1000 * ms, 1, 0, ok(0, time.Second)},
		})
	})
	// burst=5: excess 0, 1000, …, 5000 accepted, the 7th (6000) rejected.
	// With delays on they would wait excess·1000/rate ms; with nodelay (57)
	// they pass at once. The meter is the same.
	burst5 := []lbStep{
		{0, 1, 0, ok(5, 1*time.Second)},
		{0, 1, 1000, ok(4, 2*time.Second)},
		{0, 1, 2000, ok(3, 3*time.Second)},
		{0, 1, 3000, ok(2, 4*time.Second)},
		{0, 1, 4000, ok(1, 5*time.Second)},
		{0, 1, 5000, ok(0, 6*time.Second)},
		{0, 1, 6000, no(0, time.Second, 6*time.Second)},
	}
	t.Run("56 rate=1r/s burst=5", func(t *testing.T) {
		runLeaky(t, leaky(1, time.Second, 5), burst5)
	})
	t.Run("57 rate=1r/s burst=5 nodelay", func(t *testing.T) {
		runLeaky(t, leaky(1, time.Second, 5), append(burst5,
			lbStep{999 * ms, 1, 5001, no(0, 1*ms, 5001*ms)},
			lbStep{1000 * ms, 1, 5000, ok(0, 6*time.Second)},
		))
	})
	t.Run("59 rate=30r/m", func(t *testing.T) {
		lim := leaky(30, time.Minute, 0)
		if got := algorithm.MilliRate(lim); got != 500 {
			t.Errorf("MilliRate(%v) = %d, want 500", lim, got)
		}
		runLeaky(t, lim, []lbStep{
			{0, 1, 0, ok(0, 2*time.Second)},
			{1000 * ms, 1, 500, no(0, time.Second, time.Second)},
			{2000 * ms, 1, 0, ok(0, 2*time.Second)},
		})
	})
	t.Run("60 rate=10r/s", func(t *testing.T) {
		runLeaky(t, leaky(10, time.Second, 0), []lbStep{
			{0, 1, 0, ok(0, 100*ms)},
			{100 * ms, 1, 0, ok(0, 100*ms)},
			{150 * ms, 1, 500, no(0, 50*ms, 50*ms)},
		})
	})
}

// TestLeakyBucketMillisecondClock shows that the clock is milliseconds,
// floored: 99.999999 ms is 99 ms, and the retry lands on the next
// millisecond.
func TestLeakyBucketMillisecondClock(t *testing.T) {
	const ms = time.Millisecond
	runLeaky(t, leaky(10, time.Second, 0), []lbStep{
		{0, 1, 0, ok(0, 100*ms)},
		{100*ms - 1, 1, 10, no(0, 1, 1)},
		{100 * ms, 1, 0, ok(0, 100*ms)},
		// Within the same millisecond nothing drains.
		{100*ms + 999999, 1, 1000, no(0, 99*ms+1, 99*ms+1)},
	})
}

func TestLeakyBucketCost(t *testing.T) {
	const ms = time.Millisecond
	runLeaky(t, leaky(1, time.Second, 5), []lbStep{
		{0, 3, 2000, ok(3, 3*time.Second)},
		{0, 4, 6000, no(3, time.Second, 3*time.Second)},
		{0, 3, 5000, ok(0, 6*time.Second)},
		{2500 * ms, 2, 4500, ok(0, 5500*ms)},
		{2500 * ms, 6, 10500, no(0, 5500*ms, 5500*ms)},
		{8*time.Second - 1, 6, 5001, no(5, 1, 1)},
		{8 * time.Second, 6, 5000, ok(0, 6*time.Second)},
	})
}

// TestLeakyBucketReference plays random sequences, some with the clock
// jumping back, on LeakyBucket and on the reference model and compares the
// decision and the stored excess and last at every step.
func TestLeakyBucketReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim, reqs := drawRun(t, sluice.LeakyBucket, 1, 150)
		if rapid.Bool().Draw(t, "jumps") {
			// Move some requests back in time: within a minute (elapsed 0)
			// or further (elapsed 1).
			jumps := rapid.SliceOfN(rapid.Int64Range(0, 90e9), len(reqs), len(reqs)).Draw(t, "back")
			for i := range reqs {
				reqs[i].at -= jumps[i] * int64(i%3/2)
			}
		}
		s, ref := new(algorithm.LeakyBucket), new(nginx)
		for i, r := range reqs {
			res := s.Take(r.at, lim, r.cost)
			pass, excess := ref.take(r.at, lim, r.cost)
			if res.Allowed != pass {
				t.Fatalf("%v step %d: AllowN%v = %v, reference says %v (excess %d)", lim, i, r, res.Allowed, pass, excess)
			}
			if ref.exists && (s.Excess != ref.excess || s.Last != ref.last) {
				t.Fatalf("%v step %d: AllowN%v left excess %d last %d, reference has %d, %d", lim, i, r, s.Excess, s.Last, ref.excess, ref.last)
			}
		}
	})
}

// TestLeakyBucketMilliRate checks the truncation of the rate.
func TestLeakyBucketMilliRate(t *testing.T) {
	for _, tt := range []struct {
		lim  sluice.Limit
		want int64
	}{
		{leaky(1, time.Second, 0), 1000},
		{leaky(30, time.Minute, 0), 500},
		{leaky(1, time.Minute, 0), 16}, // 16.67 truncated, as NGINX's 1r/m
		{leaky(7, 3*time.Second, 0), 2333},
		{leaky(1, time.Millisecond, 0), 1000000},
	} {
		if got := algorithm.MilliRate(tt.lim); got != tt.want {
			t.Errorf("MilliRate(%v) = %d, want %d", tt.lim, got, tt.want)
		}
		if got := nginxRate(tt.lim); got != tt.want {
			t.Errorf("nginxRate(%v) = %d, want %d", tt.lim, got, tt.want)
		}
	}
}
