package relief_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/relief"
)

// fakeRoster is a Roster in memory whose members expire on the (bubble's)
// clock, and which fails while down is set.
type fakeRoster struct {
	mu     sync.Mutex
	expiry map[string]time.Time
	down   bool
	leaves []string
}

func newFakeRoster() *fakeRoster { return &fakeRoster{expiry: map[string]time.Time{}} }

func (r *fakeRoster) Announce(_ context.Context, id string, ttl time.Duration, most int) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return 0, errors.New("store down")
	}
	now := time.Now()
	r.expiry[id] = now.Add(ttl)
	n := 0
	for m, e := range r.expiry {
		if !e.After(now) {
			delete(r.expiry, m)
			continue
		}
		n++
	}
	return min(n, most), nil
}

func (r *fakeRoster) Leave(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return errors.New("store down")
	}
	delete(r.expiry, id)
	r.leaves = append(r.leaves, id)
	return nil
}

func (r *fakeRoster) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newFleet(t *testing.T, r relief.Roster, id string) *relief.Fleet {
	t.Helper()
	f, err := relief.NewFleet(relief.FleetConfig{Roster: r, ID: id, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Run, on the bubble's clock: a process counts itself at once; a join is
// seen by the others within one Period; a process stopped leaves the
// roster and is seen gone within one Period; a crashed one (its Run never
// leaves) is counted until its TTL has passed and gone one Period later;
// while the store fails, the count stays as it was.
func TestFleetFollowsJoinsLeavesAndCrashesWithinPeriodAndTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		roster := newFakeRoster()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		start := func(id string) (*relief.Fleet, context.CancelFunc, chan struct{}) {
			f := newFleet(t, roster, id)
			c, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { f.Run(c); close(done) }()
			return f, stop, done
		}
		a, _, _ := start("a")
		synctest.Wait()
		if n := a.Count(); n != 1 {
			t.Fatalf("a alone: %d", n)
		}
		b, stopB, doneB := start("b")
		c, _, _ := start("c")
		synctest.Wait()
		if n := a.Count(); n != 1 {
			t.Fatalf("a before its next announce: %d, want 1 (it has not counted again)", n)
		}
		time.Sleep(relief.DefaultFleetPeriod)
		synctest.Wait()
		for name, f := range map[string]*relief.Fleet{"a": a, "b": b, "c": c} {
			if n := f.Count(); n != 3 {
				t.Fatalf("%s one period after b and c joined: %d, want 3", name, n)
			}
		}

		stopB()
		<-doneB
		if len(roster.leaves) != 1 || roster.leaves[0] != "b" {
			t.Fatalf("leaves %v, want [b]", roster.leaves)
		}
		time.Sleep(relief.DefaultFleetPeriod)
		synctest.Wait()
		if n := a.Count(); n != 2 {
			t.Fatalf("a one period after b left: %d, want 2", n)
		}

		// c crashes: its member stays until its TTL has passed.
		roster.mu.Lock()
		roster.expiry["ghost"] = time.Now().Add(relief.DefaultFleetTTL)
		roster.mu.Unlock()
		time.Sleep(relief.DefaultFleetPeriod)
		synctest.Wait()
		if n := a.Count(); n != 3 {
			t.Fatalf("a with a silent member: %d, want 3", n)
		}
		time.Sleep(relief.DefaultFleetTTL - relief.DefaultFleetPeriod)
		synctest.Wait()
		if n := a.Count(); n != 2 {
			t.Fatalf("a once the silent member's TTL passed: %d, want 2", n)
		}

		roster.setDown(true)
		roster.mu.Lock()
		delete(roster.expiry, "c")
		roster.mu.Unlock()
		time.Sleep(10 * relief.DefaultFleetPeriod)
		synctest.Wait()
		if n := a.Count(); n != 2 {
			t.Fatalf("a while the store fails: %d, want 2 (as last counted)", n)
		}
		roster.setDown(false)
		// a and c announce at the same instants, in either order: by the
		// second, a counts c again.
		time.Sleep(2 * relief.DefaultFleetPeriod)
		synctest.Wait()
		if n := a.Count(); n != 2 {
			t.Fatalf("a once the store answers: %d, want 2", n)
		}
	})
}

