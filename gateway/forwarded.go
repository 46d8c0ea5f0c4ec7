package gateway

import (
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/httplimit"
)

// forwardedElement is the RFC 7239 Forwarded element of this hop for r:
// for= the peer (unmapped, without its zone, which a node cannot carry),
// host= the Host it asked for, proto= its scheme.
func forwardedElement(r *http.Request) string {
	b := make([]byte, 0, 64)
	b = append(b, "for="...)
	if a, err := clientip.Peer(r); err != nil {
		b = append(b, "unknown"...)
	} else if a.Is4() {
		b = a.AppendTo(b)
	} else {
		b = append(b, `"[`...)
		b = a.AppendTo(b)
		b = append(b, `]"`...)
	}
	if r.Host != "" {
		b = append(b, ";host="...)
		b = appendQuoted(b, r.Host)
	}
	b = append(b, ";proto="...)
	if r.TLS != nil {
		b = append(b, "https"...)
	} else {
		b = append(b, "http"...)
	}
	return string(b)
}

// appendQuoted appends s as an RFC 9110 quoted-string.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		if c < 0x20 && c != '\t' || c == 0x7f {
			continue // not allowed in a quoted-string
		}
		b = append(b, c)
	}
	return append(b, '"')
}

// dropUnderscoreForwarding removes from h every header whose name is that
// of a forwarding header (X-Forwarded-For, -Host, -Proto, which this hop
// writes, and X-Real-Ip, which only a trusted proxy may tell) with "_" for
// some "-": CGI and WSGI servers read X_Forwarded_For as X-Forwarded-For
// (both are HTTP_X_FORWARDED_FOR), so a client could shadow the header
// this hop wrote or dropped. NGINX drops every header with an underscore
// by default.
func dropUnderscoreForwarding(h http.Header) {
	for k := range h {
		if strings.IndexByte(k, '_') < 0 {
			continue
		}
		for _, f := range [...]string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"} {
			if httplimit.SameHeaderToCGI(k, f) {
				delete(h, k)
			}
		}
	}
}

// dropH2CUpgrade removes an upgrade to HTTP/2 (h2c, alone or among other
// protocols) from h, which ReverseProxy would pass on: an upstream that
// took it would answer 101 and speak HTTP/2 through the tunnel the proxy
// keeps for an upgrade, and the requests the client sent on it would
// reach the upstream unrouted and unlimited. The request goes on as a
// plain one.
func dropH2CUpgrade(h http.Header) {
	for _, v := range h["Upgrade"] {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "h2c") {
				delete(h, "Upgrade")
				delete(h, "Http2-Settings")
				delete(h, "Connection")
				return
			}
		}
	}
}
