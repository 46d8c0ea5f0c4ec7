package clientip_test

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/clientip"
)

// The fuzz targets take a RemoteAddr and a header value whose "\n"s
// separate field lines. The trusted set is fixed: 10.0.0.0/8 and
// 2001:db8:ffff::/48.

var fuzzTrusted = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}

func fuzzTrustedAddr(a netip.Addr) bool {
	for _, p := range fuzzTrusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

var fuzzSeeds = []struct{ peer, value string }{
	{"10.0.0.2:5000", "203.0.113.9, 198.51.100.7, 10.0.0.1"},
	{"192.0.2.1:5000", "203.0.113.9, 198.51.100.7, 10.0.0.1"},
	{"10.0.0.2:5000", "1.1.1.1, 2.2.2.2\n10.0.0.9"},
	{"10.0.0.2:5000", `for=192.0.2.43, for="[2001:db8:cafe::17]:4711"`},
	{"10.0.0.2:5000", "for=_hidden"},
	{"10.0.0.2:5000", "10.0.0.5, 10.0.0.1"},
	{"[::ffff:10.0.0.2]:1", "[2001:db8:cafe::17]:4711, 198.51.100.7:80"},
	{"10.0.0.2", ""},
	{"10.0.0.2:1", `for="192.0.2.60, for=198.51.100.17`},
}

// check runs r on the request and asserts what must hold for any input: no
// panic, an error only for a bad RemoteAddr, the peer when it is untrusted,
// and otherwise a valid, normalized address.
func check(t *testing.T, r *clientip.Resolver, req *http.Request) (got, peer netip.Addr, peerOK bool) {
	t.Helper()
	got, err := r.ClientIP(req)
	peer, perr := parsePeer(req.RemoteAddr)
	if err != nil {
		if perr {
			t.Fatalf("RemoteAddr %q parses, yet ClientIP failed: %v", req.RemoteAddr, err)
		}
		return got, peer, false
	}
	if !perr {
		t.Fatalf("RemoteAddr %q does not parse, yet ClientIP = %v", req.RemoteAddr, got)
	}
	if !got.IsValid() || got.Is4In6() || got.Zone() != "" {
		t.Fatalf("ClientIP = %#v, not a valid normalized address", got)
	}
	if !fuzzTrustedAddr(peer) && got != peer {
		t.Fatalf("untrusted peer %v, yet ClientIP = %v", peer, got)
	}
	if _, err := r.Key(req); err != nil {
		t.Fatalf("ClientIP succeeded but Key failed: %v", err)
	}
	return got, peer, true
}

// parsePeer parses a RemoteAddr the ways the package documents: host:port,
// a bare address, or a bracketed IPv6 address.
func parsePeer(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
}

// fuzzHeader fuzzes a Resolver that trusts fuzzTrusted and reads h, whose
// field name is name, on a RemoteAddr and a value of h; for each request
// that check passes with a trusted peer p, prop checks the answer got.
func fuzzHeader(f *testing.F, h clientip.Header, name string, prop func(t *testing.T, value string, lines []string, got, p netip.Addr)) {
	for _, s := range fuzzSeeds {
		f.Add(s.peer, s.value)
	}
	r := &clientip.Resolver{TrustedProxies: fuzzTrusted, Header: h}
	f.Fuzz(func(t *testing.T, peer, value string) {
		lines := strings.Split(value, "\n")
		req := &http.Request{RemoteAddr: peer, Header: http.Header{name: lines}}
		if got, p, ok := check(t, r, req); ok && fuzzTrustedAddr(p) {
			prop(t, value, lines, got, p)
		}
	})
}

func FuzzXForwardedFor(f *testing.F) {
	fuzzHeader(f, clientip.XForwardedFor, "X-Forwarded-For", func(t *testing.T, _ string, lines []string, got, p netip.Addr) {
		if want := referenceXFF(lines, p); got != want {
			t.Fatalf("peer %v, X-Forwarded-For %q: ClientIP = %v, reference says %v", p, lines, got, want)
		}
	})
}

// referenceXFF is the rule written the slow, obvious way: join the lines,
// split on commas, walk from the right.
func referenceXFF(lines []string, peer netip.Addr) netip.Addr {
	entries := strings.Split(strings.Join(lines, ","), ",")
	var leftmost netip.Addr
	for i := len(entries) - 1; i >= 0; i-- {
		e := strings.Trim(entries[i], " \t")
		if e == "" {
			continue
		}
		a, err := netip.ParseAddr(e)
		if err != nil {
			ap, err2 := netip.ParseAddrPort(e)
			a, err = ap.Addr(), err2
		}
		if err != nil && strings.HasPrefix(e, "[") && strings.HasSuffix(e, "]") {
			a, err = netip.ParseAddr(e[1 : len(e)-1])
			if err == nil && !a.Is6() {
				err = errBracketedIPv4
			}
		}
		if err != nil {
			return peer
		}
		a = a.Unmap().WithZone("")
		if !fuzzTrustedAddr(a) {
			return a
		}
		leftmost = a
	}
	if leftmost.IsValid() {
		return leftmost
	}
	return peer
}

type fuzzError string

func (e fuzzError) Error() string { return string(e) }

const errBracketedIPv4 = fuzzError("bracketed IPv4")

func FuzzForwarded(f *testing.F) {
	fuzzHeader(f, clientip.Forwarded, "Forwarded", func(t *testing.T, value string, lines []string, got, p netip.Addr) {
		// Anything but the peer must be an address written in the header.
		if got != p && !mentions(value, got) {
			t.Fatalf("Forwarded %q: ClientIP = %v, which the header does not contain", value, got)
		}
		// Without quoted strings the grammar is simple enough to check
		// against a reference.
		if !strings.ContainsAny(value, `"\`) {
			if want := referenceForwarded(lines, p); got != want {
				t.Fatalf("peer %v, Forwarded %q: ClientIP = %v, reference says %v", p, lines, got, want)
			}
		}
	})
}

// mentions reports whether the header value contains a written form of a,
// looking at every run of characters that can appear in an address, after
// removing backslashes (which may escape any character in a quoted string).
func mentions(value string, a netip.Addr) bool {
	value = strings.ReplaceAll(value, `\`, "")
	for _, f := range strings.FieldsFunc(value, func(c rune) bool { return !strings.ContainsRune("0123456789abcdefABCDEF.:", c) }) {
		for _, g := range []string{f, strings.TrimRight(f, ":")} {
			if b, err := netip.ParseAddr(g); err == nil && b.Unmap() == a {
				return true
			}
			// an IPv4 node with a port: "192.0.2.60:8080"
			if ap, err := netip.ParseAddrPort(g); err == nil && ap.Addr().Unmap() == a {
				return true
			}
		}
	}
	return false
}

// referenceForwarded implements the rule for values without quoted strings,
// where every value is a token, so a for= node is an IPv4 address or not an
// address at all.
func referenceForwarded(lines []string, peer netip.Addr) netip.Addr {
	var nodes []netip.Addr // the zero Addr for an element that names no address
	for _, line := range lines {
		for _, elem := range strings.Split(line, ",") {
			elem = strings.Trim(elem, " \t")
			if elem == "" {
				continue
			}
			nodes = append(nodes, referenceElement(elem))
		}
	}
	for i := len(nodes) - 1; i >= 0; i-- {
		switch {
		case !nodes[i].IsValid():
			return peer
		case !fuzzTrustedAddr(nodes[i]):
			return nodes[i]
		}
	}
	if len(nodes) > 0 {
		return nodes[0]
	}
	return peer
}

func referenceElement(elem string) netip.Addr {
	var node netip.Addr
	seen := map[string]bool{}
	for _, pair := range strings.Split(elem, ";") {
		pair = strings.Trim(pair, " \t")
		if pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		if !ok || !isToken(name) || !isToken(value) {
			return netip.Addr{}
		}
		name = strings.ToLower(name)
		if known := name == "for" || name == "by" || name == "host" || name == "proto"; known && seen[name] {
			return netip.Addr{}
		}
		seen[name] = true
		if name == "for" {
			if a, err := netip.ParseAddr(value); err == nil && a.Is4() {
				node = a
			} else {
				node = netip.Addr{}
			}
		}
	}
	return node
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
