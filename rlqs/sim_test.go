package rlqs_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/rlqs"
)

// simulate runs 10 Envoys, each sending 30 requests per second on one
// bucket of 100 per second, for 60 s against the servers srv picks.
func simulate(t *testing.T, srv func(i int) *rlqs.Server) {
	f := newFleet(t.Context(), 10, srv)
	defer f.close()
	admitted := f.drive(60*time.Second, func(int) float64 { return 30 })
	total := sum(admitted)
	t.Logf("admitted %d over 60 s (limit 6000): %v", total, admitted)
	if total < 5700 || total > 6300 {
		t.Errorf("admitted %d over 60 s, want within 5%% of 6000", total)
	}
}

func TestTenEnvoysAdmitTheGlobalLimitWithinFivePercent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, nil)
		simulate(t, func(int) *rlqs.Server { return s })
		shutdown(t, s)
	})
}

func TestTenEnvoysOnTwoReplicasSharingAStoreAdmitTheGlobalLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &rlqs.MemoryStore{}
		a, b := newServer(t, st), newServer(t, st)
		simulate(t, func(i int) *rlqs.Server { return []*rlqs.Server{a, b}[i%2] })
		shutdown(t, a)
		shutdown(t, b)
	})
}

func shutdown(t *testing.T, s *rlqs.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestSharesMoveToWhereTheTrafficIs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, nil)
		f := newFleet(t.Context(), 10, func(int) *rlqs.Server { return s })
		defer f.close()
		// Everyone busy, then only the first five.
		f.drive(20*time.Second, func(int) float64 { return 30 })
		admitted := f.drive(30*time.Second, func(i int) float64 { return map[bool]float64{true: 40, false: 1}[i < 5] })
		var busy, idle float64
		for i, c := range f.clients {
			if i < 5 {
				busy += c.Rate(apiBucket)
			} else {
				idle += c.Rate(apiBucket)
			}
		}
		t.Logf("rates: busy %.1f/s, idle %.1f/s; admitted %v", busy, idle, admitted)
		if busy < 85 || busy+idle > 100.5 {
			t.Errorf("the five busy Envoys hold %.1f/s and the idle ones %.1f/s of 100/s: want ≥ 85 busy, ≤ 100 in all", busy, idle)
		}
		if got := sum(admitted[:5]); got < 0.85*100*30-500 {
			t.Errorf("the busy Envoys admitted %d in 30 s, want most of the 3000", got)
		}
		shutdown(t, s)
	})
}

func TestADisconnectedEnvoysShareIsRedistributed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, nil)
		f := newFleet(t.Context(), 10, func(int) *rlqs.Server { return s })
		f.drive(20*time.Second, func(int) float64 { return 30 })
		before := f.clients[0].Rate(apiBucket)
		for _, c := range f.clients[5:] {
			c.Close()
		}
		f.clients = f.clients[:5]
		f.drive(11*time.Second, func(int) float64 { return 30 })
		after := f.clients[0].Rate(apiBucket)
		t.Logf("rate of a remaining Envoy: %.1f/s before, %.1f/s after five left", before, after)
		if before > 11 || after < 19 {
			t.Errorf("rate %.1f/s with ten Envoys, %.1f/s with five: want about 10 then about 20", before, after)
		}
		f.close()
		shutdown(t, s)
	})
}

func TestARestartedSluiceRecoversTheAssignmentsFromTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &rlqs.MemoryStore{}
		a := newServer(t, st)
		var cur = a
		f := newFleet(t.Context(), 10, func(int) *rlqs.Server { return cur })
		defer f.close()
		f.drive(20*time.Second, func(i int) float64 { return float64(5 + 5*i) })
		before := make([]float64, 10)
		for i, c := range f.clients {
			before[i] = c.Rate(apiBucket)
		}
		shutdown(t, a)
		synctest.Wait()
		// The shutdown's assignments expire at once.
		if _, exp := f.clients[0].Strategy(apiBucket); exp.After(time.Now()) {
			t.Errorf("after shutdown the assignment expires at %v, want now", exp)
		}
		cur = newServer(t, st)
		// The next report reconnects and gets an assignment at once.
		f.drive(5*time.Second+time.Millisecond, func(i int) float64 { return float64(5 + 5*i) })
		synctest.Wait()
		for i, c := range f.clients {
			got := c.Rate(apiBucket)
			if got < 0.9*before[i] || got > 1.1*before[i] {
				t.Errorf("Envoy %d: rate %.2f/s after the restart, %.2f/s before", i, got, before[i])
			}
		}
		shutdown(t, cur)
	})
}
