package memstore_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// A MaxKeys too large to divide among the shards by rounding up is no
// bound at all, not one key per shard.
func TestHugeMaxKeysIsNoBound(t *testing.T) {
	for _, max := range []int{math.MaxInt, math.MaxInt - 1, math.MaxInt/2 + 1} {
		t.Run(strconv.Itoa(max), func(t *testing.T) {
			s := newTestStore(t, memstore.Config{Clock: clocktest.New(), MaxKeys: max})
			lim := limits(10)[0]
			for i := range 1000 {
				mustAllow(t, s, "k"+strconv.Itoa(i), lim, 1)
			}
			if got := s.Len(); got != 1000 {
				t.Errorf("MaxKeys %d: Len = %d after 1000 keys, want 1000", max, got)
			}
		})
	}
}
