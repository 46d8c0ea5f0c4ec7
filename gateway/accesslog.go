package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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
// The address is the client's as TrustedProxies finds it. With
// Config.AccessLogJSON the line is a JSON object instead (see appendJSONLine).
func (st *state) access(r *http.Request, status, size int, outcome string, by []string) {
	w := st.cfg.AccessLog
	if w == nil {
		return
	}
	addr := r.RemoteAddr
	if a, err := st.cfg.TrustedProxies.ClientIP(r); err == nil {
		addr = a.String()
	}
	var b []byte
	if st.cfg.AccessLogJSON {
		b = appendJSONLine(make([]byte, 0, 320), time.Now(), addr, r, status, size, outcome, by)
	} else {
		b = appendCombined(make([]byte, 0, 256), time.Now(), addr, r, status, size, outcome, by)
	}
	st.logMu.Lock()
	w.Write(b)
	st.logMu.Unlock()
}

// appendCombined appends the line of NGINX's combined format, the outcome
// and the policies.
func appendCombined(b []byte, now time.Time, addr string, r *http.Request, status, size int, outcome string, by []string) []byte {
	b = append(b, addr...)
	b = append(b, " - - ["...)
	b = now.AppendFormat(b, "02/Jan/2006:15:04:05 -0700")
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
	return append(b, "\"\n"...)
}

// appendJSONLine appends the access log line as one JSON object and a
// newline, with the keys of envoyproxy/ratelimit's JSON logs for the time
// and the message, those of NGINX's variables for the rest:
//
//	{"@timestamp":"2026-11-30T05:34:23.123Z","@message":"access","remote_addr":"203.0.113.9","request_method":"GET","request_uri":"/api/x","server_protocol":"HTTP/1.1","status":429,"body_bytes_sent":187,"http_referer":"","http_user_agent":"curl/8.5.0","outcome":"REJECTED","by":["per_ip"]}
//
// body_bytes_sent is absent when not known. Every string is escaped as
// JSON requires, and bytes that are not UTF-8 become U+FFFD, so that no
// client can forge a key or a line.
func appendJSONLine(b []byte, now time.Time, addr string, r *http.Request, status, size int, outcome string, by []string) []byte {
	b = append(b, `{"@timestamp":"`...)
	b = now.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","@message":"access","remote_addr":`...)
	b = appendJSONString(b, addr)
	b = append(b, `,"request_method":`...)
	b = appendJSONString(b, r.Method)
	b = append(b, `,"request_uri":`...)
	b = appendJSONString(b, r.URL.RequestURI())
	b = append(b, `,"server_protocol":`...)
	b = appendJSONString(b, r.Proto)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	if size >= 0 {
		b = append(b, `,"body_bytes_sent":`...)
		b = strconv.AppendInt(b, int64(size), 10)
	}
	b = append(b, `,"http_referer":`...)
	b = appendJSONString(b, r.Referer())
	b = append(b, `,"http_user_agent":`...)
	b = appendJSONString(b, r.UserAgent())
	b = append(b, `,"outcome":`...)
	b = appendJSONString(b, outcome)
	b = append(b, `,"by":[`...)
	for i, p := range by {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, p)
	}
	return append(b, "]}\n"...)
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control bytes escaped (< and > too, as encoding/json does), bytes that
// are not UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, `\u202`...)
			b = append(b, hex[r&0xf])
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
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
