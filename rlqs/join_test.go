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
