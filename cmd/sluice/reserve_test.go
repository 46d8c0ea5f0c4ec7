package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/redistest"
)

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
