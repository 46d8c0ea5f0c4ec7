package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/redisstore"
)

// Leases are on by default with Redis (-lease-share 0.01), divided by the
// fleet's count: 50 decisions in a row on a limit of 10,000 an hour, once
// the process has counted, take leases, so the store has charged more
// than was admitted, at most 1% of the limit less one more, and gets
// those units back at shutdown. -lease-share 0 decides each request on the
// store, exactly; so does PostgreSQL unless -lease-share is given, and
// -reserve-units takes batches in place of leases.
func TestServeLeasesByDefaultWithRedis(t *testing.T) {
	srv := redistest.Single(t)
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10_000, Period: time.Hour}
	plain, err := redisstore.New(context.Background(), redisstore.Config{URL: "redis://" + srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for _, tt := range []struct {
		name     string
		args     []string
		lo, hi   int // units held after 50 decisions
		released bool
	}{
		{"default", []string{"-reserve-hold", "1h"}, 1, 99, true},
		{"-lease-share 0", []string{"-lease-share", "0"}, 0, 0, false},
		{"-reserve-units 4", []string{"-reserve-units", "4", "-reserve-hold", "1h"}, 0, 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, st := openCheckedServeStore(t, append([]string{"-store", "redis://" + srv.Addr}, tt.args...)...)
			defer st.Close()
			if count := s.o.remote.leaseCount; tt.released && tt.name == "default" {
				// Leases follow the fleet; none until it is counted.
				if count == nil {
					t.Fatal("the leases do not follow the fleet (no count)")
				}
				eventually(t, "the process has counted the fleet", func() bool { return count() >= 1 })
			} else if count != nil {
				t.Fatal("a fleet counted for the leases, with none")
			}
			key := "lease:" + strconv.FormatInt(time.Now().UnixNano(), 36)
			for i := range 50 {
				if r, err := st.Limiter.AllowN(context.Background(), key, lim, 1); err != nil || !r.Allowed {
					t.Fatalf("decision %d: %+v, %v", i, r, err)
				}
			}
			held := func() int {
				r, err := plain.Peek(context.Background(), key, lim)
				if err != nil {
					t.Fatal(err)
				}
				return lim.Rate - 50 - r.Remaining
			}
			if got := held(); got < tt.lo || got > tt.hi {
				t.Errorf("after 50 decisions the process holds %d units, want %d to %d", got, tt.lo, tt.hi)
			}
			if (st.Release != nil) != tt.released {
				t.Fatalf("a release at shutdown: %v, want %v", st.Release != nil, tt.released)
			}
			if st.Release != nil {
				st.Release(context.Background())
				if got := held(); got != 0 {
					t.Errorf("after the release at shutdown the process holds %d units, want 0", got)
				}
			}
		})
	}
}

// -lease-share is checked: out of 0 to 1, or with -reserve-units, it is
// refused (exit status 2); with PostgreSQL it is off unless given; with the memory
// store it is named as not acted on when given.
func TestServeLeaseShareFlag(t *testing.T) {
	for _, tt := range []struct {
		args      []string
		wantExit  bool
		wantShare float64
		wantMoot  bool
	}{
		{[]string{"-store", "redis://127.0.0.1:1"}, false, 0.01, false},
		{[]string{"-store", "redis://127.0.0.1:1", "-lease-share", "0.05"}, false, 0.05, false},
		{[]string{"-store", "redis://127.0.0.1:1", "-reserve-units", "4"}, false, 0, false},
		{[]string{"-store", "redis://127.0.0.1:1", "-lease-share", "0.05", "-reserve-units", "4"}, true, 0, false},
		{[]string{"-store", "redis://127.0.0.1:1", "-lease-share", "1.5"}, true, 0, false},
		{[]string{"-store", "redis://127.0.0.1:1", "-lease-share", "NaN"}, true, 0, false},
		{[]string{"-store", "redis://127.0.0.1:1", "-lease-share", "0", "-reserve-hold", "1s"}, true, 0, false},
		{[]string{"-store", "postgres://u@127.0.0.1:1/db", "-migrate=false"}, false, 0, false},
		{[]string{"-store", "postgres://u@127.0.0.1:1/db", "-migrate=false", "-lease-share", "0.02"}, false, 0.02, false},
		{[]string{"-store", "memory"}, false, 0.01, false},
		{[]string{"-store", "memory", "-lease-share", "0.02"}, false, 0.02, true},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			s, code, done := parseServeFlags(tt.args, io.Discard, &stderr)
			if done {
				t.Fatalf("exit %d: %s", code, &stderr)
			}
			err := s.checkOptions()
			if tt.wantExit {
				if err == nil {
					t.Error("checkOptions accepted it, want it refused (exit status 2)")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.o.remote.leaseShare != tt.wantShare {
				t.Errorf("lease share %v, want %v", s.o.remote.leaseShare, tt.wantShare)
			}
			if got := slices.Contains(mootFlags(s.fs, &s.o), "-lease-share"); got != tt.wantMoot {
				t.Errorf("-lease-share named as not acted on: %v, want %v", got, tt.wantMoot)
			}
		})
	}
}

