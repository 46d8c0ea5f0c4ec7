package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/pgstore"
)

// Not on a terminal (a pipe, a file, a log), migrate and migrate prune
// write no bar: stderr holds the error alone.
func TestMigrateWritesNoProgressOffATerminal(t *testing.T) {
	for _, args := range [][]string{
		{"migrate", "-timeout", "5s", "postgres://sluice@127.0.0.1:1/sluice"},
		{"migrate", "prune", "-older-than", "90d", "-timeout", "5s", "postgres://sluice@127.0.0.1:1/sluice"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 1 {
			t.Errorf("%v: exit %d, want 1", args, code)
		}
		if s := out.String() + errb.String(); strings.ContainsAny(s, "\r\033") || strings.Contains(s, "[") && strings.Contains(s, "%") {
			t.Errorf("%v wrote a bar off a terminal: %q", args, s)
		}
	}
}

// On a terminal, migrate prune moves its bar after every batch it deletes,
// by the batch's share of the rows counted first: 25,000 rows of periods
// long gone are three batches of the ledger, so the bar shows two shares
// between 0 and 1 before it is cleared, rising, and the rows are gone.
func TestMigratePruneShowsProgressPerBatch(t *testing.T) {
	srv := pgtest.StartServer(t)
	url := srv.Schema(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO sluice_usage (key_hash, period_start, period_end, key, count, quota)
SELECT sha256(convert_to('old' || i, 'UTF8')), '2019-01-01'::timestamptz, '2019-02-01'::timestamptz, convert_to('old' || i, 'UTF8'), 1, 1
FROM generate_series(1, 25000) AS i`); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var shares []float64
	bar := func(f float64) {
		mu.Lock()
		defer mu.Unlock()
		if len(shares) == 0 || shares[len(shares)-1] != f {
			shares = append(shares, f)
		}
	}
	now := time.Now()
	p, _, pruneErr, sweepErr := prune(ctx, pool, now.Add(-90*24*time.Hour), now.Add(-pgstore.SweepGrace), bar)
	if pruneErr != nil || sweepErr != nil || p.Usage != 25000 {
		t.Fatalf("prune: %+v, %v, %v; want 25,000 ledger rows deleted", p, pruneErr, sweepErr)
	}
	mu.Lock()
	defer mu.Unlock()
	var between []float64
	for i, f := range shares {
		if i > 0 && f < shares[i-1] {
			t.Errorf("the bar went back: %v", shares)
		}
		if f > 0 && f < 1 {
			between = append(between, f)
		}
	}
	if len(between) < 2 || shares[len(shares)-1] != 1 {
		t.Errorf("the bar's shares %v: want at least two between 0 and 1 (one per batch but the last), then 1", shares)
	}
}
