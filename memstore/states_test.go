package memstore

import (
	"testing"

	"github.com/sluicehq/sluice"
)

// Every algorithm sluice names has its table in each shard, at its index,
// and decide has its case: a new algorithm registered in sluice and not
// here fails this test rather than being decided by another algorithm. The
// sliding window with buckets has the table after them, and the one with
// moments the table after that.
func TestEveryAlgorithmHasATable(t *testing.T) {
	s := New(Config{Shards: 1, SweepInterval: -1})
	defer s.Close()
	sh := &s.shards[0]
	if len(sh.tables) != len(sluice.Algorithms())+2 {
		t.Fatalf("a shard has %d tables for %d algorithms and the sliding windows with buckets and with moments", len(sh.tables), len(sluice.Algorithms()))
	}
	swb := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 1, Period: 1e9, Buckets: 2}
	if _, err := sh.decide(0, 1, "b", swb, 1); err != nil || sh.sb.n != 1 || sh.sw.n != 0 {
		t.Errorf("sliding window with buckets: decide: %v; %d keys in its table, %d in the two-window one, want 1, 0", err, sh.sb.n, sh.sw.n)
	}
	swm := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 1, Period: 1e9, Buckets: 2, Moments: 1}
	if _, err := sh.decide(0, 1, "m", swm, 1); err != nil || sh.sm.n != 1 || sh.sb.n != 1 || sh.sw.n != 0 {
		t.Errorf("sliding window with moments: decide: %v; %d keys in its table, %d in the bucketed one, want 1, 1", err, sh.sm.n, sh.sb.n)
	}
	if sh.sm.heap == 0 || sh.sm.heap != int64(sh.sm.get(1, "m").Bytes()) {
		t.Errorf("sliding window with moments: its table counts %d heap bytes, its state holds %d", sh.sm.heap, sh.sm.get(1, "m").Bytes())
	}
	sh.n = 0
	for _, a := range sluice.Algorithms() {
		if sh.tables[a] == nil {
			t.Errorf("%v has no table", a)
		}
		lim := sluice.Limit{Algorithm: a, Rate: 1, Period: 1e9, Burst: 1}
		if _, err := sh.decide(0, 1, "k", lim, 1); err != nil {
			t.Errorf("%v: decide: %v", a, err)
		}
		if sh.n != int(a)+1 {
			t.Errorf("%v: the key did not land in a table of its own (%d keys)", a, sh.n)
		}
	}
}
