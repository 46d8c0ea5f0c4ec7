package pgstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/storetest"
)

// killedGoroutines is how many goroutines TestKilledChild decides from.
const killedGoroutines = 8

// TestKilledProcessBillsAtMostItsDecisionsInFlight kills (SIGKILL, as
// kill -9) a process that decides on two keys from 8 goroutines and prints
// a line for every admission it was told of, and checks that, once
// PostgreSQL has finished the statements the process left behind, the
// ledger counts every admission printed and at most one unit more per
// goroutine: the decisions in flight at the kill, whose outcome no one was
// told (committed or not, as the statement ran on after its client died).
func TestKilledProcessBillsAtMostItsDecisionsInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	url := pgtest.Schema(t)
	s, _ := openURL(t, url, nil)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SLUICE_PGSTORE_KILLED_URL="+url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	admitted := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sc.Text() == "+" {
			admitted++
		}
		if admitted == 300 {
			cmd.Process.Kill()
		}
	}
	cmd.Wait()
	if admitted < 300 {
		t.Fatalf("the child printed %d admissions before it ended, want 300 (it is killed at 300)", admitted)
	}
	storetest.WaitFor(t, "PostgreSQL to finish the killed process's statements", func() bool {
		var n int
		err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE pid <> pg_backend_pid() AND state <> 'idle' AND query LIKE '%sluice_usage%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	var billed int64
	if err := s.Pool().QueryRow(context.Background(), "SELECT coalesce(sum(count), 0) FROM sluice_usage").Scan(&billed); err != nil {
		t.Fatal(err)
	}
	t.Logf("admissions printed %d, ledger %d", admitted, billed)
	if billed < int64(admitted) || billed > int64(admitted+killedGoroutines) {
		t.Errorf("the ledger counts %d; the process printed %d admissions, and had at most %d decisions in flight", billed, admitted, killedGoroutines)
	}
}

// TestKilledChild is TestKilledProcessBillsAtMostItsDecisionsInFlight's
// process: it decides until killed (30 s at most), printing "+" for every
// admission. On its own it does nothing.
func TestKilledChild(t *testing.T) {
	s := childStore(t, "SLUICE_PGSTORE_KILLED_URL", "TestKilledProcessBillsAtMostItsDecisionsInFlight")
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1 << 40, Period: sluice.MaxPeriod}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	end := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	for g := range killedGoroutines {
		wg.Go(func() {
			key := "killed_" + strconv.Itoa(g%2)
			for time.Now().Before(end) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				r, err := s.Allow(ctx, key, lim)
				cancel()
				if err == nil && r.Allowed {
					mu.Lock()
					fmt.Fprintln(w, "+")
					w.Flush()
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
}
