package pgstore_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/pgstore"
)

const (
	processes = 8
	// goroutines per process, each with up to 8 attempts: 2,048 attempts
	// on a quota of 1,000.
	goroutines = 32
	attempts   = 8
	quota      = 1000
)

// quotaLimit is a fixed window long enough (MaxPeriod, one window since
// 1970) that no process's clock crosses a boundary while the test runs.
var quotaLimit = sluice.Limit{Algorithm: sluice.FixedWindow, Rate: quota, Period: sluice.MaxPeriod}

// TestManyProcessesAdmitExactlyTheQuota runs 8 OS processes, each with its
// own pool and 32 goroutines, against one quota of 1,000 on a fresh schema
// (so the 8 also race to migrate it), and checks that together they admit
// exactly 1,000 and that the ledger says 1,000.
func TestManyProcessesAdmitExactlyTheQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns 8 processes")
	}
	url := pgtest.Schema(t)
	key := "processes:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	each := storetest.RunChildren(t, processes, "TestChildProcess",
		"SLUICE_PGSTORE_CHILD_URL="+url, "SLUICE_PGSTORE_CHILD_KEY="+key)
	total := 0
	for _, n := range each {
		total += n
	}
	t.Logf("admitted per process: %v", each)
	if total != quota {
		t.Errorf("%d processes × %d goroutines admitted %d, want exactly %d", processes, goroutines, total, quota)
	}
	s, _ := openURL(t, url, nil)
	u, err := s.Usage(context.Background(), key)
	if err != nil || len(u) != 1 || u[0].Count != quota {
		t.Errorf("the ledger = %+v, %v; want one period of %d", u, err, quota)
	}
}

// TestChildProcess is one of TestManyProcessesAdmitExactlyTheQuota's
// processes; on its own it does nothing.
func TestChildProcess(t *testing.T) {
	s := childStore(t, "SLUICE_PGSTORE_CHILD_URL", "TestManyProcessesAdmitExactlyTheQuota")
	storetest.AdmitAndPrint(t, s, os.Getenv("SLUICE_PGSTORE_CHILD_KEY"), quotaLimit, goroutines, attempts)
}

// childStore returns the store of a test a parent test runs in a process
// of its own: on the database whose URL the parent put in env, with a pool
// of 8 connections. Run on its own (env unset), the test is skipped,
// naming parent.
func childStore(t *testing.T, env, parent string) *pgstore.Store {
	t.Helper()
	url := os.Getenv(env)
	if url == "" {
		t.Skip("a child of " + parent + "; nothing to do on its own")
	}
	s, _ := openURL(t, url+"&pool_max_conns=8", nil)
	return s
}

// openURL opens a store on url, closed when the test ends.
func openURL(t testing.TB, url string, clock sluice.Clock) (*pgstore.Store, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, url, pgstore.Config{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, url
}
