package pgstore

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"
)

// The places of a group (Config.MaxKeysPerGroup), taken in blocks.
//
// A group's row in sluice_usage_groups counts the places handed out in a
// period, never more than the cap. A key's first row in a period needs one.
// Taking it from the group's row for every new key would make every new
// key of a group update that one row, and hold its lock until its commit:
// the group's new keys would be written one at a time, across all
// processes. Instead a Store takes places in blocks, in the statement of
// the decision that needs one (claimSQL), and hands the rest out to its
// own new keys: a decision that holds a place writes its row with no
// group named (key_group NULL), touching no group row and running no
// trigger (spendSQL).
//
// A decision does not know before its statement whether its key is new in
// the period, so it reserves a place whenever the store holds one free for
// the group, and gives it back when the statement inserted no row. With
// none free, it sends claimSQL asking for a block of n places: taken only
// if the key has no row in the statement's snapshot, and only if all n fit
// under the cap; when they do not, the row names its group, and migration
// 0003's trigger takes one place for it, or refuses the key, exactly as
// before. But when the group's last decision found its key's row (a group
// of known keys, the common case of a quota), a decision with no free
// place is sent as spendSQL that may not insert (a probe): a key that has
// its row is decided in that one statement, with no claim's work, and a
// new one is sent again, as claimSQL (a second round trip). The block
// doubles with each claim the store makes for the group in the period (1,
// 2, 4, … MaxPlaceBlock), so a group that sees one new key takes one place,
// and one that sees many writes its row once per MaxPlaceBlock keys; a
// claim refused for room starts again at 1.
//
// So the cap stays a hard bound: places are only ever taken from the
// group's row under it. What a store holds and has not used is counted
// there but names no key: the cap may refuse a new key while fewer keys
// have rows, by at most the places the stores hold. A store holds at most
// MaxPlaceBlock per group and period, free, reserved or asked for by
// decisions in flight: when all of them are taken, a decision asks for a
// block of none, and its key's place is taken alone, by the trigger.
// Places a store holds at the period's end, or when it stops, are lost,
// as the period's count is over then.
//
// The table is keyed by the group and the period's start, as the group's
// row is: keys whose periods share a start (an hourly and a daily limit of
// one group, both from 00:00) share one entry, whose end is the latest
// seen. An entry is dropped, when the table is full, only if it holds
// nothing, or if that end has passed and none of its decisions is in
// flight; and no block is claimed for an entry whose end has passed (a
// Spend into a past period takes its key's place alone). So a store never
// holds two entries of one group and period at once, and an entry dropped
// with unused places is made again only by a period of the same start
// that ends later: a store holds at most MaxPlaceBlock places of a group
// row it has not used for each distinct end of the periods of that start
// it decides (one, unless limits of different lengths share the start).
// An entry that holds only free places may also be dropped for room while
// its period runs; its places are given back to the group's row by a
// statement after the decision that dropped it (Store.giveBack), and count
// against the cap until then (lost, if that statement fails).
//
// A decision whose outcome is unknown (ErrInDoubt) counts its places as
// held for the rest of the period, as they may have been taken.
//
// Lock order: a decision that may take places from a group's row takes
// that row's lock (claimSQL's first write, even a refused one or a block
// of none) before it inserts its key's row; a decision that holds its
// place never locks the group's row. So no two decisions wait on each
// other's rows. Binaries from before migration 0005 lock in the other
// order (the key's row, then the group's, through the trigger): a claim
// PostgreSQL aborts for a deadlock with one of them is sent again once in
// their order (see spend).

// MaxPlaceBlock is the most places of a group a Store takes in one write of
// the group's row, and, but for decisions in flight, the most it holds
// unused in one group and period: by as many, at most, the cap
// (Config.MaxKeysPerGroup) may refuse a new key early for each Store that
// took places in the group in the period.
const MaxPlaceBlock = 64

// maxPlaceGroups bounds the groups and periods a Store keeps places for
// (about 100 bytes each). The new keys of a group it cannot keep take
// their places one at a time, as the trigger takes them. A full table
// may drop an entry that holds only free places of a period still
// running, but gives them back to the group's row (giveBackSQL): the row
// counts them, and lost, a client cycling through groups of its own could
// make a store take and lose block after block of another tenant's group,
// refusing its new keys early without bound. Places whose giving back
// fails are lost, as at a stop.
const maxPlaceGroups = 4096

// maxGiveBacks bounds the dropped entries whose places wait to be given
// back; with as many waiting, no entry holding free places is dropped.
const maxGiveBacks = 64

// giveBack is what a dropped entry held: free places of a group and period.
type giveBack struct {
	k placeKey
	n int64
}

// placeKey names one group in one period: the group's hash and the
// period's start, in PostgreSQL's microseconds.
type placeKey struct {
	group [sha256.Size]byte
	start int64
}

// placeEntry is what a Store holds of one group's places in one period.
type placeEntry struct {
	end      time.Time // the period's end: the entry may be dropped after it
	free     int64     // taken, not used, not reserved
	inFlight int64     // reserved by decisions, or asked for by claims, in flight
	lost     int64     // of decisions in doubt: held for the rest of the period
	next     int64     // the next claim's size
	// old: the group's last decision found its key's row, so the next,
	// with no free place, is sent as a probe.
	old bool
	// claimed is closed when the claim of a block in flight (at most one
	// per entry) has ended; nil when none is.
	claimed chan struct{}
}

// held is what the entry counts against MaxPlaceBlock.
func (e *placeEntry) held() int64 { return e.free + e.inFlight + e.lost }

