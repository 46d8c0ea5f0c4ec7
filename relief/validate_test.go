package relief_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/relief"
)

// TestValidateLimitForwards: the over-limit cache, the batcher and the
// hybrid refuse, at configuration time, the limits the store behind them
// cannot serve, and invalid limits themselves.
func TestValidateLimitForwards(t *testing.T) {
	mem := memstore.New(memstore.Config{SweepInterval: -1})
	defer mem.Close()
	store := storetest.PickyAbout(mem)
	for name, v := range map[string]sluice.LimitValidator{
		"cache":         relief.NewOverLimitCache(store, relief.CacheConfig{}),
		"batcher":       relief.NewBatcher(store, relief.BatchConfig{}),
		"hybrid global": relief.NewHybrid(mem, store, nil),
		"hybrid local":  relief.NewHybrid(store, mem, nil),
	} {
		storetest.CheckValidateForwards(t, name, v)
	}
	// A store that is not a LimitValidator serves every valid limit.
	if err := relief.NewOverLimitCache(mem, relief.CacheConfig{}).ValidateLimit(storetest.OddLimit); err != nil {
		t.Errorf("cache over memstore: ValidateLimit(%v) = %v, want nil", storetest.OddLimit, err)
	}
}
