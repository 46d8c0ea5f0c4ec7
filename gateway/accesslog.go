package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// access writes one line for a request the gateway answered itself, in
// NGINX's combined format followed by the outcome (REJECTED, SHED,
// UPSTREAM_ERROR, DENIED for a method a route does not allow, BODY_TIMEOUT
// and BAD_BODY for a body that stalled or was malformed, QUEUE_FULL beyond
// Config.MaxQueued; NO_KEY, BAD_COST
// or UNAVAILABLE when a policy could not decide) and what caused it:
//
//	203.0.113.9 - - [30/Nov/2026:05:34:23 +0000] "GET /api/x HTTP/1.1" 429 187 "-" "curl/8.5.0" outcome=REJECTED by="per_ip"
//
// The address is the client's as TrustedProxies finds it.
func (st *state) access(r *http.Request, status, size int, outcome string, by []string) {
	w := st.cfg.AccessLog
	if w == nil {
		return
	}
	addr := r.RemoteAddr
	if a, err := st.cfg.TrustedProxies.ClientIP(r); err == nil {
		addr = a.String()
	}
	b := make([]byte, 0, 256)
	b = append(b, addr...)
	b = append(b, " - - ["...)
	b = time.Now().AppendFormat(b, "02/Jan/2006:15:04:05 -0700")
	b = append(b, "] \""...)
	b = appendClean(b, r.Method)
	b = append(b, ' ')
	b = appendClean(b, r.URL.RequestURI())
	b = append(b, ' ')
	b = appendClean(b, r.Proto)
	b = append(b, "\" "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	if size < 0 {
		b = append(b, '-') // not known
	} else {
		b = strconv.AppendInt(b, int64(size), 10)
	}
	b = append(b, " \""...)
	b = appendField(b, r.Referer())
	b = append(b, "\" \""...)
	b = appendField(b, r.UserAgent())
	b = append(b, "\" outcome="...)
	b = append(b, outcome...)
	b = append(b, " by=\""...)
	b = appendClean(b, strings.Join(by, ","))
	b = append(b, "\"\n"...)
	st.logMu.Lock()
	w.Write(b)
	st.logMu.Unlock()
}

func appendField(b []byte, s string) []byte {
	if s == "" {
		return append(b, '-')
	}
	return appendClean(b, s)
}

// appendClean appends s with quotes, backslashes and control bytes escaped
// as \xHH, as NGINX escapes its log variables, so that no client can forge
// a line.
func appendClean(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\\' || c < 0x20 || c >= 0x7f {
			b = append(b, '\\', 'x', hex[c>>4], hex[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return b
}
