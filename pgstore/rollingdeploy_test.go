package pgstore_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/pgstore"
)

// TestNewKeyDecidedByAnOldBinaryAtOnceIsNotADeadlock: during a rolling
// deploy, a binary from before place blocks inserts a new key's row and
// then, through migration 0003's trigger, locks its group's row; this
// store's claim locks the group's row, then inserts the key's row. The same
// new key decided by both at once waits in a cycle, and PostgreSQL aborts
// one of them (40P01). The store's statement, rolled back whole, is sent
// again, once: the decision is answered, not failed, and counted once.
//
// The old binary is a session that takes the two locks in its order, in two
// statements, with a long deadlock_timeout, so that the store's backend is
// the one PostgreSQL aborts.
func TestNewKeyDecidedByAnOldBinaryAtOnceIsNotADeadlock(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.At(time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC))
	url := pgtest.Schema(t)
	octx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	s, err := pgstore.Open(octx, url+"&pool_max_conns=1", pgstore.Config{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// The group's row exists, and the store has no free place left.
	if r, err := s.Allow(ctx, "api_tenant_a", hour); err != nil || !r.Allowed {
		t.Fatalf("Allow(api_tenant_a) = %+v, %v", r, err)
	}
	var storePID int32
	if err := s.Pool().QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&storePID); err != nil {
		t.Fatal(err)
	}

	old, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(ctx)
	const key = "api_tenant_k"
	kh, gh := sha256.Sum256([]byte(key)), sha256.Sum256([]byte("api_tenant"))
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	tx, err := old.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL deadlock_timeout = '30s'"); err != nil {
		t.Fatal(err)
	}
	// The old order, first: the key's row.
	if _, err := tx.Exec(ctx, `INSERT INTO sluice_usage (key_hash, period_start, period_end, key, count, quota)
VALUES ($1, $2, $3, $4, 1, 10)`, kh[:], start, start.Add(time.Hour), []byte(key)); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		allowed bool
		count   int64
		err     error
	}
	done := make(chan answer, 1)
	go func() {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := s.Allow(dctx, key, hour)
		done <- answer{r.Allowed, int64(hour.Rate) - int64(r.Remaining), err}
	}()
	// The store's claim holds the group's row and waits for the key's.
	storetest.WaitFor(t, "the store's decision waiting for the key's row", func() bool {
		var waiting bool
		if err := old.QueryRow(ctx, "SELECT wait_event_type IS NOT DISTINCT FROM 'Lock' FROM pg_stat_activity WHERE pid = $1", storePID).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	// The old order, second: the group's row (the trigger's write).
	if _, err := tx.Exec(ctx, "UPDATE sluice_usage_groups SET keys = keys + 1 WHERE group_hash = $1 AND period_start = $2", gh[:], start); err != nil {
		t.Fatalf("the old binary's session: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-done
	t.Logf("the store's decision of the key both decided: allowed %v, count %d, err %v", a.allowed, a.count, a.err)
	if a.err != nil || !a.allowed || a.count != 2 {
		t.Errorf("Allow(%s) decided at once with an old binary = allowed %v, count %d, %v; want admitted, count 2 (the old binary's unit and its own)",
			key, a.allowed, a.count, a.err)
	}
}
