package pgstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/pgstore"
)

// TestUncappedKeysNameNoGroup: with the cap off (MaxKeysPerGroup
// negative), a decision neither asks Config.Group for the key's group nor
// writes one on its row: key_group is NULL, as migration 0003 says of a
// writer that caps nothing.
func TestUncappedKeysNameNoGroup(t *testing.T) {
	var asked atomic.Int64
	s := openCfg(t, pgstore.Config{
		Clock:           clocktest.At(time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC)),
		MaxKeysPerGroup: -1,
		Group:           func(key string) string { asked.Add(1); return pgstore.DefaultGroup(key) },
	})
	ctx := context.Background()
	for _, key := range []string{"api_tenant_a", "api_tenant_a", "api_tenant_b"} {
		if r, err := s.Allow(ctx, key, hour); err != nil || !r.Allowed {
			t.Fatalf("Allow(%s) = %+v, %v", key, r, err)
		}
	}
	var named int64
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM sluice_usage WHERE key_group IS NOT NULL").Scan(&named); err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 0 || named != 0 {
		t.Errorf("cap off: Config.Group asked %d times, %d rows name a group; want 0 and 0", n, named)
	}
}

// openStores opens n stores, as n processes would, on one fresh schema of
// the shared server, each with a pool of conns connections and cfg.
func openStores(t *testing.T, n, conns int, cfg pgstore.Config) []*pgstore.Store {
	t.Helper()
	url := pgtest.Schema(t) + "&pool_max_conns=" + strconv.Itoa(conns)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := make([]*pgstore.Store, n)
	for i := range out {
		s, err := pgstore.Open(ctx, url, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

// groupCount reads the ledger's rows of the period that holds now (the
// keys counted) and the places its group rows hand out (keys taken, by a
// row or held by a store).
func groupCount(t *testing.T, s *pgstore.Store) (rows, places int64) {
	t.Helper()
	err := s.Pool().QueryRow(context.Background(),
		"SELECT (SELECT count(*) FROM sluice_usage), (SELECT coalesce(sum(keys), 0) FROM sluice_usage_groups)").Scan(&rows, &places)
	if err != nil {
		t.Fatal(err)
	}
	return rows, places
}

// newKeys decides up to n new keys of the group "api_tenant" on s, one at
// a time, and returns how many were admitted before the first refusal for
// the cap (n if none was refused).
func newKeys(t *testing.T, s *pgstore.Store, n int) (admitted int) {
	t.Helper()
	for range n {
		r, err := s.Allow(context.Background(), hostileKey(t, 40), hour)
		switch {
		case err == nil && r.Allowed:
			admitted++
		case errors.Is(err, pgstore.ErrTooManyKeys):
			return admitted
		default:
			t.Fatalf("Allow(a new key) = %+v, %v", r, err)
		}
	}
	return admitted
}

// TestNewKeysTakeTheirGroupsPlacesInBlocks: a store deciding 100 new keys
// of one group writes the group's row a few times, taking places in
// blocks, not once per key: the row every new key of the group would
// otherwise update, and lock until its commit, one key at a time.
func TestNewKeysTakeTheirGroupsPlacesInBlocks(t *testing.T) {
	s := openStores(t, 1, 4, pgstore.Config{Clock: clocktest.At(time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC))})[0]
	ctx := context.Background()
	_, err := s.Pool().Exec(ctx, `CREATE TABLE test_group_writes (n bigint NOT NULL);
INSERT INTO test_group_writes VALUES (0);
CREATE FUNCTION test_count_group_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN UPDATE test_group_writes SET n = n + 1; RETURN NULL; END $$;
CREATE TRIGGER test_count_group_write AFTER INSERT OR UPDATE ON sluice_usage_groups
	FOR EACH ROW EXECUTE FUNCTION test_count_group_write();`)
	if err != nil {
		t.Fatal(err)
	}
	if got := newKeys(t, s, 100); got != 100 {
		t.Fatalf("%d of 100 new keys admitted under the default cap", got)
	}
	var writes int64
	if err := s.Pool().QueryRow(ctx, "SELECT n FROM test_group_writes").Scan(&writes); err != nil {
		t.Fatal(err)
	}
	rows, places := groupCount(t, s)
	t.Logf("100 new keys: %d writes of the group row; %d rows, %d places taken", writes, rows, places)
	if writes > 10 || rows != 100 || places < rows || places > rows+pgstore.MaxPlaceBlock {
		t.Errorf("100 new keys: %d writes of the group row, %d rows, %d places taken; want at most 10 writes, 100 rows, 100 to %d places",
			writes, rows, places, 100+pgstore.MaxPlaceBlock)
	}
}

// TestKeyCapRefusesEarlyByAtMostThePlacesOthersHold: under a cap of 80, a
// store that decided new keys holds places it has not used; a second store
// is refused a new key once the group's rows and those places reach the
// cap, earlier than the cap by at most MaxPlaceBlock; the first store then
// spends its places, and the group ends with exactly the cap's rows.
func TestKeyCapRefusesEarlyByAtMostThePlacesOthersHold(t *testing.T) {
	const maxKeys = 80
	st := openStores(t, 2, 2, pgstore.Config{Clock: clocktest.At(time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC)), MaxKeysPerGroup: maxKeys})
	a, b := st[0], st[1]
	if got := newKeys(t, a, 20); got != 20 {
		t.Fatalf("store a: %d of 20 new keys admitted under a cap of %d", got, maxKeys)
	}
	gotB := newKeys(t, b, maxKeys)
	rows, places := groupCount(t, b)
	t.Logf("store b admitted %d before a refusal: %d rows, %d places taken", gotB, rows, places)
	if gotB == maxKeys || rows > maxKeys || places > maxKeys || maxKeys-rows > pgstore.MaxPlaceBlock {
		t.Fatalf("store b admitted %d of %d new keys; %d rows, %d places; want a refusal with at most %d rows, and at most %d fewer",
			gotB, maxKeys, rows, places, maxKeys, pgstore.MaxPlaceBlock)
	}
	held := maxKeys - rows
	if got := newKeys(t, a, maxKeys); int64(got) != held {
		t.Errorf("store a admitted %d more new keys, want the %d places it held", got, held)
	}
	if rows, places := groupCount(t, a); rows != maxKeys || places != maxKeys {
		t.Errorf("after both stores were refused: %d rows, %d places; want exactly the cap, %d", rows, places, maxKeys)
	}
}

// TestKeyCapHoldsAcrossStores: four stores (processes) of four connections
// each, sixteen goroutines sending new keys of one group at once, never
// count more keys than the cap, every key counted was answered admitted,
// and the places taken and not used are at most MaxPlaceBlock per store;
// once each store has been refused in turn,
// the group holds exactly the cap's keys: no place was lost.
func TestKeyCapHoldsAcrossStores(t *testing.T) {
	const maxKeys, stores, conns = 300, 4, 4
	st := openStores(t, stores, conns, pgstore.Config{Clock: clocktest.At(time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC)), MaxKeysPerGroup: maxKeys})
	admitted, refused := newKeysAtOnce(t, st, stores*conns, 30, 40)
	rows, places := groupCount(t, st[0])
	t.Logf("480 new keys on %d stores: admitted %d, refused %d; %d rows, %d places taken", stores, admitted, refused, rows, places)
	if rows != admitted || rows > maxKeys || places > maxKeys || refused == 0 {
		t.Fatalf("admitted %d, %d rows, %d places, %d refused; want as many rows as admissions, at most %d rows and places, refusals", admitted, rows, places, refused, maxKeys)
	}
	if bound := int64(stores * pgstore.MaxPlaceBlock); places-rows > bound {
		t.Errorf("%d places taken and unused, want at most %d", places-rows, bound)
	}
	for i, s := range st {
		got := newKeys(t, s, maxKeys)
		t.Logf("store %d admitted %d more", i, got)
	}
	if rows, places := groupCount(t, st[0]); rows != maxKeys || places != maxKeys {
		t.Errorf("after every store was refused: %d rows, %d places; want exactly the cap, %d", rows, places, maxKeys)
	}
}

