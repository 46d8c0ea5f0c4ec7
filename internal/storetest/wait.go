package storetest

import (
	"testing"
	"time"
)

// WaitFor polls cond every 5 ms until it holds, and stops t (t.Fatalf,
// naming what) if it does not within 30 seconds. It is for waiting on real
// processes and networks (a store stopped or restarted, load that must
// reach a point), never for passing time a fake clock could pass.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a real process, not passing time for an algorithm
	}
}
