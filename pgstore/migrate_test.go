package pgstore_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/pgstore"
)

// TestMigrateConcurrentlyThenAgain: eight pools migrating one fresh schema
// at once all succeed, the schema lists each migration once, and migrating
// again changes nothing.
func TestMigrateConcurrentlyThenAgain(t *testing.T) {
	url := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pools := make([]*pgxpool.Pool, 8)
	for i := range pools {
		p, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		pools[i] = p
	}
	var wg sync.WaitGroup
	errs := make([]error, len(pools))
	for i, p := range pools {
		wg.Go(func() { errs[i] = pgstore.Migrate(ctx, p) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d: %v", i, err)
		}
	}
	listed := func() (n int, at time.Time) {
		t.Helper()
		err := pools[0].QueryRow(ctx, "SELECT count(*), max(applied_at) FROM sluice_schema_migrations").Scan(&n, &at)
		if err != nil {
			t.Fatal(err)
		}
		return n, at
	}
	shipped, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(shipped) == 0 {
		t.Fatalf("no migrations found in the package's migrations directory (%v)", err)
	}
	n, at := listed()
	if n != len(shipped) {
		t.Errorf("sluice_schema_migrations lists %d migrations, want the %d shipped (%v)", n, len(shipped), shipped)
	}
	if err := pgstore.Migrate(ctx, pools[0]); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	if n2, at2 := listed(); n2 != n || !at2.Equal(at) {
		t.Errorf("migrating again changed sluice_schema_migrations: %d rows at %v, then %d at %v", n, at, n2, at2)
	}
}
