package storetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
)

// RunChildren runs n copies of the test binary at once, each running only
// the test named child with env added to its environment, and returns the
// count each printed as "admitted=N" (see AdmitAndPrint), in order. It
// fails t for a child that fails, and stops t for one that prints no count.
func RunChildren(t testing.TB, n int, child string, env ...string) []int {
	t.Helper()
	outs := make([]string, n)
	var wg sync.WaitGroup
	for p := range n {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("child %d: %v\n%s", p, err, out)
			}
			outs[p] = string(out)
		})
	}
	wg.Wait()
	counts := make([]int, n)
	for p, out := range outs {
		_, after, ok := strings.Cut(out, "admitted=")
		if !ok {
			t.Fatalf("child %d printed no count:\n%s", p, out)
		}
		c, err := strconv.Atoi(strings.Fields(after)[0])
		if err != nil {
			t.Fatalf("child %d: %v", p, err)
		}
		counts[p] = c
	}
	return counts
}

// AdmitAndPrint is a child's side of RunChildren: from goroutines
// goroutines at once it asks l for key under lim attempts times each, and
// prints "admitted=N", the number allowed. An error fails t and ends that
// goroutine's attempts.
func AdmitAndPrint(t testing.TB, l sluice.Limiter, key string, lim sluice.Limit, goroutines, attempts int) {
	admitted, _ := Hammer(t, goroutines, attempts, func(int) (sluice.Result, error) {
		return l.AllowN(context.Background(), key, lim, 1)
	})
	fmt.Printf("admitted=%d\n", admitted)
}
