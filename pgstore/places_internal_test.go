package pgstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestPlacesHeldStayWithinABlock: through random decisions of one group
// (places reserved and given back, probes, blocks asked for, granted,
// refused, rolled back or in doubt, up to 24 in flight at once), a store never
// holds more than MaxPlaceBlock places of the group, and a block, once the
// store is out of places, doubles from 1 up to MaxPlaceBlock.
func TestPlacesHeldStayWithinABlock(t *testing.T) {
	p := newPlaces()
	g := sha256.Sum256([]byte("api_tenant"))
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	end, now := start.Add(time.Hour), start.Add(time.Minute)
	var sizes []int64
	for range 8 {
		tk := take(p, g, start, end, now, 100_000, true)
		sizes = append(sizes, tk.claim)
		p.settle(tk, outcome{sent: true, inserted: true, tried: true, granted: true})
		for p.m[placeKey{g, start.UnixMicro()}].free > 0 {
			tk := take(p, g, start, end, now, 100_000, true)
			if !tk.held {
				t.Fatalf("a store holding free places asked for a block of %d", tk.claim)
			}
			p.settle(tk, outcome{sent: true, inserted: true})
		}
	}
	if want := []int64{1, 2, 4, 8, 16, 32, 64, 64}; !slices.Equal(sizes, want) {
		t.Errorf("blocks asked for = %v, want %v", sizes, want)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	errWouldWait := errors.New("would wait")
	var out []ticket
	for i := range 20_000 {
		var tk ticket
		var err error = errWouldWait
		if len(out) < 24 && (len(out) == 0 || rng.IntN(2) == 0) {
			// A take that would wait for a claim in flight (which this
			// loop has yet to settle) gives up at once instead.
			tk, err = p.take(ended, g, start, end, now, 100_000, rng.IntN(2) == 0)
		}
		if err == nil {
			out = append(out, tk)
		} else if len(out) > 0 {
			j := rng.IntN(len(out))
			tk := out[j]
			out = append(out[:j], out[j+1:]...)
			var o outcome
			switch rng.IntN(10) {
			case 0:
				o = outcome{inDoubt: true}
			case 1:
				o = outcome{} // rolled back
			case 2:
				o = outcome{tried: true} // refused for the cap
			case 3:
				o = outcome{sent: true, needsPlace: tk.probe}
			default:
				o = outcome{sent: true, inserted: !tk.probe && rng.IntN(2) == 0, tried: tk.claim > 0 && rng.IntN(2) == 0}
				o.granted = o.tried && rng.IntN(4) > 0
			}
			p.settle(tk, o)
		}
		e := p.m[placeKey{g, start.UnixMicro()}]
		if e.lost >= MaxPlaceBlock {
			e.lost = 0 // a new period, as far as the bound is concerned
		}
		if held := e.held(); held > MaxPlaceBlock || e.free < 0 || e.inFlight < 0 {
			t.Fatalf("step %d: %d places held (free %d, in flight %d, lost %d) with %d decisions in flight; want at most %d",
				i, held, e.free, e.inFlight, e.lost, len(out), MaxPlaceBlock)
		}
	}
}

// TestPlacesTableIsBounded: a store keeps places for at most
// maxPlaceGroups groups (p.max); past it, while every entry has a decision
// in flight, a group whose entry it cannot make asks for a block of none
// (its key's place taken alone); an entry that holds only free places
// makes room, its places recorded to be given back to its group's row;
// and so does one whose period has ended.
func TestPlacesTableIsBounded(t *testing.T) {
	p := newPlaces()
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	end, now := start.Add(time.Hour), start.Add(time.Minute)
	group := func(i int) [sha256.Size]byte { return sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16)}) }
	claims := make([]ticket, p.max)
	for i := range p.max {
		claims[i] = take(p, group(i), start, end, now, 100_000, true)
	}
	tk := take(p, group(p.max), start, end, now, 100_000, true)
	if tk.e != nil || tk.held || tk.claim != 0 || len(p.m) != p.max {
		t.Fatalf("a group past a full table of claims in flight: ticket %+v, %d entries; want a claim of 0 with no entry, %d entries", tk, len(p.m), p.max)
	}
	p.settle(tk, outcome{sent: true, inserted: true, tried: true})
	for _, c := range claims {
		p.settle(c, outcome{sent: true, tried: true, granted: true}) // its key had a row: a place left free
	}
	if tk := take(p, group(p.max), start, end, now, 100_000, true); tk.e == nil || len(p.m) != p.max || len(p.back) != 1 || p.back[0].n != 1 {
		t.Errorf("a group past a full table of free places: ticket %+v, %d entries, to give back %+v; want an entry made in the place of one whose 1 place is given back", tk, len(p.m), p.back)
	}
	if b := p.returned(); len(b) != 1 || len(p.back) != 0 {
		t.Errorf("returned() = %+v, leaving %+v; want the one, leaving none", b, p.back)
	}
	if tk := take(p, group(p.max+1), start, end, end, 100_000, true); tk.e == nil || len(p.m) != p.max || len(p.back) != 0 {
		t.Errorf("once the period has ended: ticket %+v, %d entries, to give back %+v; want an entry made in an ended one's place, nothing to give back", tk, len(p.m), p.back)
	}
}

// take is places.take with no end and no error, for tests that never
// wait on a claim.
func take(p *places, group [sha256.Size]byte, start, end, now time.Time, maxKeys int64, probe bool) ticket {
	tk, err := p.take(context.Background(), group, start, end, now, maxKeys, probe)
	if err != nil {
		panic(err)
	}
	return tk
}

// TestPlacesWaitForTheBlockBeingClaimed: with no free place while a block
// is being claimed, a decision waits for that claim and then takes a place
// of its block, rather than claiming (or queueing on the group's row) on
// its own; a decision whose context ends while it waits gets its error.
func TestPlacesWaitForTheBlockBeingClaimed(t *testing.T) {
	p := newPlaces()
	g := sha256.Sum256([]byte("api_tenant"))
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	end, now := start.Add(time.Hour), start.Add(time.Minute)
	claim := take(p, g, start, end, now, 100_000, true)
	if claim.claim != 1 {
		t.Fatalf("first ticket %+v, want a claim of 1", claim)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.take(ended, g, start, end, now, 100_000, true); !errors.Is(err, context.Canceled) {
		t.Fatalf("take with an ended context during a claim: %v, want context.Canceled", err)
	}
	got := make(chan ticket)
	go func() { got <- take(p, g, start, end, now, 100_000, true) }()
	p.settle(claim, outcome{sent: true, tried: true, granted: true}) // its key had a row: its place is free
	if tk := <-got; !tk.held {
		t.Errorf("ticket after the claim ended: %+v, want a place of its block", tk)
	}
}

// grow takes and spends blocks of g's period [start, end) until the next
// one the store would ask for is MaxPlaceBlock.
func grow(p *places, g [sha256.Size]byte, start, end, now time.Time) {
	k := placeKey{g, start.UnixMicro()}
	for p.m[k] == nil || p.m[k].next < MaxPlaceBlock {
		tk := take(p, g, start, end, now, 100_000, false)
		p.settle(tk, outcome{sent: true, inserted: true, tried: true, granted: true})
		for p.m[k].free > 0 {
			p.settle(take(p, g, start, end, now, 100_000, false), outcome{sent: true, inserted: true})
		}
	}
}

// TestEndedPeriodWithAClaimInFlightKeepsItsEntry: an hourly key of a group
// asks for a block of MaxPlaceBlock just before 01:00; the table is full
// when another group's decision comes just after, and the hourly entry's
// period has ended, but its claim is in flight: the entry stays, so a daily
// key of the group (its period also starting at 00:00, the same row of
// sluice_usage_groups) waits for that claim rather than asking for a
// second block of the same group and period at once.
func TestEndedPeriodWithAClaimInFlightKeepsItsEntry(t *testing.T) {
	p := newPlaces()
	p.max = 1
	g, other := sha256.Sum256([]byte("api_tenant")), sha256.Sum256([]byte("api_other"))
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hourEnd, dayEnd := start.Add(time.Hour), start.Add(24*time.Hour)
	before, after := hourEnd.Add(-time.Second), hourEnd.Add(time.Second)
	grow(p, g, start, hourEnd, before)
	first := take(p, g, start, hourEnd, before, 100_000, false)
	if first.claim != MaxPlaceBlock {
		t.Fatalf("hourly ticket %+v, want a claim of %d", first, MaxPlaceBlock)
	}
	tk := take(p, other, hourEnd, hourEnd.Add(time.Hour), after, 100_000, false)
	if tk.e != nil {
		t.Errorf("another group, with the table full of an entry whose claim is in flight: ticket %+v, want no entry", tk)
	}
	p.settle(tk, outcome{}) // rolled back: its entry, if any, holds nothing
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	second, err := p.take(ended, g, start, dayEnd, after, 100_000, false)
	if err == nil && second.claim > 0 {
		t.Errorf("a daily key of the group asked for a block of %d while the hourly one's %d was in flight: %d places of one group and period, want at most %d",
			second.claim, first.claim, first.claim+second.claim, MaxPlaceBlock)
	}
}

// TestEndedPeriodTakesNoNewBlock: a group's entry whose period has ended
// is dropped when the table is full, its unused places lost; a decision
// into that period afterwards (Spend into a past period) takes its place
// alone, with no block, so the store never holds two blocks of one group
// and period. A longer period sharing the start (a daily key after hourly
// ones, both from 00:00) has not ended, and takes a block of its own: the
// bound is MaxPlaceBlock per group, period start and period end.
func TestEndedPeriodTakesNoNewBlock(t *testing.T) {
	p := newPlaces()
	p.max = 2
	g, other := sha256.Sum256([]byte("api_tenant")), sha256.Sum256([]byte("api_other"))
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hourEnd, dayEnd := start.Add(time.Hour), start.Add(24*time.Hour)
	during, after := start.Add(30*time.Minute), hourEnd.Add(30*time.Minute)
	tk := take(p, g, start, hourEnd, during, 100_000, false)
	p.settle(tk, outcome{sent: true, tried: true, granted: true}) // its key had a row: a place left free
	p.settle(take(p, other, hourEnd, hourEnd.Add(time.Hour), after, 100_000, false), outcome{sent: true, tried: true, granted: true})
	third := take(p, sha256.Sum256([]byte("api_third")), hourEnd, hourEnd.Add(time.Hour), after, 100_000, false)
	if _, ok := p.m[placeKey{g, start.UnixMicro()}]; ok || third.e == nil {
		t.Fatalf("a third group past a table of 2 with an ended entry: ticket %+v; want the ended entry dropped, an entry made in its place", third)
	}
	p.settle(third, outcome{}) // rolled back: its entry holds nothing
	tk = take(p, g, start, hourEnd, after, 100_000, false)
	if tk.held || tk.claim != 0 {
		t.Errorf("a decision into the group's ended hour, its entry dropped: ticket %+v, want a claim of 0 (a second block of the period)", tk)
	}
	p.settle(tk, outcome{sent: true, inserted: true, tried: true})
	if tk := take(p, g, start, dayEnd, after, 100_000, false); tk.claim == 0 {
		t.Errorf("a daily key of the group: ticket %+v, want a block of its own", tk)
	}
}