// places is a Store's table of the places it holds. It is safe for
// concurrent use; its zero value is not usable (see newPlaces).
type places struct {
	mu  sync.Mutex
	m   map[placeKey]*placeEntry
	max int // the most entries m holds: maxPlaceGroups
	// back: the places of entries dropped while their period runs, to be
	// given back to their groups' rows (see returned).
	back []giveBack
}

func newPlaces() *places { return &places{m: map[placeKey]*placeEntry{}, max: maxPlaceGroups} }

// ticket is what one decision holds: a place reserved (held), no place
// for a key expected to have its row (probe), or a claim of claim places
// to ask for; a claim of 0 takes no block, its key's place (if it is new)
// being taken alone, by the trigger. e is nil for a claim of 0 the table
// could not keep an entry for.
type ticket struct {
	e     *placeEntry
	held  bool
	probe bool
	claim int64
}

// take returns the ticket of a decision of a key of group in the period
// [start, end) at now, under a cap of maxKeys places per group; a probe
// only if probe is true. With no free place while a block is being
// claimed, it waits for that claim to end (the decision's statement would
// wait for the group's row anyway), or for ctx to end, then its error.
func (p *places) take(ctx context.Context, group [sha256.Size]byte, start, end, now time.Time, maxKeys int64, probe bool) (ticket, error) {
	t, _, err := p.get(ctx, group, start, end, now, maxKeys, probe, true)
	return t, err
}

// tryTake is take that does not wait: it reports false, and takes
// nothing, where take would wait for a claim in flight.
func (p *places) tryTake(group [sha256.Size]byte, start, end, now time.Time, maxKeys int64, probe bool) (ticket, bool) {
	t, ok, _ := p.get(context.Background(), group, start, end, now, maxKeys, probe, false)
	return t, ok
}

// get is take, and, unless wait, tryTake.
func (p *places) get(ctx context.Context, group [sha256.Size]byte, start, end, now time.Time, maxKeys int64, probe, wait bool) (ticket, bool, error) {
	k := placeKey{group: group, start: start.UnixMicro()}
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		e := p.m[k]
		if e == nil {
			if len(p.m) >= p.max && !p.evict(now) {
				return ticket{}, true, nil
			}
			e = &placeEntry{end: end, next: 1}
			p.m[k] = e
		}
		if end.After(e.end) {
			e.end = end
		}
		if e.free > 0 {
			e.free--
			e.inFlight++
			return ticket{e: e, held: true}, true, nil
		}
		if probe && e.old {
			return ticket{e: e, probe: true}, true, nil
		}
		if ch := e.claimed; ch != nil {
			if !wait {
				return ticket{}, false, nil
			}
			p.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				p.mu.Lock()
				return ticket{}, false, ctx.Err()
			}
			p.mu.Lock()
			continue
		}
		n := min(e.next, MaxPlaceBlock-e.held(), maxKeys)
		if !e.end.After(now) {
			// Every period seen of the group's row has ended: no block,
			// as the entry may have been dropped with places unused.
			n = 0
		}
		e.inFlight += n
		if n > 0 {
			e.claimed = make(chan struct{})
		}
		return ticket{e: e, claim: n}, true, nil
	}
}

// evict drops one entry that holds nothing, or whose period has ended
// and whose decisions have all ended, among the first few the map's
// iteration gives (in an order it randomizes), or else one of them that
// holds only free places, which it records to be given back; and reports
// whether it dropped one. An entry with decisions in flight (or in doubt)
// is kept: dropped, a decision of its group and period would make a
// second entry and claim a second block while the first was in flight.
func (p *places) evict(now time.Time) bool {
	seen := 0
	var spare *placeKey
	for k, e := range p.m {
		if e.held() == 0 || !e.end.After(now) && e.inFlight == 0 {
			delete(p.m, k)
			return true
		}
		if spare == nil && e.inFlight == 0 && e.lost == 0 && len(p.back) < maxGiveBacks {
			spare = &k
		}
		if seen++; seen == 8 {
			break
		}
	}
	if spare == nil {
		return false
	}
	p.back = append(p.back, giveBack{k: *spare, n: p.m[*spare].free})
	delete(p.m, *spare)
	return true
}

// returned hands over the places of dropped entries to be given back to
// their groups' rows; the caller gives them back or loses them.
func (p *places) returned() []giveBack {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.back) == 0 {
		return nil
	}
	b := p.back
	p.back = nil
	return b
}

// outcome is what became of a decision's statement.
type outcome struct {
	// sent: the statement ran, and its answer came (false: it was rolled
	// back or never sent, unless inDoubt).
	sent bool
	// inDoubt: its answer never came; it may have committed.
	inDoubt bool
	// inserted: it inserted its key's row.
	inserted bool
	// tried: a claim was asked of the group's row (the key had no row),
	// and refused unless granted; a statement refused for the cap tried.
	tried bool
	// granted: the claim's places were taken.
	granted bool
	// needsPlace: a probe found no row for its key, and wrote nothing.
	needsPlace bool
}

// settle records what became of t's decision.
func (p *places) settle(t ticket, o outcome) {
	if t.e == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := t.e
	if o.sent {
		e.old = !o.needsPlace && !o.inserted && !o.tried
	}
	if t.probe {
		return
	}
	if t.held {
		e.inFlight--
		switch {
		case o.inDoubt:
			e.lost++
		case !o.sent || !o.inserted:
			e.free++
		}
		return
	}
	e.inFlight -= t.claim
	if t.claim > 0 {
		close(e.claimed)
		e.claimed = nil
	}
	switch {
	case o.inDoubt:
		e.lost += t.claim
	case o.sent && o.granted:
		e.free += t.claim
		if o.inserted {
			e.free--
		}
		e.next = min(2*t.claim, MaxPlaceBlock)
	case o.tried && t.claim > 0:
		e.next = 1
	}
}
