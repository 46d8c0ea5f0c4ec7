package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pgtest"
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
	outs := make([]string, processes)
	var wg sync.WaitGroup
	for p := range processes {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "SLUICE_PGSTORE_CHILD_URL="+url, "SLUICE_PGSTORE_CHILD_KEY="+key)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("child %d: %v\n%s", p, err, out)
			}
			outs[p] = string(out)
		})
	}
	wg.Wait()
	total := 0
	var each []int
	for p, out := range outs {
		_, after, ok := strings.Cut(out, "admitted=")
		if !ok {
			t.Fatalf("child %d printed no count:\n%s", p, out)
		}
		n, err := strconv.Atoi(strings.Fields(after)[0])
		if err != nil {
			t.Fatalf("child %d: %v", p, err)
		}
		total += n
		each = append(each, n)
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
	url := os.Getenv("SLUICE_PGSTORE_CHILD_URL")
	if url == "" {
		t.Skip("a child of TestManyProcessesAdmitExactlyTheQuota; nothing to do on its own")
	}
	s, _ := openURL(t, url+"&pool_max_conns=8", nil)
	key := os.Getenv("SLUICE_PGSTORE_CHILD_KEY")
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range attempts {
				r, err := s.Allow(context.Background(), key, quotaLimit)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("admitted=%d\n", admitted.Load())
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
