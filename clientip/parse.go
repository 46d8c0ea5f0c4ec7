package clientip

import (
	"net/netip"
	"strings"
)

// This file holds the two forwarding-header parsers. Both return the client
// named by the header's field lines and true, or false to mean "believe the
// peer". Neither allocates on well-formed input.
//
// X-Forwarded-For has no quoting, so it is read from the right and the scan
// stops at the first untrusted entry: whatever a client wrote further left
// is never even parsed. Forwarded has quoted strings, which cannot be read
// backwards reliably, so it is read from the left in one pass that keeps
// just enough state to give the right-to-left answer: the last entry that is
// not trusted (an address or garbage) and the first entry.

// fromXForwardedFor applies the rightmost-untrusted rule to X-Forwarded-For.
func (r *Resolver) fromXForwardedFor(lines []string) (netip.Addr, bool) {
	var leftmost netip.Addr // the last trusted entry seen, i.e. the leftmost so far
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		for len(line) > 0 {
			elem := line
			if c := strings.LastIndexByte(line, ','); c >= 0 {
				elem, line = line[c+1:], line[:c]
			} else {
				line = ""
			}
			elem = trimOWS(elem)
			if elem == "" {
				continue // an empty list element (RFC 9110, section 5.6.1)
			}
			a, ok := parseAddr(elem)
			if !ok {
				return netip.Addr{}, false // garbage: fall back to the peer
			}
			if !r.trusted(a) {
				return a, true
			}
			leftmost = a
		}
	}
	return leftmost, leftmost.IsValid() // every entry trusted: the leftmost
}

// parseAddr parses one X-Forwarded-For entry (or a RemoteAddr): an
// address, optionally with a port ("192.0.2.7:80", "[2001:db8::1]:80"), or
// a bracketed IPv6 address without one.
func parseAddr(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() {
			return normalize(a), true
		}
	}
	return netip.Addr{}, false
}

// fromForwarded applies the rightmost-untrusted rule to the for= nodes of
// RFC 7239 Forwarded.
func (r *Resolver) fromForwarded(lines []string) (netip.Addr, bool) {
	var (
		first     netip.Addr // the first element's node, if an address
		n         int        // non-empty elements seen
		last      netip.Addr // the last untrusted address seen...
		lastFound bool       // ...or garbage, if this is set and last is zero
	)
	for _, line := range lines {
		for i := 0; i < len(line); {
			end := elementEnd(line, i)
			elem := trimOWS(line[i:end])
			i = end + 1 // past the comma, or past the end
			if elem == "" {
				continue
			}
			a, ok := parseForwardedElement(elem)
			if n == 0 && ok {
				first = a
			}
			n++
			switch {
			case !ok:
				last, lastFound = netip.Addr{}, true
			case !r.trusted(a):
				last, lastFound = a, true
			}
		}
	}
	switch {
	case lastFound:
		return last, last.IsValid() // garbage (zero) means the peer
	case n > 0:
		return first, true // every element trusted: the leftmost
	}
	return netip.Addr{}, false
}

// elementEnd returns the index of the comma that ends the forwarded-element
// starting at s[i], or len(s). Commas inside quoted strings do not count; an
// unterminated quoted string runs to the end of s.
func elementEnd(s string, i int) int {
	// Usually no quote precedes the next comma.
	c := strings.IndexByte(s[i:], ',')
	if c < 0 {
		c = len(s) - i
	}
	if strings.IndexByte(s[i:i+c], '"') < 0 {
		return i + c
	}
	inQuote := false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case c == ',' && !inQuote:
			return i
		}
	}
	return len(s)
}

// parseForwardedElement parses one forwarded-element,
//
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
//
// and returns its for= node when that is an address. It fails for an
// element that breaks the grammar, repeats a parameter, has no for= or names
// a node that is not an address ("unknown", "_hidden"). Whitespace around
// ";" is tolerated.
func parseForwardedElement(s string) (netip.Addr, bool) {
	var (
		node netip.Addr
		ok   bool
		seen uint8 // bits for for, by, host, proto
	)
	for i := skipOWS(s, 0); i < len(s); i = skipOWS(s, i) {
		if s[i] == ';' { // an empty forwarded-pair
			i++
			continue
		}
		name, value, next, pairOK := forwardedPair(s, i)
		if !pairOK {
			return netip.Addr{}, false
		}
		i = next
		bit := forwardedParamBit(name)
		if seen&bit != 0 {
			return netip.Addr{}, false // a parameter must not repeat (RFC 7239, section 4)
		}
		seen |= bit
		if bit == 1 {
			node, ok = parseNode(value)
		}
	}
	return node, ok
}

