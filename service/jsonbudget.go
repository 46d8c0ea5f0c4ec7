package service

import (
	"cmp"
	"fmt"
	"net/http"
	"net/netip"
	"sync"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/internal/bodyrate"
)

// DefaultJSONPeerShares is how many shares of Config.MaxJSONBytesInFlight
// the default Config.MaxJSONBytesPerPeer leaves to each peer: a sixteenth
// of the budget (8 MiB of the default 128 MiB), and never less than one
// body of the largest size.
const DefaultJSONPeerShares = 16

// jsonBudget counts the bytes of the POST /json bodies being read, all
// together (at most max) and per peer (at most perPeer each). A peer is
// the connection's remote address, an IPv6 one by its /64, since one
// subscriber commonly holds a whole /64: the address a client cannot
// choose, unlike a forwarding header. The table holds a row only for a
// peer that holds bytes now, so its rows are at most the bodies being
// read, themselves bounded by max bytes and the connection cap. Safe for
// concurrent use.
type jsonBudget struct {
	max, perPeer int64
	mu           sync.Mutex
	total        int64
	peers        map[netip.Addr]int64
}

// jsonPeer returns the unit of r's peer for the budget: its address
// (normalized as clientip does), an IPv6 address's /64 prefix, or the zero
// Addr for a peer without one (a Unix socket), all of which share one row.
func jsonPeer(r *http.Request) netip.Addr {
	a, err := clientip.Peer(r)
	if err != nil {
		return netip.Addr{}
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// take counts n more bytes for peer, or none and returns errJSONBusy when
// that would take everyone past the budget, errJSONPeerBusy when it would
// take the peer past its share: the reason is read under the lock that
// refused, in one acquisition.
func (b *jsonBudget) take(peer netip.Addr, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total+n > b.max {
		return errJSONBusy
	}
	held := b.peers[peer]
	if held+n > b.perPeer {
		return errJSONPeerBusy
	}
	b.total += n
	b.peers[peer] = held + n
	return nil
}

// give gives back n bytes peer held.
func (b *jsonBudget) give(peer netip.Addr, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total -= n
	if held := b.peers[peer] - n; held > 0 {
		b.peers[peer] = held
	} else {
		delete(b.peers, peer)
	}
}

// setJSONBounds sets the bounds of POST /json bodies from cfg, or says
// which is wrong.
func (s *Service) setJSONBounds(cfg Config) error {
	switch {
	case cfg.MaxJSONBytesInFlight < 0:
		return fmt.Errorf("service: Config.MaxJSONBytesInFlight %d is negative", cfg.MaxJSONBytesInFlight)
	case cfg.MaxJSONBytesPerPeer < 0:
		return fmt.Errorf("service: Config.MaxJSONBytesPerPeer %d is negative", cfg.MaxJSONBytesPerPeer)
	case cfg.JSONBodyTimeout < 0:
		return fmt.Errorf("service: Config.JSONBodyTimeout %v is negative", cfg.JSONBodyTimeout)
	}
	total := cmp.Or(cfg.MaxJSONBytesInFlight, DefaultMaxJSONBytesInFlight)
	perPeer := cfg.MaxJSONBytesPerPeer
	if perPeer == 0 {
		perPeer = min(total, max(total/DefaultJSONPeerShares, MaxJSONBody))
	}
	if perPeer > total {
		return fmt.Errorf("service: Config.MaxJSONBytesPerPeer %d is above MaxJSONBytesInFlight %d", perPeer, total)
	}
	s.jsonBytes = jsonBudget{max: total, perPeer: perPeer, peers: make(map[netip.Addr]int64)}
	s.jsonTimeout = cmp.Or(cfg.JSONBodyTimeout, DefaultJSONBodyTimeout)
	s.jsonMinRate = cmp.Or(cfg.JSONBodyMinRate, bodyrate.DefaultMinRate)
	return nil
}
