package rlqs_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/rlqstest"
	"github.com/sluicehq/sluice/rlqs"
)

// held is what one raw stream's client holds for apiBucket: the token
// rate of its last assignment, until that assignment expires.
type held struct {
	mu      sync.Mutex
	rate    float64
	expires time.Time
	n       int // assignments received
}

// follow applies conn's assignments for apiBucket to h until the stream
// ends.
func (h *held) follow(conn rlqstest.Conn) {
	for {
		m, err := conn.Recv()
		if err != nil {
			return
		}
		now := time.Now()
		for _, a := range m.GetBucketAction() {
			qa := a.GetQuotaAssignmentAction()
			if qa == nil {
				continue
			}
			h.mu.Lock()
			h.rate = rlqstest.RateOf(qa.GetRateLimitStrategy())
			h.expires = now.Add(qa.GetAssignmentTimeToLive().AsDuration())
			h.n++
			h.mu.Unlock()
		}
	}
}

// at returns the rate h holds at now (0 once expired) and the number of
// assignments it received.
func (h *held) at(now time.Time) (float64, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !now.Before(h.expires) {
		return 0, h.n
	}
	return h.rate, h.n
}

// client opens a named stream to s from the peer at addr and follows its
// assignments.
func client(ctx context.Context, s *rlqs.Server, name, addr string) (rlqstest.Conn, *held) {
	md := metadata.Pairs(rlqs.ClientHeader, name)
	conn := rlqstest.Pipe(fromPeer(ctx, addr, nil), md, s.StreamRateLimitQuotas)
	h := &held{}
	go h.follow(conn)
	return conn, h
}

// A named Envoy that reconnects after a restart of Sluice and reports its
// bucket with time_elapsed 0 (as Envoy does first on a new stream) gets
// the share it had, not a newcomer's: its record in the store is its
// demand until it reports one.
func TestANamedClientReconnectingWithZeroElapsedKeepsItsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &rlqs.MemoryStore{}
		s1 := newServer(t, st)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		busy, hb := client(ctx, s1, "busy", "10.0.0.1:5000")
		light, hl := client(ctx, s1, "light", "10.0.0.2:5000")
		for range 3 { // busy asks 90/s, light 10/s, of 100/s
			if busy.Send(reports(usage(apiBucket, 5*time.Second, 450, 0))) != nil || light.Send(reports(usage(apiBucket, 5*time.Second, 50, 0))) != nil {
				t.Fatal("a stream ended")
			}
			time.Sleep(5 * time.Second)
			synctest.Wait()
		}
		before, _ := hb.at(time.Now())
		lightBefore, _ := hl.at(time.Now())
		shutdown(t, s1)
		s2 := newServer(t, st)
		again, ha := client(ctx, s2, "busy", "10.0.0.1:5001")
		if err := again.Send(reports(usage(apiBucket, 0, 0, 0))); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		after, n := ha.at(time.Now())
		t.Logf("busy: %.2f/s before the restart, %.2f/s first after it (light had %.2f/s)", before, after, lightBefore)
		if n == 0 || after < 0.95*before || after > 1.05*before {
			t.Errorf("the reconnected client's first share is %.2f/s (%d assignments), want the %.2f/s it had", after, n, before)
		}
		shutdown(t, s2)
		cancel()
		synctest.Wait()
	})
}

// reportEvery sends conn a report of perSec requests per second on
// apiBucket every 5 s, the first with time_elapsed 0 as Envoy sends a new
// bucket's, until ctx ends or the stream does.
func reportEvery(ctx context.Context, conn rlqstest.Conn, perSec uint64) {
	el := time.Duration(0)
	for {
		if conn.Send(reports(usage(apiBucket, el, perSec*uint64(el/time.Second), 0))) != nil {
			return
		}
		el = 5 * time.Second
		select {
		case <-ctx.Done():
			return
		case <-time.After(el):
		}
	}
}

// Two replicas share a store; one Envoy on each asks for the whole limit
// (100/s), then a third joins on the first replica and asks as much. At
// every instant, the assignments the three hold (unexpired) add up to at
// most the limit and the reserve (105/s), and once the others have seen
// the newcomer it holds its third.
func TestAJoinOnAnotherReplicaKeepsTheSumOfAssignmentsWithinTheReserve(t *testing.T) {
	t.Run("memory", func(t *testing.T) { joinOnAnotherReplica(t, &rlqs.MemoryStore{}) })
	t.Run("redis", func(t *testing.T) { joinOnAnotherReplica(t, newOutside(t, redisRLQS(t), 4)) })
}

