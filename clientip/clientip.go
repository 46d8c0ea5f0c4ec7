// Package clientip answers "who is this client?" for an HTTP request, in a
// form a rate limiter can key on, without letting the client choose the
// answer.
//
// # Trust model
//
// The only address nobody can forge is the TCP peer, r.RemoteAddr. Behind a
// load balancer or reverse proxy, however, the peer is the proxy, and the
// client's address travels in a forwarding header that each proxy extends:
// X-Forwarded-For (a comma-separated list) or RFC 7239 Forwarded (a list of
// elements whose for= parameter names the node). Anyone can send such a
// header, so a Resolver believes it only as far as it was written by proxies
// it trusts:
//
//   - If the peer is not inside TrustedProxies, the headers are ignored and
//     the client is the peer. A client talking to the server directly cannot
//     change its address by writing X-Forwarded-For. Resolver.TrustsPeer is
//     this decision alone, for code that passes the headers on (a proxy's
//     X-Forwarded-For to its upstream), so that it trusts exactly whom the
//     keys trust.
//   - If the peer is trusted, the chosen header's entries (all its field
//     lines, in order, as one list) are read from right to left. Entries
//     inside TrustedProxies are skipped, since a trusted proxy appended
//     them; the first entry that is not trusted is the client. This is the
//     "rightmost untrusted" rule of nginx's real_ip_recursive. Whatever a
//     client wrote to the left of its own address is never looked at.
//
// # Choices
//
// An entry that is not an IP address (for=unknown, an obfuscated identifier
// such as for=_hidden, an unquoted or unbracketed IPv6 address in
// Forwarded, an element without for=, any other garbage) ends the scan where
// it stands: a trusted proxy has told us that it does not know, or will not
// say, who its client was. The Resolver then falls back to the peer. It
// never keys on the text "unknown", never returns an error for it and never
// skips over it to believe an entry further left (which the client may have
// written). (nginx instead keeps the last address it had adopted; the peer
// is the more conservative choice, since the limiter then keys on something
// the server saw itself.) Garbage to the left of the answer does not matter,
// so a client cannot force the fallback by sending junk, with one
// exception: in Forwarded, a quoted string the client leaves unterminated
// runs to the end of its field line, so behind a proxy that appends its
// element to the client's line (rather than adding a line of its own) such
// a request falls back to the peer. It then shares the peer's key with
// every other request that does, which limits it rather than freeing it.
//
// When every entry is trusted (say the peer is 10.0.0.2 and the header
// reads "10.0.0.5, 10.0.0.1" with 10.0.0.0/8 trusted), the request came
// from inside the trusted network, and the client is the leftmost entry,
// 10.0.0.5: it was reported by a trusted proxy, and it is the farthest hop
// anyone trustworthy vouches for. This is also what nginx's recursive walk
// arrives at. Keying on the peer instead would put every internal caller
// behind a proxy into one bucket.
//
// Empty list elements (", ,") are ignored, as RFC 9110 section 5.6.1 asks
// of list-based fields. X-Forwarded-For entries may carry a port
// ("192.0.2.7:4711", "[2001:db8::1]:80") or bracket a bare IPv6 address
// ("[2001:db8::1]"); the port is dropped. Forwarded is parsed to the letter
// of RFC 7239: case-insensitive parameter names, token or quoted-string
// values with backslash escapes, IPv6 nodes quoted and bracketed, a
// parameter at most once per element (spaces around ";" are tolerated); an
// element
// that breaks the grammar counts as garbage in its place in the list, and
// an unterminated quoted string swallows the rest of its field line.
//
// A Resolver reads one header, X-Forwarded-For by default or Forwarded,
// never "whichever is present": a proxy maintains one of them and passes
// the other through as the client sent it, so that would let the client
// choose the answer. One check crosses them: reading X-Forwarded-For, a
// trusted peer's request that also carries a Forwarded header naming
// another client is answered with the peer. Behind a trusted proxy that
// maintains only Forwarded (the Resolver left at its default by mistake),
// a client's own X-Forwarded-For would otherwise choose its key; now
// it lands in the allowance of the proxy's address, shared with every
// other such request. Set Header to Forwarded behind such a proxy.
//
// Addresses come out normalized: an IPv4-mapped IPv6 address (as a
// dual-stack listener reports IPv4 peers) becomes IPv4, and IPv6 zones are
// dropped. Key then groups IPv6 clients by prefix, /64 by default, because
// one subscriber commonly holds a whole /64 and could otherwise take a new
// address, and a fresh allowance, for every request.
package clientip

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Header selects the forwarding header a Resolver reads from a trusted
// peer. The zero value is XForwardedFor.
type Header uint8

