package relief_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/relief"
)

// splitOver is a PeriodSplit over two in-memory stores.
func splitOver(_ *testing.T, _ sluice.Clock, mem func() *memstore.Store) sluice.Limiter {
	return relief.NewPeriodSplit(mem(), mem())
}

// The per-second split, over two in-memory stores, is held to the whole
// conformance suite (the step tables' limits fall on both sides of a
// minute), to the settle and debt suites, and to the eviction flood over
// small stores.
func TestPeriodSplitConformance(t *testing.T) {
	runOver(t, splitOver, storetest.Options{})
	split := func(t *testing.T, clock sluice.Clock) sluice.Limiter {
		return splitOver(t, clock, func() *memstore.Store { return newMem(t, clock) })
	}
	t.Run("settle", func(t *testing.T) { storetest.RunSettle(t, split) })
	t.Run("debt", func(t *testing.T) { storetest.RunDebt(t, split, 0) })
	t.Run("calendar", func(t *testing.T) { storetest.RunCalendarMonth(t, split, storetest.Options{}) })
}

// REDIS_PERSECOND's split: limits whose period is under a minute (the
// SECOND unit, and Sluice's multiples of a second below 60) are decided,
// peeked and refunded on the per-second store; the others on the main
// store. Each store sees only its own keys.
func TestPeriodSplitRoutesByPeriod(t *testing.T) {
	ctx := context.Background()
	main, perSecond := memstore.New(memstore.Config{}), memstore.New(memstore.Config{})
	defer main.Close()
	defer perSecond.Close()
	var l sluice.Limiter = relief.NewPeriodSplit(main, perSecond)
	fw := func(p time.Duration) sluice.Limit {
		return sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: p, Burst: 10}
	}
	for _, tt := range []struct {
		period time.Duration
		want   *memstore.Store
	}{
		{time.Second, perSecond}, {30 * time.Second, perSecond}, {time.Minute, main}, {time.Hour, main},
	} {
		lim := fw(tt.period)
		other := main
		if tt.want == main {
			other = perSecond
		}
		key := "k" + tt.period.String()
		if _, err := l.AllowN(ctx, key, lim, 4); err != nil {
			t.Fatal(err)
		}
		if r, _ := tt.want.Peek(ctx, key, lim); r.Remaining != 6 {
			t.Errorf("period %v: the chosen store has %d remaining, want 6", tt.period, r.Remaining)
		}
		if r, _ := other.Peek(ctx, key, lim); r.Remaining != 10 {
			t.Errorf("period %v: the other store was spent: %d remaining", tt.period, r.Remaining)
		}
		if err := l.(sluice.Refunder).RefundN(ctx, key, lim, 1); err != nil {
			t.Fatal(err)
		}
		if r, err := l.(sluice.Peeker).Peek(ctx, key, lim); err != nil || r.Remaining != 7 {
			t.Errorf("period %v: Peek after a refund of 1 = %+v, %v; want 7 remaining", tt.period, r, err)
		}
	}
}

// refusing is a store that serves no limit and cannot refund, peek or
// charge.
type refusing struct{ sluice.Limiter }

func (refusing) ValidateLimit(sluice.Limit) error { return sluice.ErrInvalidLimit }

// The split keeps each store's capabilities: ValidateLimit is the chosen
// store's, and a store that cannot refund, peek or charge gives
// errors.ErrUnsupported (sluice.ErrCannotSettle for a charge) for its
// limits only.
func TestPeriodSplitCapabilities(t *testing.T) {
	ctx := context.Background()
	main := memstore.New(memstore.Config{})
	defer main.Close()
	l := relief.NewPeriodSplit(main, refusing{main})
	sec, hour := sluice.PerSecond(5), sluice.PerHour(5)
	if err := l.ValidateLimit(sec); !errors.Is(err, sluice.ErrInvalidLimit) {
		t.Errorf("ValidateLimit(per second) = %v, want the per-second store's refusal", err)
	}
	if err := l.ValidateLimit(hour); err != nil {
		t.Errorf("ValidateLimit(per hour) = %v, want the main store's nil", err)
	}
	if err := l.RefundN(ctx, "k", sec, 1); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("RefundN on a store without refunds = %v, want errors.ErrUnsupported", err)
	}
	if _, err := l.Peek(ctx, "k", sec); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Peek on a store without peeks = %v, want errors.ErrUnsupported", err)
	}
	if _, err := l.ChargeN(ctx, "k", sec, 1); !errors.Is(err, sluice.ErrCannotSettle) {
		t.Errorf("ChargeN on a store without charges = %v, want sluice.ErrCannotSettle", err)
	}
	if _, err := l.Peek(ctx, "k", hour); err != nil {
		t.Errorf("Peek on the main store = %v", err)
	}
}
