package sluice_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestClockOrStandsTheSystemClockForNil checks that a nil Clock becomes
// SystemClock, which reads the system's time, and that a Clock given is
// kept.
func TestClockOrStandsTheSystemClockForNil(t *testing.T) {
	before := time.Now()
	c := sluice.ClockOr(nil)
	if _, ok := c.(sluice.SystemClock); !ok {
		t.Fatalf("ClockOr(nil) = %T, want sluice.SystemClock", c)
	}
	if now := c.Now(); now.Before(before) || now.Sub(before) > time.Minute {
		t.Errorf("SystemClock.Now() = %v, want about %v", now, before)
	}
	fixed := fixedClock{time.Unix(1, 0)}
	if got := sluice.ClockOr(fixed); got != sluice.Clock(fixed) {
		t.Errorf("ClockOr(%v) = %v, want it kept", fixed, got)
	}
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }
