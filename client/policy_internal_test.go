package client

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/rlheader"
)

func TestPolicyLimit(t *testing.T) {
	tb := func(rate int, period time.Duration, burst int) sluice.Limit {
		return sluice.Limit{Algorithm: sluice.TokenBucket, Rate: rate, Period: period, Burst: burst}
	}
	pol := func(q int64, w time.Duration) rlheader.Policy { return rlheader.Policy{Name: "p", Quota: q, Window: w} }
	hundred := sluice.PerSecond(100)
	tests := []struct {
		name   string
		lim    sluice.Limit
		ps     []rlheader.Policy
		frac   float64
		want   sluice.Limit // zero: lim applies
		window time.Duration
	}{
		{"q=10;w=1", hundred, []rlheader.Policy{pol(10, time.Second)}, 0.9, tb(9, time.Second, 1), time.Second},
		{"q=100;w=60", hundred, []rlheader.Policy{pol(100, time.Minute)}, 0.9, tb(90, time.Minute, 10), time.Minute},
		{"half", hundred, []rlheader.Policy{pol(10, time.Second)}, 0.5, tb(5, time.Second, 5), time.Second},
		{"whole quota", hundred, []rlheader.Policy{pol(10, time.Second)}, 1, tb(10, time.Second, 1), time.Second},
		{"under one per window", hundred, []rlheader.Policy{pol(1, 10*time.Second)}, 0.9, tb(1, 11111111112, 1), 10 * time.Second},
		{"quota 0 paced as 1", hundred, []rlheader.Policy{pol(0, time.Second)}, 0.9, tb(1, 1111111112, 1), time.Second},
		{"quota 0 above lim", sluice.Every(time.Hour), []rlheader.Policy{pol(0, time.Second)}, 0.9, sluice.Limit{}, 0},
		{"equal to lim", hundred, []rlheader.Policy{pol(100, time.Second)}, 0.9, sluice.Limit{}, 0},
		{"above lim", sluice.PerSecond(9), []rlheader.Policy{pol(10, time.Second)}, 0.9, sluice.Limit{}, 0},
		{"lim's burst caps", hundred.WithBurst(3), []rlheader.Policy{pol(100, time.Minute)}, 0.9, tb(90, time.Minute, 3), time.Minute},
		{"leaky bucket kept", hundred.WithAlgorithm(sluice.LeakyBucket), []rlheader.Policy{pol(10, time.Second)}, 0.9,
			sluice.Limit{Algorithm: sluice.LeakyBucket, Rate: 9, Period: time.Second, Burst: 1}, time.Second},
		{"fixed window becomes a bucket", sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Second},
			[]rlheader.Policy{pol(10, time.Second)}, 0.9, tb(9, time.Second, 1), time.Second},
		{"tightest rate, smallest burst", hundred, []rlheader.Policy{pol(50, time.Second), pol(100, time.Minute), pol(1000, time.Hour)}, 0.9,
			tb(900, time.Hour, 5), time.Hour},
		{"one of two below lim", sluice.PerSecond(20), []rlheader.Policy{pol(1000, time.Second), pol(100, 10*time.Second)}, 0.9,
			tb(90, 10*time.Second, 10), 10 * time.Second},
		{"no window", hundred, []rlheader.Policy{{Name: "p", Quota: 10}}, 0.9, sluice.Limit{}, 0},
		{"content bytes", hundred, []rlheader.Policy{{Name: "p", Quota: 10, Window: time.Second, Unit: rlheader.UnitContentBytes}}, 0.9, sluice.Limit{}, 0},
		{"requests named", hundred, []rlheader.Policy{{Name: "p", Quota: 10, Window: time.Second, Unit: rlheader.UnitRequests}}, 0.9,
			tb(9, time.Second, 1), time.Second},
		{"window beyond MaxPeriod", sluice.PerDay(1), []rlheader.Policy{pol(10, 2*sluice.MaxPeriod)}, 0.9, sluice.Limit{}, 0},
		{"invalid lim", sluice.Limit{}, []rlheader.Policy{pol(10, time.Second)}, 0.9, sluice.Limit{}, 0},
	}
	for _, tt := range tests {
		got, window := policyLimit(tt.lim, tt.ps, tt.frac)
		if got != tt.want || window != tt.window {
			t.Errorf("%s: policyLimit = %+v, %v; want %+v, %v", tt.name, got, window, tt.want, tt.window)
		}
	}
}

func TestFraction(t *testing.T) {
	for f, want := range map[float64]float64{0: DefaultFraction, -1: DefaultFraction, 1.5: DefaultFraction, 0.5: 0.5, 1: 1} {
		if got := fraction(f); got != want {
			t.Errorf("fraction(%v) = %v, want %v", f, got, want)
		}
	}
}
