package relief_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/relief"
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

// TestValidateLimitForwards: the over-limit cache, the batcher and the
// hybrid refuse, at configuration time, the limits the store behind them
// cannot serve, and invalid limits themselves.
func TestValidateLimitForwards(t *testing.T) {
	mem := memstore.New(memstore.Config{SweepInterval: -1})
	defer mem.Close()
	ok := sluice.PerSecond(10)
	odd := sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 10, Period: 1500 * time.Nanosecond, Burst: 10}
	store := picky{mem, odd.Period}
	for name, v := range map[string]sluice.LimitValidator{
		"cache":         relief.NewOverLimitCache(store, relief.CacheConfig{}),
		"batcher":       relief.NewBatcher(store, relief.BatchConfig{}),
		"hybrid global": relief.NewHybrid(mem, store, nil),
		"hybrid local":  relief.NewHybrid(store, mem, nil),
	} {
		if err := v.ValidateLimit(ok); err != nil {
			t.Errorf("%s: ValidateLimit(%v) = %v, want nil", name, ok, err)
		}
		if err := v.ValidateLimit(odd); !errors.Is(err, errPicky) {
			t.Errorf("%s: ValidateLimit(%v) = %v, want the store's refusal", name, odd, err)
		}
		if err := v.ValidateLimit(sluice.Limit{}); !errors.Is(err, sluice.ErrInvalidLimit) {
			t.Errorf("%s: ValidateLimit of the zero limit = %v, want %v", name, err, sluice.ErrInvalidLimit)
		}
	}
	// A store that is not a LimitValidator serves every valid limit.
	if err := relief.NewOverLimitCache(mem, relief.CacheConfig{}).ValidateLimit(odd); err != nil {
		t.Errorf("cache over memstore: ValidateLimit(%v) = %v, want nil", odd, err)
	}
}
