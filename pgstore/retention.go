package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PruneBatch is the most rows one statement of Prune deletes: each batch is
// a transaction of its own, so a prune of millions of rows holds no long
// transaction and no lock on a period still counting.
const PruneBatch = 10_000

// Pruned is what Prune deleted.
type Pruned struct {
	// Usage is the ledger's rows deleted (sluice_usage): one per key and
	// period.
	Usage int64
	// Groups is the rows of distinct keys per group deleted
	// (sluice_usage_groups).
	Groups int64
}

// pruneUsageSQL and pruneGroupsSQL delete one batch of the rows of periods
// that ended at or before $1. period_start < $1 lets the index on
// period_start find them.
const (
	pruneUsageSQL = `DELETE FROM sluice_usage WHERE ctid = ANY (ARRAY(
	SELECT ctid FROM sluice_usage WHERE period_start < $1 AND period_end <= $1 LIMIT $2))`
	pruneGroupsSQL = `DELETE FROM sluice_usage_groups WHERE ctid = ANY (ARRAY(
	SELECT ctid FROM sluice_usage_groups WHERE period_start < $1 AND period_end <= $1 LIMIT $2))`
)

// Prune deletes, from the database of pool (whose schema Migrate brought up
// to date), every period of the ledger that ended at or before before: the
// usage rows and the groups' key counts, PruneBatch rows per statement,
// until none is left or ctx ends (what was deleted until then stays
// deleted, and is reported with the error). A period that has not ended is
// never deleted, as its row is the count its quota is decided on: a before
// later than now (the system clock) is an error, and nothing is deleted.
// Rows a decision writes while Prune runs are periods that have not ended,
// which it leaves alone.
//
// It is the ledger's retention: run it periodically (sluice migrate prune
// -older-than 90d) after exporting what the bills need.
func Prune(ctx context.Context, pool *pgxpool.Pool, before time.Time) (Pruned, error) {
	return PruneBatches(ctx, pool, before, nil)
}

// PruneBatches is Prune, calling batch (when not nil) after each statement
// that deleted rows with the number of rows it deleted, so that a caller
// can show progress against Prunable's count.
func PruneBatches(ctx context.Context, pool *pgxpool.Pool, before time.Time, batch func(rows int64)) (Pruned, error) {
	var p Pruned
	if now := time.Now(); before.After(now) {
		return p, fmt.Errorf("pgstore: pruning before %s, after now (%s): a period that has not ended is never pruned", before.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	for _, step := range []struct {
		sql string
		n   *int64
	}{{pruneUsageSQL, &p.Usage}, {pruneGroupsSQL, &p.Groups}} {
		n, err := deleteBatches(ctx, pool.Exec, step.sql, before, batch)
		*step.n += n
		if err != nil {
			return p, fmt.Errorf("pgstore: pruning: %w", err)
		}
	}
	return p, nil
}

// prunableSQL counts the rows Prune($1) then Sweep($2) delete: the ledger's
// periods ended by $1, the periods of limits not billable ended by $2, and
// the groups' key counts ended by the later of the two (period_start <
// period_end, so the period_start bound only lets the index find them).
const prunableSQL = `SELECT
	(SELECT count(*) FROM sluice_usage WHERE (period_start < $1 AND period_end <= $1) OR (NOT billable AND period_end <= $2))
	+ (SELECT count(*) FROM sluice_usage_groups WHERE period_start < greatest($1, $2) AND period_end <= greatest($1, $2))`

// Prunable returns how many rows Prune(ctx, pool, before) followed by
// Sweep(ctx, pool, sweepBefore) would delete now: the whole that
// PruneBatches' and SweepBatches' batches add up to, unless periods end
// or rows are written in between. It reads every such row's index entry,
// so it costs about what a scan of the rows to delete costs; call it to
// show progress, not before every prune.
func Prunable(ctx context.Context, pool *pgxpool.Pool, before, sweepBefore time.Time) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, prunableSQL, before, sweepBefore).Scan(&n); err != nil {
		return 0, fmt.Errorf("pgstore: counting the rows to prune: %w", err)
	}
	return n, nil
}

