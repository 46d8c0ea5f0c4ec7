package gateway

import (
	"net/http"

	"github.com/sluicehq/sluice/clientip"
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
