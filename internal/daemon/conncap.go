package daemon

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// CapConns caps the open connections of ln at n (0: defaultMaxConns,
// negative: no cap) and returns the listener and the http.Server
// ConnState hook that tells it which connections are idle. It is the one
// connection cap of every listener: sluice proxy's -max-conns, sluice
// serve's -http-max-conns and -grpc-max-conns, both commands'
// -admin-max-conns and the debug listener's.
//
// At the cap, a new connection does not wait for a connection to close by
// itself, which an idle keep-alive connection does only after the
// keep-alive timeout: the connection idle the longest is closed and the new
// one takes its place, as NGINX reuses idle keep-alive connections when
// its worker_connections run out. So clients that open connections and
// leave them idle cannot hold the proxy, and when every connection is busy
// (a request being read, served or answered) the new one waits, accepted
// but unread, until one closes. At most one connection beyond n is open,
// the one waiting. A server that never calls the hook (gRPC's, whose
// connections without calls its idle timeout closes) has no idle
// connections to give way: a new connection waits for one to close.
func CapConns(ln net.Listener, n int) (net.Listener, func(net.Conn, http.ConnState)) {
	if n == 0 {
		n = defaultMaxConns()
	}
	if n < 0 {
		return ln, nil
	}
	l := &drainListener{Listener: ln, places: make(chan struct{}, n), idle: map[*drainConn]time.Time{}, idled: make(chan struct{}, 1), done: make(chan struct{})}
	return l, l.connState
}

// drainListener is CapConns's listener.
type drainListener struct {
	net.Listener
	places chan struct{} // one token per open connection

	mu   sync.Mutex
	idle map[*drainConn]time.Time // idle since

	idled chan struct{} // a connection went idle (one buffered signal)

	closeOnce sync.Once
	done      chan struct{}
}

// Accept waits for a connection and for a place for it: a free one, or
// the place of an idle connection it closes; after Close it returns
// net.ErrClosed.
func (l *drainListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case l.places <- struct{}{}:
			return &drainConn{Conn: c, l: l}, nil
		default:
		}
		if l.closeIdlest() {
			continue // its place is free, unless another took it
		}
		select {
		case l.places <- struct{}{}:
			return &drainConn{Conn: c, l: l}, nil
		case <-l.idled: // a busy connection went idle: take its place
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

// Close stops Accept and closes the listener.
func (l *drainListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// closeIdlest closes the connection idle the longest, and reports whether
// there was one.
func (l *drainListener) closeIdlest() bool {
	l.mu.Lock()
	var (
		oldest *drainConn
		since  time.Time
	)
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	if oldest != nil {
		delete(l.idle, oldest)
	}
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.Close()
	return true
}

// connState is the http.Server's ConnState hook: it keeps the set of idle
// connections (between keep-alive requests, or an HTTP/2 connection with no
// stream). A TLS listener over the capped one hands it its *tls.Conn,
// which it unwraps.
func (l *drainListener) connState(c net.Conn, s http.ConnState) {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn() // a *tls.Conn over the listener's connection
	}
	dc, ok := c.(*drainConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == http.StateIdle && !dc.closed {
		l.idle[dc] = time.Now()
		select {
		case l.idled <- struct{}{}:
		default:
		}
	} else {
		delete(l.idle, dc)
	}
}

// drainConn is a connection of a drainListener: closing it frees its place.
type drainConn struct {
	net.Conn
	l      *drainListener
	once   sync.Once
	closed bool // under l.mu
}

// Close closes the connection and frees its place (once).
func (c *drainConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.closed = true
		delete(c.l.idle, c)
		c.l.mu.Unlock()
		<-c.l.places
	})
	return err
}

// defaultMaxConns is a listener's default connection cap: 40% of the
// process's open-file limit (so that the two listeners together leave a
// fifth of it for everything else), at least 16; -1 (no cap) when the
// limit is not known.
func defaultMaxConns() int {
	n := openFileLimit()
	if n <= 0 {
		return -1
	}
	return int(max(n*2/5, 16))
}

// defaultAdminMaxConns is the admin listener's default connection cap: a
// twentieth of the process's open-file limit, 16 to 256 (256 when the
// limit is not known). The admin listener is for operators, their tools,
// Prometheus and probes, not for traffic; its share is small, so that
// with the public listeners' shares (defaultMaxConns) a tenth or more of
// the descriptors is left for the store, the upstreams and the files.
func defaultAdminMaxConns() int {
	n := openFileLimit()
	if n <= 0 {
		return 256
	}
	return int(min(max(n/20, 16), 256))
}
