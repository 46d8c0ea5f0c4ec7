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
		st := algorithm.NewStates(a, 3)
		if st == nil {
			t.Fatalf("NewStates(%v) = nil: the algorithm has no entry in the registry", a)
		}
		if st.Len() != 3 || st.Size() <= 0 {
			t.Errorf("%v: Len %d, Size %d", a, st.Len(), st.Size())
		}
		lim := sluice.Limit{Algorithm: a, Rate: 10, Period: time.Second, Burst: 10}
		s := st.At(1)
		if s.Expires() != 0 {
			t.Errorf("%v: a fresh state expires at %d, want 0", a, s.Expires())
		}
		if r := s.TakePrepared(1e18, lim, st.Prepare(lim), 1); !r.Allowed {
			t.Errorf("%v: a fresh state denied its first request: %+v", a, r)
		}
		if st.At(0).Expires() != 0 || st.At(2).Expires() != 0 {
			t.Errorf("%v: At(1) shares its state with another index", a)
		}
	}
	if algorithm.NewStates(sluice.Algorithm(200), 1) != nil {
		t.Error("NewStates of an unknown algorithm is not nil")
	}
}
