package algorithm_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// Every algorithm sluice names has its States, whose fresh states admit a
// first request and are fresh (Expires 0) before it.
func TestNewStatesCoversEveryAlgorithm(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		lim := sluice.Limit{Algorithm: a, Rate: 10, Period: time.Second, Burst: 10}
		st := algorithm.NewStates(lim, 3)
		if st == nil {
			t.Fatalf("NewStates(%v) = nil: the algorithm has no entry in the registry", a)
		}
		if st.Len() != 3 || st.Size() <= 0 {
			t.Errorf("%v: Len %d, Size %d", a, st.Len(), st.Size())
		}
		if got, _ := st.Limit(); got != lim {
			t.Errorf("%v: Limit() = %v, want %v", a, got, lim)
		}
		if st.At(1).Expires() != 0 {
			t.Errorf("%v: a fresh state expires at %d, want 0", a, st.At(1).Expires())
		}
		if r, _ := st.Take(1, 1e18, 1); !r.Allowed {
			t.Errorf("%v: a fresh state denied its first request: %+v", a, r)
		}
		if st.At(1).Expires() == 0 {
			t.Errorf("%v: Take did not change the state At(1) returns", a)
		}
		if st.At(0).Expires() != 0 || st.At(2).Expires() != 0 {
			t.Errorf("%v: At(1) shares its state with another index", a)
		}
	}
	if algorithm.NewStates(sluice.Limit{Algorithm: 200, Rate: 1, Period: 1}, 1) != nil {
		t.Error("NewStates of an unknown algorithm is not nil")
	}
}
