package pgstore

import (
	"context"
	"fmt"
	"time"

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
	var p Pruned
	if now := time.Now(); before.After(now) {
		return p, fmt.Errorf("pgstore: pruning before %s, after now (%s): a period that has not ended is never pruned", before.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	for _, step := range []struct {
		sql string
		n   *int64
	}{{pruneUsageSQL, &p.Usage}, {pruneGroupsSQL, &p.Groups}} {
		for {
			tag, err := pool.Exec(ctx, step.sql, before, PruneBatch)
			if err != nil {
				return p, fmt.Errorf("pgstore: pruning: %w", err)
			}
			*step.n += tag.RowsAffected()
			if tag.RowsAffected() < PruneBatch {
				break
			}
		}
	}
	return p, nil
}
