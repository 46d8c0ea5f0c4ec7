package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// A capacity above 2^31 must not wrap when the simulator works out the
// largest cost every algorithm can admit: a token bucket's burst of 2^32+1
// once read as 1, so an arrival of cost 2 was refused as "more than every
// algorithm can admit".
func TestCapacitiesAboveInt32DoNotWrap(t *testing.T) {
	p, err := ReadReplay(strings.NewReader("0,a,2\n1,a,3\n"), "replay")
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Rate: 1 << 20, Burst: 1<<32 + 1, Period: time.Second, Algorithms: []sluice.Algorithm{sluice.TokenBucket, sluice.FixedWindow}}
	r, err := Run(c, p)
	if err != nil {
		t.Fatalf("Run with burst 2^32+1 and costs 2 and 3: %v", err)
	}
	for _, a := range r.Algorithms {
		if a.Admitted != 2 {
			t.Errorf("%s admitted %d requests, want 2", a.Algorithm, a.Admitted)
		}
	}
}
