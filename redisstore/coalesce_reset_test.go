package redisstore

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storetest"
)

// holdProxy forwards TCP connections to a Redis server. While it holds,
// what its clients send goes no further (as to a Redis that hangs); cut
// resets every connection, as a Redis restarting or a network failing
// mid-call does.
type holdProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	hold  bool
	held  int // bytes read from clients while holding
	conns []*net.TCPConn
}

// newHoldProxy starts a proxy to target, closed when the test ends.
func newHoldProxy(t *testing.T, target string) *holdProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{ln: ln, target: target}
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *holdProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c.(*net.TCPConn), s.(*net.TCPConn))
		p.mu.Unlock()
		go io.Copy(c, s)
		go p.forward(s, c)
	}
}

// forward copies from to to, except what it reads while the proxy holds,
// which it counts and never sends (the tests cut the connections after).
func (p *holdProxy) forward(to, from net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if err != nil {
			to.Close()
			return
		}
		p.mu.Lock()
		hold := p.hold
		if hold {
			p.held += n
		}
		p.mu.Unlock()
		if hold {
			continue
		}
		if _, err := to.Write(buf[:n]); err != nil {
			return
		}
	}
}

// setHold makes the proxy hold what its clients send, or forward it again.
func (p *holdProxy) setHold(hold bool) {
	p.mu.Lock()
	p.hold = hold
	p.mu.Unlock()
}

// waitHeld waits until more than n bytes are held.
func (p *holdProxy) waitHeld(t *testing.T, n int) {
	t.Helper()
	storetest.WaitFor(t, "the proxy to hold more than "+strconv.Itoa(n)+" bytes", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.held > n
	})
}

// cut resets every connection through the proxy and stops holding.
func (p *holdProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.SetLinger(0) // a reset, not an orderly close
		c.Close()
	}
	p.conns = nil
	p.hold = false
}

// A connection reset while a batch is with Redis ends each of its
// decisions (and the lone call before it on the same connection) without
// holding anyone: a decision whose call was reset fails and is not counted;
// none is counted twice; the lane is idle again (no call left counted as
// with Redis, no batch left open); and the decisions after it are made on
// a new connection, exactly.
func TestCoalescedBatchFailsAloneOnConnectionReset(t *testing.T) {
	srv := redistest.Single(t)
	p := newHoldProxy(t, srv.Addr)
	ctx := context.Background()
	prefix := "reset" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s, err := New(ctx, Config{URL: "redis://" + p.ln.Addr().String(), Prefix: prefix, CoalesceWait: time.Millisecond, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Hour}

	p.setHold(true)
	const n = 11 // k0 alone, k1 to k10 in a batch behind it
	var wg sync.WaitGroup
	admitted := make([]bool, n)
	decide := func(i int) {
		r, err := s.Allow(ctx, "k"+strconv.Itoa(i), lim)
		admitted[i] = err == nil && r.Allowed
	}
	wg.Go(func() { decide(0) })
	p.waitHeld(t, 0)
	for i := 1; i < n; i++ {
		wg.Go(func() { decide(i) })
	}
	waitLane(t, s, 2) // k0 and the batch are with Redis
	p.cut()
	wg.Wait()
	if admitted[0] {
		t.Error("k0, whose call was held then reset, was admitted")
	}
	waitLane(t, s, 0)
	for i := range n {
		r, err := s.Allow(ctx, "k"+strconv.Itoa(i), lim)
		if err != nil { // once more: a connection rueidis had not yet seen reset
			r, err = s.Allow(ctx, "k"+strconv.Itoa(i), lim)
		}
		want := 99
		if admitted[i] {
			want-- // its call went out on a new connection before the reset
		}
		if err != nil || !r.Allowed || r.Remaining != want {
			t.Errorf("k%d after the reset (admitted before: %v): %+v, %v; want admitted with %d left", i, admitted[i], r, err, want)
		}
	}
}

// waitLane waits until s's one lane has busy calls with Redis and, when
// busy is 0, no open batch.
func waitLane(t *testing.T, s *Store, busy int) {
	t.Helper()
	storetest.WaitFor(t, "the lane to have "+strconv.Itoa(busy)+" calls with Redis", func() bool {
		s.batches.mu.Lock()
		defer s.batches.mu.Unlock()
		got, open := 0, false
		for _, l := range s.batches.lanes {
			got, open = got+l.busy, open || l.open != nil
		}
		return got == busy && (busy > 0 || !open)
	})
}

// Close does not wait on a Redis that hangs for the connection's reply
// timeout (here 30 s) to fail a batch nobody waits for any more (its
// callers gave up, as they do at their deadlines behind the failure
// policy): it gives up on the batch after closeWait, and the client's
// Close, which ends a silent connection after a second, does the rest.
func TestCoalescedCloseDoesNotWaitOnAHungRedis(t *testing.T) {
	srv := redistest.Single(t)
	p := newHoldProxy(t, srv.Addr)
	prefix := "hung" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s, err := New(context.Background(), Config{URL: "redis://" + p.ln.Addr().String(), Prefix: prefix, CoalesceWait: time.Millisecond, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Hour}
	p.setHold(true)
	var wg sync.WaitGroup
	decide := func(ctx context.Context, i int) {
		wg.Go(func() {
			if _, err := s.Allow(ctx, "k"+strconv.Itoa(i), lim); err == nil {
				t.Errorf("k%d: a decision on a hung Redis succeeded", i)
			}
		})
	}
	// k0 goes alone, with a deadline past the bound on Close (its end
	// breaks the connection, which would end the batch too); k1 to k10,
	// in a batch behind it, give up.
	long, cancelLong := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelLong()
	decide(long, 0)
	p.waitHeld(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	for i := 1; i <= 10; i++ {
		decide(ctx, i)
	}
	waitLane(t, s, 2) // k0 and the batch are with Redis
	cancel()

	start := time.Now()
	s.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v on a hung Redis, want a few seconds at most", d)
	}
	p.cut() // k0 ends, if the client's Close has not ended it
	wg.Wait()
}
