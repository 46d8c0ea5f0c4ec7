package failsafe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/memstore"
)

// picky serves every limit but those of one period, as a store with a
// coarse clock would.
type picky struct {
	sluice.Limiter
	refuse time.Duration
}

var errPicky = errors.New("picky: period refused")

func (p picky) ValidateLimit(lim sluice.Limit) error {
	if lim.Period == p.refuse {
		return errPicky
	}
	return nil
}

// TestValidateLimitForwards: a failsafe Limiter refuses, at configuration
// time, the limits its primary cannot serve, in every mode, and in Local
// mode those its local limiter cannot serve; it refuses invalid limits
// itself.
func TestValidateLimitForwards(t *testing.T) {
	mem := memstore.New(memstore.Config{SweepInterval: -1})
	defer mem.Close()
	ok := sluice.PerSecond(10)
	odd := sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 10, Period: 1500 * time.Nanosecond, Burst: 10}
	for _, mode := range []failsafe.Mode{failsafe.Open, failsafe.Closed, failsafe.Local} {
		l, err := failsafe.New(failsafe.Config{Primary: picky{mem, odd.Period}, Mode: mode, Local: mem})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.ValidateLimit(ok); err != nil {
			t.Errorf("%v: ValidateLimit(%v) = %v, want nil", mode, ok, err)
		}
		if err := l.ValidateLimit(odd); !errors.Is(err, errPicky) {
			t.Errorf("%v: ValidateLimit(%v) = %v, want the primary's refusal", mode, odd, err)
		}
		if err := l.ValidateLimit(sluice.Limit{}); !errors.Is(err, sluice.ErrInvalidLimit) {
			t.Errorf("%v: ValidateLimit of the zero limit = %v, want %v", mode, err, sluice.ErrInvalidLimit)
		}
	}
	l, err := failsafe.New(failsafe.Config{Primary: mem, Mode: failsafe.Local, Local: picky{mem, odd.Period}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ValidateLimit(odd); !errors.Is(err, errPicky) {
		t.Errorf("local mode: ValidateLimit(%v) = %v, want the local limiter's refusal", odd, err)
	}
	if _, err := l.AllowN(context.Background(), "k", ok, 1); err != nil {
		t.Fatal(err)
	}
}