// The count before the first announce is Initial, and a Roster that says
// 0 or more than Max is read as 1 and Max: a share is never of nothing.
func TestFleetCountIsAtLeastOneAndAtMostMax(t *testing.T) {
	f, err := relief.NewFleet(relief.FleetConfig{Roster: countRoster(0), Initial: 3, Max: 5, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if n := f.Count(); n != 3 {
		t.Fatalf("before announcing: %d, want Initial 3", n)
	}
	if err := f.Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := f.Count(); n != 1 {
		t.Fatalf("a roster that says 0: %d, want 1", n)
	}
	f, _ = relief.NewFleet(relief.FleetConfig{Roster: countRoster(1 << 40), Max: 5, Logger: quiet()})
	f.Beat(context.Background())
	if n := f.Count(); n != 5 {
		t.Fatalf("a roster that says 2^40: %d, want Max 5", n)
	}
}

// countRoster answers every announce with its own value.
type countRoster int

func (c countRoster) Announce(context.Context, string, time.Duration, int) (int, error) {
	return int(c), nil
}
func (countRoster) Leave(context.Context, string) error { return nil }

// A configuration whose members would drop out between two announces, or
// whose counts make no sense, is refused.
func TestNewFleetRefusesATTLUnderTwoPeriods(t *testing.T) {
	for _, cfg := range []relief.FleetConfig{
		{Roster: countRoster(1), Period: time.Second, TTL: 1500 * time.Millisecond},
		{Roster: countRoster(1), Max: -1},
		{Roster: countRoster(1), Max: 3, Initial: 4},
		{},
	} {
		if _, err := relief.NewFleet(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

// cappedRoster is a Roster that says the longest time to live it takes.
type cappedRoster struct{ countRoster }

func (cappedRoster) MaxTTL() time.Duration { return time.Minute }

// A TTL longer than the Roster takes is refused at once: before, NewFleet
// accepted it, every announce then failed, and no lease was ever taken.
func TestNewFleetRefusesATTLTheRosterDoesNotTake(t *testing.T) {
	if _, err := relief.NewFleet(relief.FleetConfig{Roster: cappedRoster{1}, TTL: 2 * time.Minute}); err == nil ||
		!strings.Contains(err.Error(), "1m0s") {
		t.Errorf("TTL 2m on a roster taking at most 1m: %v; want an error naming the roster's bound", err)
	}
	if _, err := relief.NewFleet(relief.FleetConfig{Roster: cappedRoster{1}, TTL: time.Minute}); err != nil {
		t.Errorf("TTL 1m on a roster taking at most 1m: %v", err)
	}
}

// A run of failed announces is logged once, at the second (the first
// announce of a process whose store is still connecting fails, and is not
// worth a warning), and its end once.
func TestFleetLogsARunOfFailuresOnce(t *testing.T) {
	roster := newFakeRoster()
	var buf bytes.Buffer
	f, err := relief.NewFleet(relief.FleetConfig{Roster: roster, ID: "a", Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	roster.setDown(true)
	for range 5 {
		if err := f.Beat(context.Background()); err == nil {
			t.Fatal("Beat on a store that is down: no error")
		}
	}
	roster.setDown(false)
	f.Beat(context.Background())
	f.Beat(context.Background())
	logs := buf.String()
	if n := strings.Count(logs, "announcing failed"); n != 1 {
		t.Errorf("%d lines say the announce failed, want 1:\n%s", n, logs)
	}
	if n := strings.Count(logs, "announcing again"); n != 1 {
		t.Errorf("%d lines say announcing is back, want 1:\n%s", n, logs)
	}
}

// FreshFor(hold) stops a hold before Fresh does: units leased while it
// answers are spent or returned by the time the store forgets this
// process (its last answered announce's send time plus the TTL), so the
// others, who then count one fewer and lease more, never share the limit
// with units this process still holds.
func TestFleetFreshForStopsAHoldBeforeTheOthersForgetThisProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hold = time.Second
		roster := newFakeRoster()
		me := newFleet(t, roster, "me")
		if err := me.Beat(context.Background()); err != nil {
			t.Fatal(err)
		}
		roster.setDown(true)
		time.Sleep(relief.DefaultFleetTTL - hold - time.Nanosecond)
		if me.FreshFor(hold) != 1 || me.Fresh() != 1 {
			t.Fatalf("a hold before the TTL has passed: FreshFor %d, Fresh %d; want 1 and 1", me.FreshFor(hold), me.Fresh())
		}
		time.Sleep(time.Nanosecond)
		if got := me.FreshFor(hold); got != 0 {
			t.Errorf("a hold or less before the TTL passes: FreshFor = %d, want 0 (a lease taken now outlives the membership)", got)
		}
		if got := me.Fresh(); got != 1 {
			t.Errorf("before the TTL has passed: Fresh = %d, want 1", got)
		}
	})
}

// A clock that steps back makes FreshFor 0 (no lease) until an announce
// answers again, rather than fresh for the step plus the TTL: a process
// that kept leasing its share that long would do so after the others had
// stopped counting it. (With the system clock the elapsed time is read on
// the monotonic clock, which does not step.)
func TestFleetFreshForIsNoneWhenTheClockStepsBack(t *testing.T) {
	clock := clocktest.New()
	roster := newFakeRoster()
	f, err := relief.NewFleet(relief.FleetConfig{Roster: roster, ID: "me", Logger: quiet(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.FreshFor(0); got != 1 {
		t.Fatalf("just counted: FreshFor = %d, want 1", got)
	}
	roster.setDown(true)
	clock.Advance(-time.Hour)
	if got := f.FreshFor(0); got != 0 {
		t.Errorf("the clock stepped back an hour, announcing failing: FreshFor = %d, want 0", got)
	}
}