// Leases follow the fleet on Redis by default: two serve stores with
// -fleet NAME each count 2, so a limit of 300 an hour, whose 1% is 3
// units, gives each ⌊3/2⌋ = 1, no lease: every decision is the store's,
// and the store never holds a unit more than was admitted. One process
// alone leases 3 at a time. Both announce themselves in the fleet's key.
func TestServeLeasesFollowTheFleetOnRedis(t *testing.T) {
	srv := redistest.Single(t)
	url := "redis://" + srv.Addr
	fleet := "lease-fleet-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 300, Period: time.Hour}
	plain, err := redisstore.New(context.Background(), redisstore.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	open := func() (sluice.Limiter, func() int, func()) {
		t.Helper()
		s, st := openCheckedServeStore(t, "-store", url, "-fleet", fleet, "-local-cache=false", "-reserve-hold", "1h")
		if s.o.remote.leaseCount == nil {
			t.Fatal("the leases do not follow the fleet (no count)")
		}
		return st.Limiter, s.o.remote.leaseCount, st.Close
	}
	// most sends 20 decisions on a fresh key and returns the most units
	// the store held for lim beyond those admitted, after any of them.
	most := func(l sluice.Limiter) int {
		key := "lease-fleet:" + strconv.FormatInt(time.Now().UnixNano(), 36)
		held := 0
		for i := range 20 {
			if r, err := l.AllowN(context.Background(), key, lim, 1); err != nil || !r.Allowed {
				t.Fatalf("decision %d: %+v, %v", i, r, err)
			}
			r, err := plain.Peek(context.Background(), key, lim)
			if err != nil {
				t.Fatal(err)
			}
			held = max(held, lim.Rate-(i+1)-r.Remaining)
		}
		return held
	}
	limA, countA, closeA := open()
	defer closeA()
	eventually(t, "the first process has counted itself", func() bool { return countA() == 1 })
	if got := most(limA); got != 2 {
		t.Errorf("alone, the process held up to %d units beyond those admitted, want 2 (leases of ⌊1%% of 300⌋ = 3)", got)
	}
	limB, countB, closeB := open()
	defer closeB()
	eventually(t, "the second process counts two", func() bool { return countB() == 2 })
	for _, l := range []sluice.Limiter{limA, limB} {
		eventually(t, "the first process counts two", func() bool { return countA() == 2 })
		if got := most(l); got != 0 {
			t.Errorf("in a fleet of 2, a process held up to %d units beyond those admitted, want 0 (⌊3/2⌋ = 1: no lease)", got)
		}
	}
	if n := srv.Do(t, "ZCARD", "sluice:fleet:{"+fleet+"}"); strings.TrimSpace(n) != "2" {
		t.Errorf("the fleet's key has %q members, want 2", n)
	}
}

// openCheckedServeStore parses serve's args, checks them as serve does,
// and opens the store serve would, logging nowhere; the caller closes it.
func openCheckedServeStore(t *testing.T, args ...string) (*serveApp, stores.Opened) {
	t.Helper()
	s, code, done := parseServeFlags(args, io.Discard, io.Discard)
	if done {
		t.Fatalf("parse: exit %d", code)
	}
	if err := s.checkOptions(); err != nil {
		t.Fatal(err)
	}
	st, err := openServeStore(context.Background(), &s.o, false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}
