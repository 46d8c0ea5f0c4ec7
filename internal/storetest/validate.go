package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Picky is a Limiter that serves every limit but those of one period, as a
// store with a coarse clock would: its ValidateLimit refuses a limit of
// period Refuse with ErrPicky.
type Picky struct {
	sluice.Limiter
	Refuse time.Duration
}

// ErrPicky is Picky's refusal.
var ErrPicky = errors.New("picky: period refused")

// ValidateLimit refuses a limit of period p.Refuse with ErrPicky.
func (p Picky) ValidateLimit(lim sluice.Limit) error {
	if lim.Period == p.Refuse {
		return ErrPicky
	}
	return nil
}

// OddLimit is a valid limit of a period (1.5 µs) a Picky refuses in
// PickyAbout; a store whose clock counts microseconds could not serve it.
var OddLimit = sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 10, Period: 1500 * time.Nanosecond, Burst: 10}

// PickyAbout wraps store in a Picky that refuses OddLimit's period.
func PickyAbout(store sluice.Limiter) Picky { return Picky{store, OddLimit.Period} }

// CheckValidateForwards checks that v, a wrapper around a PickyAbout store,
// accepts an ordinary limit, refuses OddLimit with the store's ErrPicky, and
// refuses the zero limit itself with sluice.ErrInvalidLimit. name says
// which wrapper failed.
func CheckValidateForwards(t *testing.T, name string, v sluice.LimitValidator) {
	t.Helper()
	ok := sluice.PerSecond(10)
	if err := v.ValidateLimit(ok); err != nil {
		t.Errorf("%s: ValidateLimit(%v) = %v, want nil", name, ok, err)
	}
	if err := v.ValidateLimit(OddLimit); !errors.Is(err, ErrPicky) {
		t.Errorf("%s: ValidateLimit(%v) = %v, want the store's refusal", name, OddLimit, err)
	}
	if err := v.ValidateLimit(sluice.Limit{}); !errors.Is(err, sluice.ErrInvalidLimit) {
		t.Errorf("%s: ValidateLimit of the zero limit = %v, want %v", name, err, sluice.ErrInvalidLimit)
	}
}
