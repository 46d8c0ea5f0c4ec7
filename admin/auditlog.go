package admin

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	strclip "github.com/sluicehq/sluice/internal/clip"
)

// MaxLogField is the most bytes of a client-supplied value (the path, the
// query, a certificate's subject, an error naming a field of the body) an
// audit line holds in one field; a longer value is cut (see clip).
const MaxLogField = 256

// clip returns s cut to at most n bytes on a rune boundary, with a marker
// that says how long s was: "…(+N bytes)". Every client-supplied field of
// an audit line goes through it, so that a line's size is bounded whatever
// the request.
func clip(s string, n int) string {
	head, cut := strclip.Cut(s, n)
	if !cut {
		return s
	}
	return head + "…(+" + strconv.Itoa(len(s)-len(head)) + " bytes)"
}

// Bounds of the audit log of refused authentication (see auditGate).
const (
	// auditWindow is the window the budgets below count in.
	auditWindow = 10 * time.Second
	// auditPerPeer is the lines of refused calls one peer gets per window.
	auditPerPeer = 5
	// auditPerWindow is the lines of refused calls all peers get per
	// window together.
	auditPerWindow = 50
	// auditPeers bounds the peers tracked; past it the one seen least
	// recently is forgotten (its count goes to the others').
	auditPeers = 256
)

// auditGate rate-limits the audit lines of calls refused for their
// credentials (401, 403 before any operation), which anyone who reaches
// the listener can send: auditPerPeer lines per peer and auditPerWindow in
// all per auditWindow. Lines not written are counted, and the count is
// written (a summary line) with the peer's next line that is; the count of
// forgotten peers, once per window. Its memory is bounded by auditPeers.
// Calls that authenticate are always audited.
type auditGate struct {
	mu          sync.Mutex
	peers       map[netip.Prefix]*peerAudit
	start       time.Time // of the window of all peers
	lines       int       // written in that window
	others      int       // suppressed lines of forgotten peers
	othersSince time.Time
}

// peerAudit is one peer's budget.
type peerAudit struct {
	start, last time.Time // of its window; its latest call
	lines       int       // written in its window
	suppressed  int       // not written since suppressedSince
	since       time.Time
}

// suppressed is a count of audit lines not written, for a summary line.
type suppressed struct {
	peer  string
	n     int
	since time.Time
}

// peerOf is the peer a call is counted under: its IP address (an IPv6
// address's /64, which one host commonly holds whole).
func peerOf(remoteAddr string) netip.Prefix {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// allow reports whether a refused call of the peer at remoteAddr is
// written at now, and returns the counts of lines not written that are
// due (at most two: the peer's, the forgotten peers').
func (g *auditGate) allow(remoteAddr string, now time.Time) (bool, []suppressed) {
	peer := peerOf(remoteAddr)
	g.mu.Lock()
	defer g.mu.Unlock()
	var due []suppressed
	if now.Sub(g.start) >= auditWindow {
		if g.others > 0 {
			due = append(due, suppressed{"(forgotten peers)", g.others, g.othersSince})
			g.others = 0
		}
		g.start, g.lines = now, 0
	}
	if g.peers == nil {
		g.peers = make(map[netip.Prefix]*peerAudit)
	}
	e := g.peers[peer]
	if e == nil {
		if len(g.peers) >= auditPeers {
			g.forgetOldest()
		}
		e = &peerAudit{start: now}
		g.peers[peer] = e
	}
	e.last = now
	if now.Sub(e.start) >= auditWindow {
		e.start, e.lines = now, 0
	}
	if e.lines >= auditPerPeer || g.lines >= auditPerWindow {
		if e.suppressed == 0 {
			e.since = now
		}
		e.suppressed++
		return false, due
	}
	e.lines++
	g.lines++
	if e.suppressed > 0 {
		due = append(due, suppressed{peer.String(), e.suppressed, e.since})
		e.suppressed = 0
	}
	return true, due
}

// forgetOldest forgets the peer seen least recently; its count of lines
// not written goes to the others'.
func (g *auditGate) forgetOldest() {
	var (
		oldest netip.Prefix
		at     *peerAudit
	)
	for p, e := range g.peers {
		if at == nil || e.last.Before(at.last) {
			oldest, at = p, e
		}
	}
	if at == nil {
		return
	}
	if at.suppressed > 0 {
		if g.others == 0 {
			g.othersSince = at.since
		}
		g.others += at.suppressed
	}
	delete(g.peers, oldest)
}
