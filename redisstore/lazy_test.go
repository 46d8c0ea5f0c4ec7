package redisstore_test

import (
	"context"
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