// forwardedPair reads the forwarded-pair starting at s[i] (not whitespace)
// with the whitespace and ";" after it, and returns its name, its value
// (unquoted) and the index just past it. It fails where the grammar breaks.
func forwardedPair(s string, i int) (name, value string, next int, ok bool) {
	j := tokenEnd(s, i)
	if j == i || j == len(s) || s[j] != '=' {
		return "", "", 0, false
	}
	name = s[i:j]
	i = j + 1
	if i < len(s) && s[i] == '"' {
		if value, i, ok = quotedString(s, i); !ok {
			return "", "", 0, false
		}
	} else {
		j = tokenEnd(s, i)
		if j == i {
			return "", "", 0, false
		}
		value, i = s[i:j], j
	}
	i = skipOWS(s, i)
	if i < len(s) {
		if s[i] != ';' {
			return "", "", 0, false
		}
		i++
	}
	return name, value, i, true
}

// forwardedParamBit is the bit in parseForwardedElement's seen set for the
// parameter name: 1 for, 2 by, 4 host, 8 proto, 0 an extension parameter
// (which may repeat).
func forwardedParamBit(name string) uint8 {
	switch {
	case strings.EqualFold(name, "for"):
		return 1
	case strings.EqualFold(name, "by"):
		return 2
	case strings.EqualFold(name, "host"):
		return 4
	case strings.EqualFold(name, "proto"):
		return 8
	}
	return 0
}

// skipOWS returns the index of the first byte at or after i that is not
// optional whitespace.
func skipOWS(s string, i int) int {
	for i < len(s) && isOWS(s[i]) {
		i++
	}
	return i
}

// tokenEnd returns the index just past the run of token characters that
// starts at i (i itself when there is none).
func tokenEnd(s string, i int) int {
	for i < len(s) && isTchar(s[i]) {
		i++
	}
	return i
}

// quotedString reads the quoted-string starting at s[i] (a '"') and returns
// its unescaped content and the index just past its closing quote. It fails
// on a control character or a missing closing quote.
func quotedString(s string, i int) (string, int, bool) {
	start := i + 1
	escaped := false
	for j := start; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			if !escaped {
				return s[start:j], j + 1, true
			}
			return unescape(s[start:j]), j + 1, true
		case c == '\\':
			if j+1 == len(s) || !isQuotedPairChar(s[j+1]) {
				return "", 0, false
			}
			escaped = true
			j++
		case !isQdtext(c):
			return "", 0, false
		}
	}
	return "", 0, false
}

// unescape removes the backslashes of quoted-pairs from a quoted-string's
// content, which quotedString has checked.
func unescape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseNode parses a Forwarded node when it names an address,
//
//	node     = nodename [ ":" node-port ]
//	nodename = IPv4address / "[" IPv6address "]" / "unknown" / obfnode
//
// failing for "unknown", obfuscated names, unbracketed IPv6, bracketed
// IPv4, zones and bad ports.
func parseNode(s string) (netip.Addr, bool) {
	var (
		a    netip.Addr
		err  error
		port string
		hasP bool
	)
	if strings.HasPrefix(s, "[") {
		k := strings.IndexByte(s, ']')
		if k < 0 {
			return netip.Addr{}, false
		}
		if a, err = netip.ParseAddr(s[1:k]); err != nil || !a.Is6() || a.Zone() != "" {
			return netip.Addr{}, false
		}
		if rest := s[k+1:]; rest != "" {
			if rest[0] != ':' {
				return netip.Addr{}, false
			}
			port, hasP = rest[1:], true
		}
	} else {
		name := s
		if k := strings.IndexByte(s, ':'); k >= 0 {
			name, port, hasP = s[:k], s[k+1:], true
		}
		if a, err = netip.ParseAddr(name); err != nil || !a.Is4() {
			return netip.Addr{}, false
		}
	}
	if hasP && !validNodePort(port) {
		return netip.Addr{}, false
	}
	return normalize(a), true
}

// validNodePort reports whether s is a node-port: 1*5DIGIT, or an obfport,
// "_" followed by letters, digits, ".", "_" or "-".
func validNodePort(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '_' {
		if len(s) == 1 {
			return false
		}
		for i := 1; i < len(s); i++ {
			if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
				return false
			}
		}
		return true
	}
	if len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isOWS(c byte) bool { return c == ' ' || c == '\t' }

func trimOWS(s string) string {
	for len(s) > 0 && isOWS(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isOWS(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// isTchar reports whether c may appear in a token (RFC 9110, section 5.6.2).
func isTchar(c byte) bool { return tchar[c] }

var tchar = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isAlnum(byte(c)) || strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
	}
	return t
}()

// isQdtext reports whether c may appear unescaped in a quoted-string:
// HTAB, SP, VCHAR except '"' and '\', and obs-text.
func isQdtext(c byte) bool {
	return c == '\t' || c == ' ' || c == 0x21 || 0x23 <= c && c <= 0x5B || 0x5D <= c && c <= 0x7E || c >= 0x80
}

// isQuotedPairChar reports whether c may follow a backslash in a
// quoted-string: HTAB, SP, VCHAR or obs-text.
func isQuotedPairChar(c byte) bool {
	return c == '\t' || 0x20 <= c && c <= 0x7E || c >= 0x80
}
