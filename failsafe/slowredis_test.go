package failsafe_test

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/redisstore"
)

// openRedis returns a Redis store on the redis-server at addr (itself, or
// a slowProxy in front of it), closed when the test ends.
func openRedis(t testing.TB, addr string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(context.Background(), redisstore.Config{URL: "redis://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// slowProxy is a TCP proxy in front of a Redis that delays its replies on
// purpose: each chunk Redis sends is passed on delay after it arrived, and
// not before holdUntil (an outage: the replies wait until it ends). The
// commands go through at once, so Redis applies them: a decision whose
// reply comes too late was still made by the store.
type slowProxy struct {
	ln        net.Listener
	target    string
	delay     atomic.Int64 // ns
	holdUntil atomic.Int64 // Unix ns
	wg        sync.WaitGroup
	done      chan struct{} // closed by close: held replies go at once
	mu        sync.Mutex
	conns     []net.Conn
}

func newSlowProxy(t testing.TB, target string) *slowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln, target: target, done: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address, for a redis:// URL.
func (p *slowProxy) Addr() string { return p.ln.Addr().String() }

// SetDelay delays every reply chunk by d from now on.
func (p *slowProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Hold holds every reply until t.
func (p *slowProxy) Hold(t time.Time) { p.holdUntil.Store(t.UnixNano()) }

func (p *slowProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false // closed
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *slowProxy) accept() {
	p.mu.Lock()
	p.conns = []net.Conn{}
	p.mu.Unlock()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		r, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c) || !p.track(r) {
			c.Close()
			r.Close()
			return
		}
		p.wg.Go(func() { io.Copy(r, c); r.Close() })
		p.wg.Go(func() { p.replies(c, r) })
	}
}

type chunk struct {
	b  []byte
	at time.Time
}

// replies passes r's bytes on to c, each chunk when its time comes.
func (p *slowProxy) replies(c, r net.Conn) {
	q := make(chan chunk, 1024)
	p.wg.Go(func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := r.Read(buf)
			if n > 0 {
				at := time.Now().Add(time.Duration(p.delay.Load()))
				if h := time.Unix(0, p.holdUntil.Load()); h.After(at) {
					at = h
				}
				q <- chunk{buf[:n], at}
			}
			if err != nil {
				return
			}
		}
	})
	for ch := range q {
		if d := time.Until(ch.at); d > 0 { // the slowness is the point: a store slowed on purpose
			tm := time.NewTimer(d)
			select {
			case <-tm.C:
			case <-p.done:
				tm.Stop()
			}
		}
		if _, err := c.Write(ch.b); err != nil {
			break
		}
	}
	c.Close()
	for range q {
	}
}

func (p *slowProxy) close() {
	close(p.done)
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
