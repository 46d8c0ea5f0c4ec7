package clientip_test

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/clientip"
)

// request builds a request from peer with the given header lines; a nil
// slice means the header is absent.
func request(peer string, header string, lines ...string) *http.Request {
	req := &http.Request{RemoteAddr: peer, Header: http.Header{}}
	for _, l := range lines {
		req.Header.Add(header, l)
	}
	return req
}

func mustPrefixes(t testing.TB, cidrs ...string) []netip.Prefix {
	t.Helper()
	p, err := clientip.ParsePrefixes(cidrs...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// clientIP is r's ClientIP of req, as text; an error fails the test.
func clientIP(t *testing.T, r *clientip.Resolver, req *http.Request) string {
	t.Helper()
	got, err := r.ClientIP(req)
	if err != nil {
		t.Fatalf("ClientIP: %v", err)
	}
	return got.String()
}

// checkClientIP checks that r finds want in a request from peer carrying
// lines of r's header.
func checkClientIP(t *testing.T, r *clientip.Resolver, peer string, lines []string, want string) {
	t.Helper()
	h := r.Header.String()
	if got := clientIP(t, r, request(peer, h, lines...)); got != want {
		t.Errorf("peer %s, %s %q: ClientIP = %v, want %s", peer, h, lines, got, want)
	}
}

// headerCase is a named list of header lines and the client address a
// Resolver must find in them.
type headerCase struct {
	name  string
	lines []string
	want  string
}

// checkHeaderCases runs each case as a subtest of checkClientIP, in a
// request from peer.
func checkHeaderCases(t *testing.T, r *clientip.Resolver, peer string, cases []headerCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkClientIP(t, r, peer, c.lines, c.want) })
	}
}

