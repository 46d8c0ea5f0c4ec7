package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/pgtest"
)

// TestFullPlacesTableGivesBackFreePlaces: with the store's table of places
// full of groups that each hold a free place (two new keys each, the
// second taking a block of 2), a new group's key still takes a block
// (its row names no group): an entry holding only free places is dropped,
// and its places given back to its group's row, so that no place is lost:
// the places the group rows count are exactly the rows plus the places
// the store still holds.
func TestFullPlacesTableGivesBackFreePlaces(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := twoPlacesAdmitting(ctx, t, time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC), "api_a_1", "api_a_2", "api_b_1", "api_b_2", "api_c_1")
	var named bool
	if err := s.Pool().QueryRow(ctx, "SELECT key_group IS NOT NULL FROM sluice_usage WHERE key = 'api_c_1'").Scan(&named); err != nil {
		t.Fatal(err)
	}
	rows, places, held, entries := placesLedger(ctx, t, s)
	t.Logf("a new group past a full table: its row names its group %v; %d rows, %d places, %d held in %d entries", named, rows, places, held, entries)
	if named || places != rows+held {
		t.Errorf("a new group past a full table of groups holding free places: its row names its group %v (want false: a block taken); %d places counted, %d rows + %d held (want equal: none lost)",
			named, places, rows, held)
	}
}

// TestGiveBackOutlivesTheClientsHangUp: the places of an entry dropped
// from a full table are given back to their group's row by the decision
// that dropped it even when that decision's client has hung up (its
// context canceled) by then: lost, a client that hangs up on every
// request while cycling through groups of its own would make a store
// lose block after block of other tenants' groups.
func TestGiveBackOutlivesTheClientsHangUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC)
	s := twoPlacesAdmitting(ctx, t, now, "api_a_1", "api_a_2", "api_b_1", "api_b_2")
	// A third group's decision drops an entry holding free places; its
	// client hangs up before they are given back.
	start := now.Truncate(time.Hour)
	tk, err := s.places.take(ctx, hash("api_c"), start, start.Add(time.Hour), now, s.maxKeys, false)
	if err != nil {
		t.Fatal(err)
	}
	s.places.settle(tk, outcome{}) // its own statement never sent
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hungUp, hangUp := context.WithCancel(ctx)
	hangUp()
	s.giveBack(hungUp, conn)
	conn.Release()
	rows, places, held, _ := placesLedger(ctx, t, s)
	t.Logf("after a give-back by a decision whose client hung up: %d rows, %d places counted, %d held", rows, places, held)
	if places != rows+held {
		t.Errorf("%d places counted, %d rows + %d held; want equal: the dropped entry's places given back though the client hung up", places, rows, held)
	}
}

// twoPlacesAdmitting opens a store on a new schema, its clock stopped at
// now and its table of places cut to two entries, and admits one decision
// of each key under 10 an hour, failing t on any error or refusal. The
// store is closed when t ends.
func twoPlacesAdmitting(ctx context.Context, t *testing.T, now time.Time, keys ...string) *Store {
	t.Helper()
	s, err := Open(ctx, pgtest.Schema(t), Config{Clock: clocktest.At(now)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.places.max = 2
	hour := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Hour}
	for _, key := range keys {
		if r, err := s.Allow(ctx, key, hour); err != nil || !r.Allowed {
			t.Fatalf("Allow(%s) = %+v, %v", key, r, err)
		}
	}
	return s
}

// placesLedger reads what the store's places add up to: the rows of
// sluice_usage, the places its group rows count, the free places the
// store's table still holds, and that table's entries. With none lost,
// places is rows plus held.
func placesLedger(ctx context.Context, t *testing.T, s *Store) (rows, places, held int64, entries int) {
	t.Helper()
	if err := s.Pool().QueryRow(ctx,
		"SELECT (SELECT count(*) FROM sluice_usage), (SELECT sum(keys) FROM sluice_usage_groups)").Scan(&rows, &places); err != nil {
		t.Fatal(err)
	}
	s.places.mu.Lock()
	defer s.places.mu.Unlock()
	for _, e := range s.places.m {
		held += e.held()
	}
	return rows, places, held, len(s.places.m)
}
