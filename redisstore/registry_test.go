package redisstore

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Every algorithm sluice names has its row in the store's table: a script,
// a short name of its own in keys, and arguments for a plain limit. Needs
// no Redis.
func TestEveryAlgorithmHasAScript(t *testing.T) {
	seen := map[string]sluice.Algorithm{}
	for _, a := range sluice.Algorithms() {
		if int(a) >= len(algorithms) || algorithms[a].params == nil || scripts[a] == nil {
			t.Fatalf("%v has no row in redisstore's algorithms table", a)
		}
		short := algorithms[a].short
		if other, dup := seen[short]; dup || short == "" || short == "cc" {
			t.Errorf("%v: short name %q is empty, reserved or taken by %v", a, short, other)
		}
		seen[short] = a
		lim := sluice.Limit{Algorithm: a, Rate: 10, Period: time.Second, Burst: 10}
		if _, err := scriptParams(lim); err != nil {
			t.Errorf("%v: %v", a, err)
		}
	}
	// The sliding windows with buckets and with moments have scripts and
	// keys of their own.
	for _, lim := range []sluice.Limit{
		{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Second, Buckets: 4},
		{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Second, Buckets: 4, Moments: 2},
	} {
		a := scriptOf(&lim)
		if a < bucketsScript || scripts[a] == nil || algorithms[a].params == nil {
			t.Fatalf("%v has no script of its own", lim)
		}
		if other, dup := seen[algorithms[a].short]; dup {
			t.Errorf("%v: short name %q is taken by %v", lim, algorithms[a].short, other)
		}
		seen[algorithms[a].short] = a
		if _, err := scriptParams(lim); err != nil {
			t.Errorf("%v: %v", lim, err)
		}
	}
}
