package redisstore_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/redisstore"
)

// openLazy returns a connected Lazy store on url whose scripts take the
// time from clock, closed when the test ends.
func openLazy(t *testing.T, url string, clock sluice.Clock) *redisstore.Lazy {
	t.Helper()
	l, err := redisstore.OpenLazyWithClock(context.Background(), redisstore.Config{URL: url}, clock)
	if err != nil {
		t.Fatalf("OpenLazy(%s): %v", url, err)
	}
	t.Cleanup(func() { l.Close() })
	if !l.Connected() {
		t.Fatalf("OpenLazy(%s) did not connect to a running Redis", url)
	}
	return l
}

// A Lazy store, once connected, is held to the whole conformance suite
// and to the settle, debt and calendar suites, as the Store it forwards
// to.
func TestLazyConformance(t *testing.T) {
	url := singleURL(t)
	newStore := func(t *testing.T, clock sluice.Clock) sluice.Limiter { return openLazy(t, url, clock) }
	opts := storetest.Options{Resolution: time.Microsecond, Unbounded: true}
	storetest.RunWith(t, newStore, opts)
	t.Run("settle", func(t *testing.T) { storetest.RunSettle(t, newStore) })
	t.Run("debt", func(t *testing.T) { storetest.RunDebt(t, newStore, time.Microsecond) })
	t.Run("calendar", func(t *testing.T) { storetest.RunCalendarMonth(t, newStore, opts) })
}

// unreachable returns a Lazy store on an address where nothing listens: it
// starts without Redis and keeps trying until the test ends.
func unreachable(t *testing.T) *redisstore.Lazy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	l, err := redisstore.OpenLazy(t.Context(), redisstore.Config{URL: "redis://" + addr}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("OpenLazy on an address where nothing listens: %v, want a store that connects later", err)
	}
	t.Cleanup(func() { l.Close() })
	if l.Connected() {
		t.Fatal("connected to an address where nothing listens")
	}
	return l
}

// Before Redis has answered, bad input is still bad input: a bad key,
// limit or cost, and a limit Redis cannot serve, are refused with the
// sentinel a connected store gives, not as the store's failure (which
// would hand bad input to the failure mode, and a local failure mode's
// in-memory store would then admit a limit Redis never serves). Good
// input fails with ErrUnavailable and ErrNotConnected.
func TestLazyNotConnectedStillRefusesBadInput(t *testing.T) {
	l := unreachable(t)
	ctx, ok := context.Background(), sluice.PerSecond(10)
	calls := map[string]func(key string, lim sluice.Limit, cost int) error{
		"AllowN": func(key string, lim sluice.Limit, cost int) error {
			_, err := l.AllowN(ctx, key, lim, cost)
			return err
		},
		"RefundN": func(key string, lim sluice.Limit, cost int) error { return l.RefundN(ctx, key, lim, cost) },
		"ChargeN": func(key string, lim sluice.Limit, cost int) error {
			_, err := l.ChargeN(ctx, key, lim, cost)
			return err
		},
		"Peek": func(key string, lim sluice.Limit, _ int) error {
			_, err := l.Peek(ctx, key, lim)
			return err
		},
	}
	for _, tt := range []struct {
		name  string
		key   string
		lim   sluice.Limit
		cost  int
		want  error
		calls []string
	}{
		{"empty key", "", ok, 1, sluice.ErrInvalidKey, []string{"AllowN", "RefundN", "ChargeN", "Peek"}},
		{"zero rate", "k", sluice.Limit{Period: time.Second, Burst: 1}, 1, sluice.ErrInvalidLimit, []string{"AllowN", "RefundN", "ChargeN", "Peek"}},
		{"a period Redis cannot keep", "k", sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Second + time.Nanosecond}, 1, sluice.ErrInvalidLimit, []string{"AllowN", "RefundN", "ChargeN", "Peek"}},
		{"zero cost", "k", ok, 0, sluice.ErrInvalidCost, []string{"AllowN", "RefundN", "ChargeN"}},
		{"cost above burst", "k", ok, 11, sluice.ErrCostExceedsCapacity, []string{"AllowN"}},
		{"good input", "k", ok, 1, redisstore.ErrNotConnected, []string{"AllowN", "RefundN", "ChargeN", "Peek"}},
	} {
		for _, name := range tt.calls {
			err := calls[name](tt.key, tt.lim, tt.cost)
			unavailable := errors.Is(err, sluice.ErrUnavailable)
			if !errors.Is(err, tt.want) || unavailable != (tt.want == redisstore.ErrNotConnected) {
				t.Errorf("%s: %s = %v, want an error wrapping %v (and ErrUnavailable only for good input)", tt.name, name, err, tt.want)
			}
		}
	}
}
