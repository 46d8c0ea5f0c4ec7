package relief_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/relief"
)

// The over-limit cache and the hybrid forward ChargeN: settles and debts
// come out exactly as on the store alone.
func TestSettleForwards(t *testing.T) {
	for name, wrap := range map[string]func(t *testing.T, clock sluice.Clock) sluice.Limiter{
		"OverLimitCache": func(t *testing.T, clock sluice.Clock) sluice.Limiter {
			return relief.NewOverLimitCache(newMem(t, clock), relief.CacheConfig{Clock: clock})
		},
		"Hybrid": func(t *testing.T, clock sluice.Clock) sluice.Limiter {
			return relief.NewHybrid(newMem(t, clock), newMem(t, clock), nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Run("settle", func(t *testing.T) { storetest.RunSettle(t, wrap) })
			t.Run("debt", func(t *testing.T) { storetest.RunDebt(t, wrap, 0) })
		})
	}
}
