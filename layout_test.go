package sluice_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// A limit that takes a sliding window rule's place takes the rule's layout
// where its own rate and period allow it, the two-window counter where
// they do not; a limit or a rule of another algorithm is left as it is.
func TestWithLayoutOfTakesTheRulesLayoutWhereItMay(t *testing.T) {
	sw := func(rate int, period time.Duration, k, d uint8) sluice.Limit {
		return sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: rate, Period: period, Buckets: k, Moments: d}
	}
	tb := sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 10, Burst: 10, Period: time.Minute}
	for _, c := range []struct {
		name            string
		lim, rule, want sluice.Limit
	}{
		{"a plan's default onto buckets: 1", sw(10, time.Minute, 16, 2), sw(100, time.Minute, 1, 0), sw(10, time.Minute, 1, 0)},
		{"a plan's default onto 8 with 4 means", sw(10, time.Minute, 16, 2), sw(100, time.Minute, 8, 4), sw(10, time.Minute, 8, 4)},
		{"the counter onto the default", sw(10, time.Minute, 0, 0), sw(100, time.Minute, 16, 2), sw(10, time.Minute, 16, 2)},
		{"a rate moments do not count", sw(20_000, time.Minute, 0, 0), sw(100, time.Minute, 16, 2), sw(20_000, time.Minute, 0, 0)},
		{"a period 16 does not divide", sw(10, time.Second+time.Microsecond, 16, 2), sw(100, time.Minute, 16, 2), sw(10, time.Second+time.Microsecond, 0, 0)},
		{"a token bucket onto a sliding window", tb, sw(100, time.Minute, 1, 0), tb},
		{"a sliding window onto a token bucket", sw(10, time.Minute, 16, 2), tb, sw(10, time.Minute, 16, 2)},
	} {
		if got := c.lim.WithLayoutOf(c.rule); got != c.want {
			t.Errorf("%s: %v.WithLayoutOf(%v) = %v, want %v", c.name, c.lim, c.rule, got, c.want)
		}
	}
}
