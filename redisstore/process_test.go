package redisstore_test

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
			outs := make([]string, processes)
			var wg sync.WaitGroup
			for p := range processes {
				wg.Go(func() {
					cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1", "-test.v")
					cmd.Env = append(os.Environ(),
						"SLUICE_CHILD_URL="+url, "SLUICE_CHILD_KEY="+key, "SLUICE_CHILD_ALG="+a.String())
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Errorf("child %d: %v\n%s", p, err, out)
					}
					outs[p] = string(out)
				})
			}
			wg.Wait()
			total := 0
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
	key := os.Getenv("SLUICE_CHILD_KEY")
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range 2 * allowance / goroutines {
				r, err := s.Allow(context.Background(), key, lim)
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