// TestClientIPRightmostUntrustedOrPeer: the client is the rightmost
// untrusted address of the trusted peer's header lines (one list), the
// leftmost when all are trusted, and the peer itself when the peer is
// untrusted or the answer is not an address (the standards' cases
// F49-F54, trusted 10.0.0.0/8, and the variations around them).
func TestClientIPRightmostUntrustedOrPeer(t *testing.T) {
	xff := &clientip.Resolver{TrustedProxies: mustPrefixes(t, "10.0.0.0/8")}
	fwd := &clientip.Resolver{TrustedProxies: mustPrefixes(t, "10.0.0.0/8"), Header: clientip.Forwarded}
	tests := []struct {
		name  string
		r     *clientip.Resolver
		peer  string
		lines []string
		want  string
	}{
		// F49: the rightmost untrusted entry.
		{"rightmost untrusted", xff, "10.0.0.2:5000", []string{"203.0.113.9, 198.51.100.7, 10.0.0.1"}, "198.51.100.7"},
		// F50: an untrusted peer's header is ignored.
		{"untrusted peer's header ignored", xff, "192.0.2.1:5000", []string{"203.0.113.9, 198.51.100.7, 10.0.0.1"}, "192.0.2.1"},
		// F51: two field lines are one list.
		{"lines are one list", xff, "10.0.0.2:5000", []string{"1.1.1.1, 2.2.2.2", "10.0.0.9"}, "2.2.2.2"},
		// F52: Forwarded, quoted IPv6 with a port; case-insensitive names; unquoted IPv6 is invalid.
		{"forwarded quoted ipv6 with port", fwd, "10.0.0.2:5000", []string{`for=192.0.2.43, for="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17"},
		{"forwarded FOR", fwd, "10.0.0.2:5000", []string{`FOR=192.0.2.43`}, "192.0.2.43"},
		{"forwarded For", fwd, "10.0.0.2:5000", []string{`For="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17"},
		{"forwarded unquoted ipv6 refused", fwd, "10.0.0.2:5000", []string{`for=[2001:db8::1]`}, "10.0.0.2"},
		{"forwarded quoted unbracketed ipv6 refused", fwd, "10.0.0.2:5000", []string{`for="2001:db8::1"`}, "10.0.0.2"},
		// F53: not an address: the peer, never the text.
		{"obfuscated gives the peer", fwd, "10.0.0.2:5000", []string{`for=_hidden`}, "10.0.0.2"},
		{"unknown gives the peer", fwd, "10.0.0.2:5000", []string{`for=unknown`}, "10.0.0.2"},
		{"quoted unknown gives the peer", fwd, "10.0.0.2:5000", []string{`for="unknown:4711"`}, "10.0.0.2"},
		{"xff unknown gives the peer", xff, "10.0.0.2:5000", []string{`unknown`}, "10.0.0.2"},
		{"unknown behind trusted gives the peer", fwd, "10.0.0.2:5000", []string{`for=192.0.2.43, for=unknown, for=10.0.0.1`}, "10.0.0.2"},
		{"garbage left of answer", fwd, "10.0.0.2:5000", []string{`for=_hidden, for=192.0.2.43`}, "192.0.2.43"},
		// F54: every entry trusted: the leftmost.
		{"all trusted gives the leftmost", xff, "10.0.0.2:5000", []string{"10.0.0.5, 10.0.0.1"}, "10.0.0.5"},
		{"forwarded all trusted", fwd, "10.0.0.2:5000", []string{"for=10.0.0.5, for=10.0.0.1"}, "10.0.0.5"},
		{"all trusted over lines", xff, "10.0.0.2:5000", []string{"10.0.0.5", "10.0.0.1"}, "10.0.0.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkClientIP(t, tt.r, tt.peer, tt.lines, tt.want) })
	}
}

func TestXForwardedFor(t *testing.T) {
	r := &clientip.Resolver{TrustedProxies: mustPrefixes(t, "10.0.0.0/8", "2001:db8:ffff::/48")}
	checkHeaderCases(t, r, "10.0.0.2:443", []headerCase{
		{"absent", nil, "10.0.0.2"},
		{"one", []string{"203.0.113.9"}, "203.0.113.9"},
		{"no spaces", []string{"203.0.113.9,198.51.100.7,10.0.0.1"}, "198.51.100.7"},
		{"tabs and spaces", []string{" \t203.0.113.9 ,\t198.51.100.7 \t, 10.0.0.1 "}, "198.51.100.7"},
		{"three lines", []string{"203.0.113.9", "198.51.100.7", "10.0.0.1"}, "198.51.100.7"},
		{"trusted in every line", []string{"203.0.113.9, 10.1.1.1", "10.2.2.2", "10.0.0.1"}, "203.0.113.9"},
		{"ipv4 port", []string{"203.0.113.9:5678, 10.0.0.1:80"}, "203.0.113.9"},
		{"ipv6", []string{"2001:db8:cafe::17, 10.0.0.1"}, "2001:db8:cafe::17"},
		{"ipv6 bracketed", []string{"[2001:db8:cafe::17]"}, "2001:db8:cafe::17"},
		{"ipv6 port", []string{"[2001:db8:cafe::17]:4711"}, "2001:db8:cafe::17"},
		{"ipv6 trusted skipped", []string{"198.51.100.7, 2001:db8:ffff::1"}, "198.51.100.7"},
		{"ipv6 non-canonical", []string{"2001:DB8:CAFE:0:0:0:0:17"}, "2001:db8:cafe::17"},
		{"ipv4-mapped", []string{"::ffff:198.51.100.7"}, "198.51.100.7"},
		{"ipv4-mapped trusted", []string{"198.51.100.7, ::ffff:10.0.0.1"}, "198.51.100.7"},
		{"zone dropped", []string{"fe80::1%eth0"}, "fe80::1"},
		{"empty elements ignored", []string{", 198.51.100.7, , 10.0.0.1,"}, "198.51.100.7"},
		{"empty line ignored", []string{"198.51.100.7", ""}, "198.51.100.7"},
		{"all empty", []string{" , ,"}, "10.0.0.2"},
		{"garbage", []string{"not an address"}, "10.0.0.2"},
		{"garbage behind trusted", []string{"198.51.100.7, garbage, 10.0.0.1"}, "10.0.0.2"},
		{"garbage left of answer", []string{"garbage, 198.51.100.7, 10.0.0.1"}, "198.51.100.7"},
		{"obfuscated", []string{"_hidden"}, "10.0.0.2"},
		{"forwarded syntax", []string{"for=198.51.100.7"}, "10.0.0.2"},
		{"quoted", []string{`"198.51.100.7"`}, "10.0.0.2"},
		{"bracketed ipv4", []string{"[198.51.100.7]"}, "10.0.0.2"},
		{"unbracketed ipv6 port", []string{"2001:db8::1:80:"}, "10.0.0.2"},
		{"leading zero octet", []string{"198.051.100.7"}, "10.0.0.2"},
		{"port too large", []string{"198.51.100.7:99999"}, "10.0.0.2"},
		{"hostname", []string{"client.example.com"}, "10.0.0.2"},
	})
}

func TestForwarded(t *testing.T) {
	r := &clientip.Resolver{TrustedProxies: mustPrefixes(t, "10.0.0.0/8", "2001:db8:ffff::/48"), Header: clientip.Forwarded}
	checkHeaderCases(t, r, "10.0.0.2:443", []headerCase{
		{"absent", nil, "10.0.0.2"},
		{"rfc example pairs", []string{"for=192.0.2.60;proto=http;by=203.0.113.43"}, "192.0.2.60"},
		{"rfc example list", []string{"for=192.0.2.43, for=198.51.100.17"}, "198.51.100.17"},
		{"rfc transition", []string{`for=192.0.2.43, for="[2001:db8:cafe::17]"`}, "2001:db8:cafe::17"},
		{"for not first", []string{"proto=https;for=192.0.2.60"}, "192.0.2.60"},
		{"spaces around ;", []string{"for=192.0.2.60 ; proto=http"}, "192.0.2.60"},
		{"empty pairs", []string{";for=192.0.2.60;;proto=http;"}, "192.0.2.60"},
		{"quoted ipv4", []string{`for="192.0.2.60"`}, "192.0.2.60"},
		{"quoted ipv4 port", []string{`for="192.0.2.60:8080"`}, "192.0.2.60"},
		{"obfuscated port", []string{`for="[2001:db8::1]:_p1"`}, "2001:db8::1"},
		{"escaped quote", []string{`for="\[2001:db8::1\]:80"`}, "2001:db8::1"},
		{"comma inside quotes", []string{`for=192.0.2.60;ext="a,b", for=10.0.0.7`}, "192.0.2.60"},
		{"lines are one list", []string{"for=192.0.2.43", "for=198.51.100.17", "for=10.0.0.1"}, "198.51.100.17"},
		{"all trusted ipv6", []string{`for="[2001:db8:ffff::5]", for=10.0.0.1`}, "2001:db8:ffff::5"},
		{"ipv4-mapped", []string{`for="[::ffff:192.0.2.60]"`}, "192.0.2.60"},
		{"empty elements", []string{", for=192.0.2.60 ,, "}, "192.0.2.60"},
		{"no for", []string{"proto=https;by=10.0.0.1"}, "10.0.0.2"},
		{"only separators", []string{";"}, "10.0.0.2"},
		{"repeated for", []string{"for=192.0.2.60;for=192.0.2.61"}, "10.0.0.2"},
		{"repeated proto", []string{"for=192.0.2.60;proto=http;PROTO=https"}, "10.0.0.2"},
		{"bad port", []string{`for="192.0.2.60:123456"`}, "10.0.0.2"},
		{"empty port", []string{`for="192.0.2.60:"`}, "10.0.0.2"},
		{"bracketed ipv4", []string{`for="[192.0.2.60]"`}, "10.0.0.2"},
		{"zone", []string{`for="[fe80::1%eth0]"`}, "10.0.0.2"},
		{"missing bracket", []string{`for="[2001:db8::1"`}, "10.0.0.2"},
		{"unterminated quote", []string{`for="192.0.2.60`}, "10.0.0.2"},
		{"unterminated quote swallows the proxy's element", []string{`for="192.0.2.60, for=198.51.100.17`}, "10.0.0.2"},
		{"unterminated quote ends with its line", []string{`for="192.0.2.60`, "for=198.51.100.17"}, "198.51.100.17"},
		{"no value", []string{"for="}, "10.0.0.2"},
		{"no equals", []string{"for"}, "10.0.0.2"},
		{"space around =", []string{"for = 192.0.2.60"}, "10.0.0.2"},
		{"junk after value", []string{`for="192.0.2.60"x`}, "10.0.0.2"},
		{"control char in quotes", []string{"for=\"192.0.2.60\x01\""}, "10.0.0.2"},
		{"xff syntax", []string{"192.0.2.60"}, "10.0.0.2"},
		{"garbage left of answer", []string{`for="oops, for=_x, for=192.0.2.60"`, "for=198.51.100.17"}, "198.51.100.17"},
	})
}

// TestSpoofing: a client with no trusted proxy in front cannot change its
// key by writing forwarding headers, whichever the Resolver reads.
func TestSpoofing(t *testing.T) {
	for _, h := range []clientip.Header{clientip.XForwardedFor, clientip.Forwarded} {
		r := &clientip.Resolver{TrustedProxies: mustPrefixes(t, "10.0.0.0/8"), Header: h}
		base, err := r.Key(request("198.51.100.7:40000", "X-Forwarded-For"))
		if err != nil {
			t.Fatal(err)
		}
		for _, spoof := range []string{"1.2.3.4", "10.0.0.1", "1.2.3.4, 10.0.0.1", "for=1.2.3.4", "for=10.0.0.1", "unknown"} {
			req := request("198.51.100.7:40000", "X-Forwarded-For", spoof)
			req.Header.Add("Forwarded", spoof)
			req.Header.Add("X-Real-Ip", spoof)
			if got, err := r.Key(req); err != nil || got != base {
				t.Errorf("%v: spoofed %q: Key = %q, %v; want %q", h, spoof, got, err, base)
			}
		}
	}
	// Behind a trusted proxy, what the client wrote is to the left of what
	// the proxy appended, and is never reached.
	r := &clientip.Resolver{TrustedProxies: mustPrefixes(t, "10.0.0.0/8")}
	for _, spoof := range []string{"1.2.3.4", "10.0.0.9", "garbage", ""} {
		req := request("10.0.0.2:443", "X-Forwarded-For", spoof, "198.51.100.7")
		if got := clientIP(t, r, req); got != "198.51.100.7" {
			t.Errorf("client wrote %q behind a proxy: ClientIP = %v, want 198.51.100.7", spoof, got)
		}
	}
}

// TestHeaderChoice: a Resolver reads only its own header; reading
// X-Forwarded-For, a Forwarded naming another client gives the peer (see
// TestConflictingForwardingHeadersGiveThePeer).
func TestHeaderChoice(t *testing.T) {
	trusted := mustPrefixes(t, "10.0.0.0/8")
	req := request("10.0.0.2:443", "X-Forwarded-For", "198.51.100.7")
	req.Header.Add("Forwarded", "for=203.0.113.9")
	for h, want := range map[clientip.Header]string{clientip.XForwardedFor: "10.0.0.2", clientip.Forwarded: "203.0.113.9"} {
		r := &clientip.Resolver{TrustedProxies: trusted, Header: h}
		if got := clientIP(t, r, req); got != want {
			t.Errorf("Header %v: ClientIP = %v, want %s", h, got, want)
		}
	}
	// A Header value outside the constants reads nothing.
	r := &clientip.Resolver{TrustedProxies: trusted, Header: 7}
	if got := clientIP(t, r, req); got != "10.0.0.2" {
		t.Errorf("Header 7: ClientIP = %v, want the peer", got)
	}
	if err := r.Validate(); err == nil {
		t.Error("Validate accepted Header 7")
	}
}

func TestZeroAndNilResolver(t *testing.T) {
	req := request("10.0.0.2:443", "X-Forwarded-For", "198.51.100.7")
	var zero clientip.Resolver
	var nilr *clientip.Resolver
	for name, r := range map[string]*clientip.Resolver{"zero": &zero, "nil": nilr} {
		got, err := r.ClientIP(req)
		if err != nil || got.String() != "10.0.0.2" {
			t.Errorf("%s Resolver: ClientIP = %v, %v; want the peer 10.0.0.2", name, got, err)
		}
		if err := r.Validate(); err != nil {
			t.Errorf("%s Resolver: Validate = %v", name, err)
		}
		key, err := r.Key(request("[2001:db8:1:2:3:4:5:6]:443", ""))
		if err != nil || key != "2001:db8:1:2::/64" {
			t.Errorf("%s Resolver: Key = %q, %v; want 2001:db8:1:2::/64", name, key, err)
		}
	}
}

func TestRemoteAddr(t *testing.T) {
	r := &clientip.Resolver{TrustedProxies: mustPrefixes(t, "10.0.0.0/8", "2001:db8:ffff::/48")}
	tests := []struct {
		peer, xff, want string
	}{
		{"192.0.2.1:1234", "", "192.0.2.1"},
		{"192.0.2.1", "", "192.0.2.1"}, // no port, as some test servers set it
		{"2001:db8::1", "", "2001:db8::1"},
		{"[2001:db8::1]", "", "2001:db8::1"},
		{"[2001:db8::1]:443", "", "2001:db8::1"},
		{"[fe80::1%eth0]:443", "", "fe80::1"},
		{"[::ffff:192.0.2.1]:1234", "", "192.0.2.1"}, // dual-stack listener
		{"[::ffff:10.0.0.2]:1234", "198.51.100.7", "198.51.100.7"},
		{"::ffff:10.0.0.2", "198.51.100.7", "198.51.100.7"},
		{"10.0.0.2", "198.51.100.7", "198.51.100.7"},
		{"[2001:db8:ffff::2]:443", "198.51.100.7", "198.51.100.7"},
	}
	for _, tt := range tests {
		req := request(tt.peer, "X-Forwarded-For")
		if tt.xff != "" {
			req.Header.Set("X-Forwarded-For", tt.xff)
		}
		got, err := r.ClientIP(req)
		if err != nil || got.String() != tt.want {
			t.Errorf("RemoteAddr %q, XFF %q: ClientIP = %v, %v; want %s", tt.peer, tt.xff, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "pipe", "localhost:80", "[192.0.2.1]:80", "192.0.2.1:port", "@", "[2001:db8::1"} {
		req := request(bad, "X-Forwarded-For", "198.51.100.7")
		got, err := r.ClientIP(req)
		if !errors.Is(err, clientip.ErrRemoteAddr) || got.IsValid() {
			t.Errorf("RemoteAddr %q: ClientIP = %v, %v; want an error wrapping ErrRemoteAddr", bad, got, err)
		}
		if key, err := r.Key(req); err == nil || key != "" {
			t.Errorf("RemoteAddr %q: Key = %q, %v; want an error", bad, key, err)
		}
	}
}

func TestKey(t *testing.T) {
	trusted := mustPrefixes(t, "10.0.0.0/8")
	tests := []struct {
		prefix      int
		peer, xff   string
		want        string
		description string
	}{
		{0, "203.0.113.9:1", "", "203.0.113.9", "ipv4 as is"},
		{0, "[::ffff:203.0.113.9]:1", "", "203.0.113.9", "ipv4-mapped unmapped"},
		{0, "[2001:db8:cafe:1:2:3:4:5]:1", "", "2001:db8:cafe:1::/64", "default /64"},
		{0, "[fe80::1:2%eth0]:1", "", "fe80::/64", "zone dropped"},
		{48, "[2001:db8:cafe:1:2:3:4:5]:1", "", "2001:db8:cafe::/48", "/48"},
		{128, "[2001:db8:cafe:1:2:3:4:5]:1", "", "2001:db8:cafe:1:2:3:4:5", "/128 is the address"},
		{64, "10.0.0.2:1", "2001:db8:cafe::17", "2001:db8:cafe::/64", "from the header"},
		{64, "10.0.0.2:1", "2001:DB8:CAFE:0::17", "2001:db8:cafe::/64", "canonical text"},
	}
	for _, tt := range tests {
		r := &clientip.Resolver{TrustedProxies: trusted, IPv6Prefix: tt.prefix}
		req := request(tt.peer, "X-Forwarded-For")
		if tt.xff != "" {
			req.Header.Set("X-Forwarded-For", tt.xff)
		}
		got, err := r.Key(req)
		if err != nil || got != tt.want {
			t.Errorf("%s: IPv6Prefix %d, peer %s, XFF %q: Key = %q, %v; want %q", tt.description, tt.prefix, tt.peer, tt.xff, got, err, tt.want)
		}
	}
}

func TestKeyIPv6Grouping(t *testing.T) {
	var r clientip.Resolver
	key := func(peer string) string {
		t.Helper()
		k, err := r.Key(request(peer, ""))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a, b := key("[2001:db8:cafe:1::1]:1"), key("[2001:db8:cafe:1:ffff:ffff:ffff:ffff]:1")
	c := key("[2001:db8:cafe:2::1]:1")
	if a != b {
		t.Errorf("two addresses in one /64: keys %q and %q differ", a, b)
	}
	if a == c {
		t.Errorf("addresses in different /64s: both keyed %q", a)
	}
	r.IPv6Prefix = 128
	if a, b := key("[2001:db8:cafe:1::1]:1"), key("[2001:db8:cafe:1::2]:1"); a == b {
		t.Errorf("IPv6Prefix 128: two addresses both keyed %q", a)
	}
}

func TestKeyBadPrefix(t *testing.T) {
	for _, bits := range []int{-1, 129, 1000} {
		r := &clientip.Resolver{IPv6Prefix: bits}
		if _, err := r.Key(request("[2001:db8::1]:1", "")); err == nil || !strings.HasPrefix(err.Error(), "clientip: ") {
			t.Errorf("IPv6Prefix %d: Key error = %v, want a clientip error", bits, err)
		}
		if err := r.Validate(); err == nil {
			t.Errorf("IPv6Prefix %d: Validate accepted it", bits)
		}
		// IPv4 clients are unaffected.
		if k, err := r.Key(request("192.0.2.1:1", "")); err != nil || k != "192.0.2.1" {
			t.Errorf("IPv6Prefix %d, IPv4 client: Key = %q, %v", bits, k, err)
		}
	}
	var r clientip.Resolver
	if _, err := r.AddrKey(netip.Addr{}); err == nil {
		t.Error("AddrKey(zero Addr) succeeded")
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := clientip.ParsePrefixes("10.0.0.0/8", " 2001:db8::/32 ", "192.0.2.1", "2001:db8::1", "10.1.2.3/16", "::ffff:172.16.0.0/108", "::/0")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "2001:db8::/32", "192.0.2.1/32", "2001:db8::1/128", "10.1.0.0/16", "172.16.0.0/12", "::/0"}
	if len(got) != len(want) {
		t.Fatalf("ParsePrefixes = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("ParsePrefixes[%d] = %v, want %s", i, got[i], want[i])
		}
	}
	if p, err := clientip.ParsePrefixes(); p != nil || err != nil {
		t.Errorf("ParsePrefixes() = %v, %v; want nil, nil", p, err)
	}
	for _, bad := range []string{"", "10.0.0.0/33", "10.0.0/8", "example.com", "fe80::1%eth0", "10.0.0.0/", "2001:db8::/129", "10.0.0.0/8/8"} {
		_, err := clientip.ParsePrefixes("10.0.0.0/8", bad)
		if err == nil {
			t.Errorf("ParsePrefixes(%q) succeeded", bad)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "clientip: ") || !strings.Contains(msg, `"`+bad+`"`) {
			t.Errorf("ParsePrefixes(%q) error %q does not name the entry", bad, msg)
		}
	}
}

func TestParseHeader(t *testing.T) {
	for s, want := range map[string]clientip.Header{"X-Forwarded-For": clientip.XForwardedFor, "x-forwarded-for": clientip.XForwardedFor, "XFF": clientip.XForwardedFor, "forwarded": clientip.Forwarded, "Forwarded": clientip.Forwarded} {
		if got, err := clientip.ParseHeader(s); err != nil || got != want {
			t.Errorf("ParseHeader(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := clientip.ParseHeader("X-Real-IP"); err == nil {
		t.Error("ParseHeader(X-Real-IP) succeeded")
	}
	if got := clientip.Header(9).String(); got != "Header(9)" {
		t.Errorf("Header(9).String() = %q", got)
	}
}

func TestAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are measured in full runs")
	}
	xff := &clientip.Resolver{TrustedProxies: mustPrefixes(t, "10.0.0.0/8")}
	fwd := &clientip.Resolver{TrustedProxies: xff.TrustedProxies, Header: clientip.Forwarded}
	reqX := request("10.0.0.2:443", "X-Forwarded-For", "203.0.113.9, 198.51.100.7, 10.0.0.1")
	reqF := request("10.0.0.2:443", "Forwarded", `for=192.0.2.43, for="[2001:db8:cafe::17]:4711", for=10.0.0.1`)
	for name, f := range map[string]func(){
		"XForwardedFor": func() { xff.ClientIP(reqX) },
		"Forwarded":     func() { fwd.ClientIP(reqF) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: ClientIP allocates %v times per call, want 0", name, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { xff.Key(reqX) }); n > 1 {
		t.Errorf("Key allocates %v times per call, want at most 1", n)
	}
}