// TestSameNewKeysFromManyStoresAtOnce: sixteen goroutines on four stores
// deciding the same new keys of one group at the same moments, under a
// cap that refuses some of them, never wait on each other's rows in a
// cycle (PostgreSQL would abort one decision with a deadlock error): every
// decision is admitted or refused for the cap, every admission is counted,
// and no more keys than the cap are.
func TestSameNewKeysFromManyStoresAtOnce(t *testing.T) {
	const maxKeys, stores, conns, keys = 40, 4, 4, 60
	st := openStores(t, stores, conns, pgstore.Config{Clock: clocktest.At(time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC)), MaxKeysPerGroup: maxKeys})
	lim := hour
	lim.Rate = 1000
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range stores * conns {
		wg.Go(func() {
			for k := range keys {
				r, err := st[i%stores].Allow(context.Background(), "api_tenant_"+strconv.Itoa(k), lim)
				switch {
				case err == nil && r.Allowed:
					admitted.Add(1)
				case errors.Is(err, pgstore.ErrTooManyKeys):
				default:
					t.Errorf("Allow(key %d) = %+v, %v", k, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	var rows, counted int64
	if err := st[0].Pool().QueryRow(context.Background(), "SELECT count(*), coalesce(sum(count), 0) FROM sluice_usage").Scan(&rows, &counted); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d decisions admitted; %d rows counting %d", admitted.Load(), rows, counted)
	if counted != admitted.Load() || rows > maxKeys || rows == 0 {
		t.Errorf("%d decisions admitted, %d rows counting %d; want every admission counted, in at most %d rows", admitted.Load(), rows, counted, maxKeys)
	}
}

// TestNewKeyAfterKnownKeysIsTwoRoundTrips: a decision of a key known to
// have its row is one statement even when the store holds no free place
// of its group; a new key of that group is then two (the first finds no
// row, the second takes a block of places), and the next new key one (a
// place of that block).
func TestNewKeyAfterKnownKeysIsTwoRoundTrips(t *testing.T) {
	ctx := context.Background()
	pool, sent := tracedPool(t)
	s, err := pgstore.New(ctx, pool, pgstore.Config{Clock: clocktest.At(time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	// The statements prepared first: a new key's, a known key's.
	for _, key := range []string{"api_tenant_a", "api_tenant_a", "api_tenant_a"} {
		if r, err := s.Allow(ctx, key, hour); err != nil || !r.Allowed {
			t.Fatalf("Allow(%s) = %+v, %v", key, r, err)
		}
	}
	for _, step := range []struct {
		key  string
		want int64
	}{{"api_tenant_a", 1}, {"api_tenant_b", 2}, {"api_tenant_c", 1}, {"api_tenant_a", 1}, {"api_tenant_b", 1}} {
		sent.n.Store(0)
		if r, err := s.Allow(ctx, step.key, hour); err != nil || !r.Allowed {
			t.Fatalf("Allow(%s) = %+v, %v", step.key, r, err)
		}
		if n := sent.n.Load(); n != step.want {
			t.Errorf("Allow(%s) sent %d statements, want %d", step.key, n, step.want)
		}
	}
}

// TestSlowClaimLeavesConnectionsForOtherGroups: while a claim of a group's
// places is held slow (a session holds the group's row FOR UPDATE), eight
// goroutines sending new keys of that group wait for the claim without a
// connection of the pool (of 4): 20 decisions of another tenant's new keys,
// each given 500 ms, are all answered.
func TestSlowClaimLeavesConnectionsForOtherGroups(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Schema(t)
	octx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	s, err := pgstore.Open(octx, url+"&pool_max_conns=4", pgstore.Config{Clock: clocktest.At(time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	lock, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(ctx)
	// The group's row exists, and the store holds no free place of it.
	if got := newKeys(t, s, 1); got != 1 {
		t.Fatal("the group's first key was refused")
	}
	tx, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT FROM sluice_usage_groups FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	var started atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			started.Add(1)
			dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if r, err := s.Allow(dctx, hostileKey(t, 40), hour); err != nil || !r.Allowed {
				t.Errorf("a new key of the slow group, once its row was let go: %+v, %v", r, err)
			}
		})
	}
	defer wg.Wait()
	defer tx.Rollback(ctx)
	storetest.WaitFor(t, "a claim waiting for the group's row, and 8 decisions begun", func() bool {
		var n int64
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0 && started.Load() == 8
	})
	answered := 0
	var slowest time.Duration
	var lastErr error
	for i := range 20 {
		dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		began := time.Now()
		r, err := s.Allow(dctx, "api_other_"+strconv.Itoa(i), hour)
		cancel()
		slowest = max(slowest, time.Since(began))
		if err == nil && r.Allowed {
			answered++
		} else {
			lastErr = err
		}
	}
	t.Logf("another tenant: %d of 20 answered, slowest %v; pool: %d connections acquired", answered, slowest, s.Pool().Stat().AcquiredConns())
	if answered != 20 {
		t.Errorf("another tenant's decisions answered %d of 20 within 500 ms behind a slow claim (last error: %v)", answered, lastErr)
	}
}
