package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/redisstore"
)

// Reserve then settle on a real Redis: 1,000 random settles leave each
// key's spent total equal to the sum of actual costs, exactly, and a debt
// delays the next request by exactly what it owes.
func TestSettleOnRedis(t *testing.T) {
	url := singleURL(t)
	newStore := func(t *testing.T, clock sluice.Clock) sluice.Limiter { return open(t, url, clock) }
	t.Run("settle", func(t *testing.T) { storetest.RunSettle(t, newStore) })
	t.Run("debt", func(t *testing.T) { storetest.RunDebt(t, newStore, time.Microsecond) })
}

// A counter kept in envoyproxy/ratelimit's layout, and a calendar window,
// cannot carry a debt: ChargeN says so rather than charging some other key.
func TestChargeRefusesLayoutsWithoutDebt(t *testing.T) {
	s, err := redisstore.New(context.Background(), redisstore.Config{URL: singleURL(t), KeyFormat: redisstore.KeyEnvoy})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.ChargeN(ctx, "k", sluice.PerMinute(5).WithAlgorithm(sluice.FixedWindow), 1); !errors.Is(err, sluice.ErrInvalidLimit) {
		t.Errorf("ChargeN on the envoy layout: %v, want ErrInvalidLimit", err)
	}
	day := sluice.PerCalendar(5, sluice.Calendar{Unit: sluice.CalendarDay})
	if _, err := s.ChargeN(ctx, "k", day, 1); !errors.Is(err, sluice.ErrInvalidLimit) {
		t.Errorf("ChargeN on a calendar window: %v, want ErrInvalidLimit", err)
	}
}
