package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/relief"
)

// admitN asks r for n requests of key and returns how many it admitted.
func admitN(t *testing.T, r sluice.Limiter, key string, lim sluice.Limit, n int) int {
	t.Helper()
	ok := 0
	for range n {
		res, err := r.AllowN(context.Background(), key, lim, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			ok++
		}
	}
	return ok
}

// A reservation left over at a fixed window's end is not given back into
// the next window, where other processes have spent since: those units
// were charged in the window that ended. Two processes on one store, a
// quota of 10 a minute: in the second minute they admit 10 together, not
// 10 plus what the first one held from the first minute.
func TestReservationsOfAnEndedWindowAreNotRefundedIntoTheNext(t *testing.T) {
	clock := clocktest.At(time.Date(2026, 1, 1, 0, 0, 50, 0, time.UTC))
	store := memstore.New(memstore.Config{Clock: clock})
	defer store.Close()
	cfg := relief.BatchConfig{Batch: 5, Hold: time.Hour, Clock: clock}
	a, b := newReservations(store, cfg), newReservations(store, cfg)
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Minute}

	if admitN(t, a, "k", lim, 1) != 1 { // a holds 4 of the first minute
		t.Fatal("the first request was denied")
	}
	clock.Advance(20 * time.Second) // the second minute
	got := admitN(t, b, "k", lim, 1) + admitN(t, a, "k", lim, 1)
	got += admitN(t, b, "k", lim, 20) + admitN(t, a, "k", lim, 20)
	if got != 10 {
		t.Errorf("the second minute admitted %d, want its quota, 10", got)
	}
}

// At shutdown the units a process holds go back to the store, and only
// those of windows that have not ended; decisions after it go to the
// store directly.
func TestReservationsReleaseGivesBackWhatIsHeld(t *testing.T) {
	clock := clocktest.At(time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC))
	store := memstore.New(memstore.Config{Clock: clock})
	defer store.Close()
	r := newReservations(store, relief.BatchConfig{Batch: 5, Hold: time.Hour, Clock: clock})
	minute := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Minute}
	hour := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Hour}
	admitN(t, r, "ended", minute, 1) // holds 4 of a minute that will end
	clock.Advance(time.Minute)
	admitN(t, r, "held", hour, 2) // holds 3 of this hour
	remaining := func(key string, lim sluice.Limit) int {
		res, err := store.Peek(context.Background(), key, lim)
		if err != nil {
			t.Fatal(err)
		}
		return res.Remaining
	}
	if got := remaining("held", hour); got != 5 {
		t.Fatalf("before release the store has %d left, want 5 (2 admitted, 3 held)", got)
	}
	r.release(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if got := remaining("held", hour); got != 8 {
		t.Errorf("after release the store has %d left, want 8 (the 3 held given back)", got)
	}
	if got := remaining("ended", minute); got != 10 {
		t.Errorf("the ended minute's units were refunded into this minute: %d left, want 10", got)
	}
	admitN(t, r, "held", hour, 1)
	if got := remaining("held", hour); got != 7 {
		t.Errorf("after release a decision reserved a batch: %d left, want 7", got)
	}
}

// Reservations in front of Redis: two processes with -reserve-units 4 on a
// quota of 10 an hour hold units while they run; once both have shut down
// (giving back what they held), a third without reservations admits the
// rest, so the three admit exactly 10.
func TestServeReservationsOnRedisAreRefundedAtShutdown(t *testing.T) {
	srv := redistest.Single(t)
	path := filepath.Join(t.TempDir(), "q.yaml")
	writeFile(t, path, strings.ReplaceAll(cfgQuota(10), "unit: day", "unit: hour"))
	hour := time.Now().Truncate(time.Hour)
	store := "redis://" + srv.Addr + "/" + fmt.Sprint(time.Now().UnixNano()%15+1) // a database of its own, most likely
	admitted := 0
	for _, args := range [][]string{{"-reserve-units", "4", "-reserve-hold", "1h"}, {"-reserve-units", "4", "-reserve-hold", "1h"}, nil} {
		s := launch(t, append([]string{"-config", path, "-store", store}, args...)...)
		for range 3 {
			if post(t, s.url, reqAlice) == 200 {
				admitted++
			}
		}
		if args == nil {
			for range 10 {
				if post(t, s.url, reqAlice) == 200 {
					admitted++
				}
			}
		}
		s.stop(t)
	}
	if time.Now().Truncate(time.Hour) != hour {
		t.Skip("the test straddled the hour, when the quota starts again")
	}
	if admitted != 10 {
		t.Errorf("admitted %d in all, want exactly the quota, 10", admitted)
	}
}

// TestLocalShareIsTheFailureModesShare checks that -local-share N gives a
// process the share of a limit that -failure-nodes N gives it while the
// store fails (failsafe.Split: rate and a bucket's burst divided by N,
// rounded down, at least 1), so that N processes together stay within
// the limit and the bound docs/serve.md states holds.
func TestLocalShareIsTheFailureModesShare(t *testing.T) {
	for _, lim := range []sluice.Limit{
		sluice.PerSecond(10).WithBurst(7),
		sluice.PerMinute(3),
		sluice.PerSecond(100).WithAlgorithm(sluice.FixedWindow),
		sluice.PerSecond(9).WithAlgorithm(sluice.LeakyBucket).WithBurst(1),
	} {
		for _, n := range []int{1, 2, 4, 64} {
			got, want := localShare(n)(lim), failsafe.Split(lim, n)
			if got != want {
				t.Errorf("-local-share %d of %v = %v, want failsafe.Split's %v", n, lim, got, want)
			}
			if n > 1 && lim.Rate >= n && n*got.Rate > lim.Rate {
				t.Errorf("%d processes with -local-share %d of %v admit %d per period together", n, n, lim, n*got.Rate)
			}
		}
	}
}