// SweepGrace is how long after its end a period of a limit that is not
// billable is kept before Sweep deletes it: a process whose clock runs
// behind by less than this still counts in the row it finds, rather than
// in a new one from zero.
const SweepGrace = time.Minute

// sweepSQL deletes one batch of the rows of limits that are not billable
// whose period ended at or before $1, through the partial index of
// migration 0004.
const sweepSQL = `DELETE FROM sluice_usage WHERE ctid = ANY (ARRAY(
	SELECT ctid FROM sluice_usage WHERE NOT billable AND period_end <= $1 LIMIT $2))`

// Sweep deletes, from the database of pool, the periods of limits that are
// not billable (sluice.Limit.Billable false) that ended at or before
// before, PruneBatch rows per statement, and returns how many it deleted
// (with the error, if ctx ended or the database failed on the way). Their
// rows are the counts of periods no decision counts in any more, and no
// ledger: it is what keeps keys that clients choose from growing the table.
// It also deletes the groups' key counts (Config.MaxKeysPerGroup) of the
// periods that ended by then, which no decision reads any more and whose
// group names a client's values may choose. Billable periods' usage rows,
// and every period that has not ended, are left alone.
// Store runs it in the background with Config.SweepEvery; `sluice migrate
// prune` runs it with Prune.
func Sweep(ctx context.Context, pool *pgxpool.Pool, before time.Time) (int64, error) {
	return SweepBatches(ctx, pool, before, nil)
}

// SweepBatches is Sweep, calling batch (when not nil) after each statement
// that deleted rows with the number of rows it deleted, the groups' key
// counts included (which Sweep's count leaves out).
func SweepBatches(ctx context.Context, pool *pgxpool.Pool, before time.Time, batch func(rows int64)) (int64, error) {
	n, err := deleteBatches(ctx, pool.Exec, sweepSQL, before, batch)
	if err == nil {
		_, err = deleteBatches(ctx, pool.Exec, pruneGroupsSQL, before, batch)
	}
	if err != nil {
		return n, fmt.Errorf("pgstore: sweeping: %w", err)
	}
	return n, nil
}

// Swept returns the rows the store's background sweep has deleted.
func (s *Store) Swept() int64 { return s.swept.Load() }

// startSweep runs a sweep every interval, of the periods that ended
// SweepGrace before the store's clock, until Close.
func (s *Store) startSweep(every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.stopSweep = func() { cancel(); <-done }
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := s.sweepOnce(ctx, every); err != nil && ctx.Err() == nil {
				s.log.Warn("pgstore: sweeping the periods of limits that are not billable failed; retrying", "err", err, "every", every)
			}
		}
	}()
}

// sweepOnce runs one sweep, within the longer of every and a minute (a
// sweep of many rows may take longer than a short interval; ticks that
// come meanwhile are dropped), on a connection with no statement_timeout
// left from a decision.
func (s *Store) sweepOnce(ctx context.Context, every time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, max(every, time.Minute))
	defer cancel()
	conn, err := s.untimed(ctx, "sweeping")
	if err != nil {
		return err
	}
	defer conn.Release()
	before := s.now().Add(-SweepGrace)
	n, err := deleteBatches(ctx, conn.Exec, sweepSQL, before, nil)
	s.swept.Add(n)
	if err == nil {
		_, err = deleteBatches(ctx, conn.Exec, pruneGroupsSQL, before, nil)
	}
	if err != nil {
		return fmt.Errorf("pgstore: sweeping: %w", err)
	}
	return nil
}

// deleteBatches runs sql, a DELETE of at most $2 rows that ended at or
// before $1, until a batch deletes fewer than PruneBatch or ctx ends, and
// returns the rows deleted.
func deleteBatches(ctx context.Context, exec func(context.Context, string, ...any) (pgconn.CommandTag, error), sql string, before time.Time, batch func(int64)) (int64, error) {
	var n int64
	for {
		tag, err := exec(ctx, sql, before, PruneBatch)
		if err != nil {
			return n, err
		}
		n += tag.RowsAffected()
		if batch != nil && tag.RowsAffected() > 0 {
			batch(tag.RowsAffected())
		}
		if tag.RowsAffected() < PruneBatch {
			return n, nil
		}
	}
}
