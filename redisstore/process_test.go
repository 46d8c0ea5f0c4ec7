package redisstore_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/redisstore"
)

const (
	processes  = 8
	goroutines = 32
	allowance  = 100
)

// TestManyProcessesExact runs 8 OS processes, each with its own connection
// pool and 32 goroutines, against one key on Redis's clock, and checks that
// together they admit exactly the allowance: not one more, not one less. The
// store never reads the caller's clock, so the processes' own clocks, skewed
// or not, cannot matter; only Redis's TIME does.
func TestManyProcessesExact(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns 8 processes")
	}
	url := singleURL(t)
	for _, a := range []sluice.Algorithm{sluice.TokenBucket, sluice.FixedWindow, sluice.SlidingLog, sluice.LeakyBucket} {
		t.Run(a.String(), func(t *testing.T) {
			key := "processes:" + a.String() + ":" + strconv.FormatInt(time.Now().UnixNano(), 36)
			each := storetest.RunChildren(t, processes, "TestChildProcess",
				"SLUICE_CHILD_URL="+url, "SLUICE_CHILD_KEY="+key, "SLUICE_CHILD_ALG="+a.String())
			total := 0
			for _, n := range each {
				total += n
			}
			if total != allowance {
				t.Errorf("%d processes × %d goroutines admitted %d, want exactly %d", processes, goroutines, total, allowance)
			}
		})
	}
}

// TestChildProcess is one of TestManyProcessesExact's processes; on its own
// it does nothing.
func TestChildProcess(t *testing.T) {
	url := os.Getenv("SLUICE_CHILD_URL")
	if url == "" {
		t.Skip("a child of TestManyProcessesExact; nothing to do on its own")
	}
	a, err := sluice.ParseAlgorithm(os.Getenv("SLUICE_CHILD_ALG"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := redisstore.New(context.Background(), redisstore.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Per hour, so that nothing refills while the test runs.
	lim := sluice.Limit{Algorithm: a, Rate: allowance, Period: time.Hour, Burst: allowance}
	storetest.AdmitAndPrint(t, s, os.Getenv("SLUICE_CHILD_KEY"), lim, goroutines, 2*allowance/goroutines)
}