const (
	// XForwardedFor reads the de facto X-Forwarded-For header: a
	// comma-separated list of addresses, the client first and each proxy's
	// peer appended on the right.
	XForwardedFor Header = iota
	// Forwarded reads the RFC 7239 Forwarded header: the for= parameter of
	// each forwarded-element, in the same order.
	Forwarded
)

// String returns the header's field name: "X-Forwarded-For" or
// "Forwarded".
func (h Header) String() string {
	switch h {
	case XForwardedFor:
		return "X-Forwarded-For"
	case Forwarded:
		return "Forwarded"
	}
	return fmt.Sprintf("Header(%d)", uint8(h))
}

// ParseHeader returns the Header named by s, the field name in any case
// ("X-Forwarded-For", "forwarded"); "xff" is accepted as a shorthand, for
// configuration files.
func ParseHeader(s string) (Header, error) {
	switch {
	case strings.EqualFold(s, "X-Forwarded-For"), strings.EqualFold(s, "xff"):
		return XForwardedFor, nil
	case strings.EqualFold(s, "Forwarded"):
		return Forwarded, nil
	}
	return 0, fmt.Errorf("clientip: unknown forwarding header %q (want X-Forwarded-For or Forwarded)", s)
}

// ErrRemoteAddr is wrapped by the error that ClientIP and Key return when a
// request's RemoteAddr is not an address, with or without a port.
var ErrRemoteAddr = errors.New("clientip: unparseable RemoteAddr")

// DefaultIPv6Prefix is the prefix length by which Key groups IPv6 clients
// when Resolver.IPv6Prefix is zero.
const DefaultIPv6Prefix = 64

// Resolver finds a request's client address. The zero Resolver, like a nil
// *Resolver, trusts no proxy: the client is the peer (r.RemoteAddr).
//
// A Resolver is safe for concurrent use as long as its fields are not
// changed. ClientIP does not allocate (save to unescape a Forwarded value
// written with backslashes), so it can sit on the hot path of every
// request; Key allocates only its result.
type Resolver struct {
	// TrustedProxies are the networks whose forwarding headers are
	// believed: the immediate peer must be inside one of them for any header
	// to be read, and entries inside them are skipped when looking for the
	// client. Empty: none, and the client is always the peer. ParsePrefixes
	// builds the list from text. IPv4 prefixes match IPv4-mapped IPv6
	// addresses too, since addresses are unmapped before they are checked.
	TrustedProxies []netip.Prefix

	// Header selects the forwarding header read from a trusted peer:
	// XForwardedFor (the zero value) or Forwarded. Only one is ever read;
	// see the package documentation for why.
	Header Header

	// IPv6Prefix is the prefix length by which Key groups IPv6 clients:
	// zero means DefaultIPv6Prefix (64), 128 means no grouping, and values
	// outside 0..128 make Key fail. It does not affect ClientIP.
	IPv6Prefix int
}

