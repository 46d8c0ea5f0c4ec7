package rlqs_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/rlqstest"
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

func TestTenEnvoysOnTwoReplicasSharingMemoryAdmitTheGlobalLimit(t *testing.T) {
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

// topology is where the simulated Envoys connect: replicas Sluice
// servers sharing a store; Envoy i connects to replica i%replicas.
type topology struct {
	name     string
	replicas int
	store    func(t *testing.T) rlqs.Store
}

var topologies = []topology{
	{"one Sluice", 1, func(*testing.T) rlqs.Store { return &rlqs.MemoryStore{} }},
	{"two Sluice replicas sharing Redis", 2, func(t *testing.T) rlqs.Store { return newOutside(t, redisRLQS(t), 4) }},
}

// eachTopology runs test in a synctest bubble for each topology, with its
// replicas; Envoy i dials (*servers)[i%len].
func eachTopology(t *testing.T, test func(t *testing.T, st rlqs.Store, servers []*rlqs.Server, pick func(i int) *rlqs.Server)) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			st := tp.store(t)
			synctest.Test(t, func(t *testing.T) {
				servers := make([]*rlqs.Server, tp.replicas)
				for i := range servers {
					servers[i] = newServer(t, st)
				}
				var mu sync.Mutex
				pick := func(i int) *rlqs.Server {
					mu.Lock()
					defer mu.Unlock()
					return servers[i%len(servers)]
				}
				test(t, st, servers, pick)
				mu.Lock()
				defer mu.Unlock()
				for _, s := range servers {
					shutdown(t, s)
				}
			})
		})
	}
}

func TestSharesMoveToWhereTheTrafficIs(t *testing.T) {
	eachTopology(t, func(t *testing.T, _ rlqs.Store, _ []*rlqs.Server, pick func(int) *rlqs.Server) {
		f := newFleet(t.Context(), 10, pick)
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
	})
}

func TestADisconnectedEnvoysShareIsRedistributed(t *testing.T) {
	eachTopology(t, func(t *testing.T, _ rlqs.Store, _ []*rlqs.Server, pick func(int) *rlqs.Server) {
		f := newFleet(t.Context(), 10, pick)
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
	})
}

func TestARestartedSluiceRecoversTheAssignmentsFromTheStore(t *testing.T) {
	eachTopology(t, func(t *testing.T, st rlqs.Store, servers []*rlqs.Server, pick func(int) *rlqs.Server) {
		f := newFleet(t.Context(), 10, pick)
		defer f.close()
		rate := func(i int) float64 { return float64(5 + 5*i) }
		f.drive(20*time.Second, rate)
		before := make([]float64, 10)
		seen := make([]int, 10)
		for i, c := range f.clients {
			before[i] = c.Rate(apiBucket)
			seen[i] = len(c.History(apiBucket))
		}
		// Replica 0 restarts; its Envoys' assignments expire at once.
		shutdown(t, servers[0])
		synctest.Wait()
		if _, exp := f.clients[0].Strategy(apiBucket); exp.After(time.Now()) {
			t.Errorf("after shutdown the assignment expires at %v, want now", exp)
		}
		servers[0] = newServer(t, st)
		// The next report reconnects and gets an assignment at once.
		f.drive(5*time.Second+time.Millisecond, rate)
		synctest.Wait()
		for i, c := range f.clients {
			if i%len(servers) != 0 {
				continue
			}
			// The first assignment of the new server, after the shutdown's.
			h := c.History(apiBucket)
			if len(h) < seen[i]+2 {
				t.Fatalf("Envoy %d: %d assignments after the restart, want the shutdown's and a new one", i, len(h)-seen[i])
			}
			got := rlqstest.RateOf(h[seen[i]+1])
			if got < 0.9*before[i] || got > 1.1*before[i] {
				t.Errorf("Envoy %d: first rate %.2f/s after the restart, %.2f/s before", i, got, before[i])
			}
		}
	})
}