func joinOnAnotherReplica(t *testing.T, st rlqs.Store) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newServer(t, st), newServer(t, st)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var hs []*held
		join := func(s *rlqs.Server, name, addr string) {
			conn, h := client(ctx, s, name, addr)
			hs = append(hs, h)
			go reportEvery(ctx, conn, 100)
		}
		const limit, bound = 100.0, 105.0
		worst, worstAt := 0.0, time.Duration(0)
		start := time.Now()
		sample := func(d time.Duration) {
			for end := time.Now().Add(d); time.Now().Before(end); {
				time.Sleep(100 * time.Millisecond)
				synctest.Wait()
				var sum float64
				for _, h := range hs {
					r, _ := h.at(time.Now())
					sum += r
				}
				if sum > worst {
					worst, worstAt = sum, time.Since(start)
				}
			}
		}
		join(a, "one", "10.0.0.1:5000")
		sample(2500 * time.Millisecond)
		join(b, "two", "10.0.0.2:5000")
		sample(20 * time.Second)
		joined := time.Since(start)
		join(a, "three", "10.0.0.3:5000")
		sample(30 * time.Second)
		var rates []float64
		for _, h := range hs {
			r, _ := h.at(time.Now())
			rates = append(rates, r)
		}
		t.Logf("the third joined at %v; the sum of assignments peaked at %.2f/s at %v; now %.2f/s", joined, worst, worstAt, rates)
		if worst > bound {
			t.Errorf("the assignments held add up to %.2f/s at %v, want at most %v/s (the limit %v/s and the reserve)", worst, worstAt, bound, limit)
		}
		for i, r := range rates {
			if r < 0.3*limit {
				t.Errorf("client %d holds %.2f/s 30 s after the join, want about a third of %v/s", i, r, limit)
			}
		}
		cancel()
		shutdown(t, a)
		shutdown(t, b)
		synctest.Wait()
	})
}

// A named Envoy that reconnects to the same replica while its old stream
// is still open (a connection gone half-open) keeps its record when the
// old stream ends at last: only a client's newest stream forgets its
// records, so the other Envoys do not take its share while it still
// holds it.
func TestAnOldStreamEndingKeepsItsReconnectedClientsRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &rlqs.MemoryStore{}
		s := newServer(t, st)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		worst := reconnectAndEndOldStream(ctx, s, s)
		n := records(t, st)
		t.Logf("after the old stream ended: %d records; the two Envoys held at most %.2f/s of 100/s", n, worst)
		if n != 2 || worst > 100 {
			t.Errorf("%d records and at most %.2f/s held after the old stream ended, want 2 and at most 100/s", n, worst)
		}
		cancel()
		shutdown(t, s)
		synctest.Wait()
	})
}

// A named Envoy that reconnects to another replica (sharing the store)
// while its old stream on the first is still open keeps its record when
// the old stream ends at last: the old stream's forget is conditional on
// the record being still the one it wrote, and the new stream has written
// it since. So the other Envoys never take its share while it still holds
// it. Before, the old stream's end removed the record until the new
// stream's next report, and the two held 150% of the limit meanwhile.
func TestAnOldStreamOnAnotherReplicaEndingKeepsTheRecord(t *testing.T) {
	t.Run("memory", func(t *testing.T) { oldStreamOnAnotherReplica(t, &rlqs.MemoryStore{}) })
	t.Run("redis", func(t *testing.T) { oldStreamOnAnotherReplica(t, newOutside(t, redisRLQS(t), 4)) })
}

// reconnectAndEndOldStream has two Envoys, x and y, report 100/s each to
// a; after 12 s x reconnects to b (a itself, or another replica sharing
// its store) while its old stream is still open, and a second later the
// old stream ends. It returns the most the two held together in the 5 s
// that follow, to x's next report on its new stream. It runs in a
// synctest bubble.
func reconnectAndEndOldStream(ctx context.Context, a, b *rlqs.Server) float64 {
	old, _ := client(ctx, a, "x", "10.0.0.1:5000")
	other, hy := client(ctx, a, "y", "10.0.0.2:5000")
	go reportEvery(ctx, other, 100)
	go reportEvery(ctx, old, 100)
	time.Sleep(12 * time.Second)
	synctest.Wait()
	again, hx := client(ctx, b, "x", "10.0.0.1:5001")
	go reportEvery(ctx, again, 100)
	time.Sleep(time.Second)
	synctest.Wait()
	_ = old.CloseSend()
	worst := 0.0
	for range 50 { // 5 s, to the reconnected client's next report
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		x, _ := hx.at(time.Now())
		y, _ := hy.at(time.Now())
		worst = max(worst, x+y)
	}
	return worst
}

func oldStreamOnAnotherReplica(t *testing.T, st rlqs.Store) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newServer(t, st), newServer(t, st)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		worst := reconnectAndEndOldStream(ctx, a, b)
		m, err := st.Demands(t.Context(), "edge|3:api=v1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("after the old stream on the other replica ended: %d records; the two Envoys held at most %.2f/s of 100/s", len(m), worst)
		if len(m) != 2 || worst > 105 {
			t.Errorf("%d records and at most %.2f/s held after the old stream ended, want 2 and at most 105/s (the limit and the reserve)", len(m), worst)
		}
		cancel()
		shutdown(t, a)
		shutdown(t, b)
		synctest.Wait()
	})
}