// ParsePrefixes parses trusted proxy networks, such as "10.0.0.0/8" and
// "2001:db8::/32". A single address means just that address ("192.0.2.1"
// is 192.0.2.1/32, "2001:db8::1" is 2001:db8::1/128). Surrounding spaces are
// ignored, host bits are cleared ("10.1.2.3/8" is 10.0.0.0/8), and an
// IPv4-mapped IPv6 prefix of /96 or longer becomes the IPv4 prefix it
// covers. The error names the first entry that is not an address or prefix.
func ParsePrefixes(cidrs ...string) ([]netip.Prefix, error) {
	if len(cidrs) == 0 {
		return nil, nil
	}
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, s := range cidrs {
		p, err := parsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("clientip: bad trusted proxy %q: %w", s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.IndexByte(s, '/') >= 0 {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, err
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a.Zone() != "" {
			return netip.Prefix{}, errors.New("an address with a zone cannot be a trusted proxy")
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// Validate reports whether r's fields make sense: a known Header, an
// IPv6Prefix within 0..128 and valid TrustedProxies. It is meant for
// configuration time; ClientIP never fails on these, and Key fails only on
// IPv6Prefix.
func (r *Resolver) Validate() error {
	if r == nil {
		return nil
	}
	if r.Header != XForwardedFor && r.Header != Forwarded {
		return fmt.Errorf("clientip: unknown forwarding header %v", r.Header)
	}
	if _, err := r.ipv6Bits(); err != nil {
		return err
	}
	for i, p := range r.TrustedProxies {
		if !p.IsValid() {
			return fmt.Errorf("clientip: TrustedProxies[%d] is not a valid prefix", i)
		}
	}
	return nil
}

// ClientIP returns the address of req's client under the trust model of the
// package documentation: the peer, or, when the peer is a trusted proxy, the
// rightmost untrusted address of the forwarding header. The address is
// unmapped (IPv4-mapped IPv6 becomes IPv4) and has no zone.
//
// A malformed forwarding header is never an error: the answer is then the
// peer. The only error, wrapping ErrRemoteAddr, is for a RemoteAddr that is
// neither "host:port" nor a bare address, which the standard server never
// produces. req must not be nil.
func (r *Resolver) ClientIP(req *http.Request) (netip.Addr, error) {
	peer, err := Peer(req)
	if err != nil {
		return netip.Addr{}, err
	}
	if !r.trustsAddr(peer) {
		return peer, nil
	}
	var (
		client netip.Addr
		ok     bool
	)
	switch r.Header {
	case XForwardedFor:
		client, ok = r.fromXForwardedFor(req.Header.Values("X-Forwarded-For"))
		if ok && r.forwardedDisagrees(req, client) {
			return peer, nil
		}
	case Forwarded:
		client, ok = r.fromForwarded(req.Header.Values("Forwarded"))
	}
	if !ok {
		return peer, nil
	}
	return client, nil
}

// forwardedDisagrees reports whether req, from a trusted peer, also
// carries a Forwarded header naming another client than client, the one
// X-Forwarded-For names. A trusted proxy appends the client it saw to the
// header it maintains and passes the other through as the client wrote
// it; when that proxy maintains only Forwarded, an X-Forwarded-For read
// by default would be the client's own choice, so a disagreement is
// answered with the peer instead. (Reading Forwarded, a Resolver never
// looks at X-Forwarded-For: a proxy that maintains Forwarded but lets a
// client's X-Forwarded-For through cannot choose the answer either way.)
func (r *Resolver) forwardedDisagrees(req *http.Request, client netip.Addr) bool {
	fwd := req.Header["Forwarded"] // canonical already: no canonicalizing lookup per request
	if len(fwd) == 0 {
		return false
	}
	other, ok := r.fromForwarded(fwd)
	return ok && other != client
}

// Key returns a rate limit key for req's client: the canonical text of
// ClientIP's address, with IPv6 addresses masked to IPv6Prefix and written
// as a prefix. Examples: "203.0.113.9", "2001:db8:cafe::/64", and with
// IPv6Prefix 128, "2001:db8:cafe::17". Two IPv6 addresses in one /64 get the
// same key by default.
//
// Key fails when ClientIP does or when IPv6Prefix is outside 0..128.
func (r *Resolver) Key(req *http.Request) (string, error) {
	a, err := r.ClientIP(req)
	if err != nil {
		return "", err
	}
	return r.AddrKey(a)
}

// AddrKey returns the rate limit key Key would return for a client at a,
// for callers that learn the address some other way (a gRPC peer, a
// trusted header of their own). a is unmapped and its zone dropped first;
// the zero Addr is an error.
func (r *Resolver) AddrKey(a netip.Addr) (string, error) {
	if !a.IsValid() {
		return "", errors.New("clientip: no address to make a key of")
	}
	a = normalize(a)
	if a.Is4() {
		return a.String(), nil
	}
	bits, err := r.ipv6Bits()
	if err != nil {
		return "", err
	}
	var buf [64]byte
	if bits == 128 {
		return string(a.AppendTo(buf[:0])), nil
	}
	p, err := a.Prefix(bits)
	if err != nil { // unreachable: bits is within 0..128
		return "", fmt.Errorf("clientip: %w", err)
	}
	return string(p.AppendTo(buf[:0])), nil
}

func (r *Resolver) ipv6Bits() (int, error) {
	if r == nil || r.IPv6Prefix == 0 {
		return DefaultIPv6Prefix, nil
	}
	if r.IPv6Prefix < 0 || r.IPv6Prefix > 128 {
		return 0, fmt.Errorf("clientip: IPv6Prefix %d is outside 0..128 (0 means %d)", r.IPv6Prefix, DefaultIPv6Prefix)
	}
	return r.IPv6Prefix, nil
}

// TrustsPeer reports whether req's peer, r.RemoteAddr, is one of the
// TrustedProxies, so that the forwarding headers it sends are believed.
// It is the one decision about trust: ClientIP and Key make it, and so
// must anything that passes those headers on (a proxy's X-Forwarded-For or
// Forwarded to its upstream), or the two would disagree. The peer is
// unmapped and its zone dropped first, as everywhere in this package, so
// "[fe80::1%eth0]:4711" is inside fe80::/10. A nil or zero Resolver trusts
// no peer, and a RemoteAddr that is not an address is not trusted.
func (r *Resolver) TrustsPeer(req *http.Request) bool {
	if r == nil || len(r.TrustedProxies) == 0 {
		return false // before parsing RemoteAddr: nothing to trust
	}
	peer, err := Peer(req)
	return err == nil && r.trustsAddr(peer)
}

// Peer returns req's TCP peer, r.RemoteAddr ("host:port" or a bare
// address), unmapped and without zone: the client when no proxy is
// trusted. The error wraps ErrRemoteAddr.
func Peer(req *http.Request) (netip.Addr, error) { return parseRemoteAddr(req.RemoteAddr) }

// trustsAddr reports whether r trusts the normalized peer address a.
func (r *Resolver) trustsAddr(a netip.Addr) bool {
	return r != nil && len(r.TrustedProxies) > 0 && r.trusted(a)
}

// trusted reports whether the normalized address a is inside a trusted
// network.
func (r *Resolver) trusted(a netip.Addr) bool {
	for _, p := range r.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// normalize unmaps an IPv4-mapped IPv6 address and drops any zone, so that
// one client has one form (and netip.Prefix.Contains, which never matches a
// zoned address, works).
func normalize(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}

// parseRemoteAddr parses http.Request.RemoteAddr: "host:port" as the
// standard server sets it, or a bare address, bracketed or not, as some
// test servers and transports set it.
func parseRemoteAddr(s string) (netip.Addr, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil { // the usual form, tried first
		return normalize(ap.Addr()), nil
	}
	if a, ok := parseAddr(s); ok {
		return a, nil
	}
	return netip.Addr{}, fmt.Errorf("%w %q", ErrRemoteAddr, s)
}
