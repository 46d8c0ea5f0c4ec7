package algorithm

import "github.com/sluicehq/sluice"

// Charger is implemented by the states that can spend units without
// refusing them, leaving the key in debt (see sluice.Charger): TokenBucket,
// FixedWindow and SlidingWindow. A key owes at most one capacity beyond
// empty; what a charge would add past that is not charged.
type Charger interface {
	// Charge spends cost units at now whether or not they fit, and returns
	// what Peek reports afterwards. cost is at least 1.
	Charge(now int64, lim sluice.Limit, cost int) sluice.Result
}

var (
	_ Charger = (*TokenBucket)(nil)
	_ Charger = (*FixedWindow)(nil)
	_ Charger = (*SlidingWindow)(nil)
)

// Charge pushes the theoretical arrival time forward by cost emission
// intervals, past a full bucket's span if need be, so that the next request
// waits exactly the time the debt takes to refill; TAT stays within two
// spans of now.
func (s *TokenBucket) Charge(now int64, lim sluice.Limit, cost int) sluice.Result {
	t := Interval(lim)
	span := int64(lim.Burst) * t
	tat := max(s.TAT, now)
	room := max(now+2*span-tat, 0) / t // units that fit before the cap
	s.TAT = tat + min(int64(cost), room)*t
	return s.Peek(now, lim)
}

// Charge counts cost units in the window that holds now, past its rate if
// need be (up to twice the rate): the key is refused until the window ends.
func (s *FixedWindow) Charge(now int64, lim sluice.Limit, cost int) sluice.Result {
	s.Take(now, lim, 0) // moves to the window that holds now; spends nothing
	s.Count = chargeCount(s.Count, int64(lim.Rate), cost)
	return s.Peek(now, lim)
}

// Charge counts cost units in the current window, past the rate if need be
// (up to twice the rate): the debt weighs on the estimate as any count does,
// through this window and, by the overlap, the next.
func (s *SlidingWindow) Charge(now int64, lim sluice.Limit, cost int) sluice.Result {
	p := int64(lim.Period)
	s.roll(now, p)
	s.Curr = chargeCount(s.Curr, int64(lim.Rate), cost)
	s.setUntil(p)
	return s.Peek(now, lim)
}

// chargeCount is count plus cost, kept at most 2·rate (and no higher than
// it already is).
func chargeCount(count, rate int64, cost int) int64 {
	limit := min(rate, maxCount) * 2
	if count >= limit {
		return count
	}
	return count + min(int64(cost), limit-count)
}
