package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/rlheader"
)

// This file keeps a route's cost headers (cost_from_response_header,
// httplimit.Settle) between the upstream and the proxy: the upstream's
// word on what a request cost is accounting, not part of the answer, so
// the client receives neither the header nor the trailer, as NGINX's
// proxy_hide_header would have it.

// costHeaders returns the canonical names of the response headers (and
// trailers) that pol's settlements read: Settle.Header, or
// httplimit.DefaultCostHeader when it is empty. A Settle with a Cost
// callback reads no header of its own, and none is hidden for it. A name
// that cannot be a hidden cost header (see costHeaderName) is an error.
func costHeaders(pol []httplimit.Policy) ([]string, error) {
	var names []string
	for i := range pol {
		s := pol[i].Settle
		if s == nil || s.Cost != nil {
			continue
		}
		name := s.Header
		if name == "" {
			name = httplimit.DefaultCostHeader
		}
		if err := costHeaderName(name); err != nil {
			return nil, fmt.Errorf("limit %q: %w", pol[i].Name, err)
		}
		if name = http.CanonicalHeaderKey(name); !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names, nil
}

// hopByHop are the headers the proxy drops from an upstream's response
// (RFC 9110, 7.6.1): a cost in one would never be read.
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// clientsOwn are response headers the client needs, to read the response
// (its framing, type, encoding, range, caching, redirection, cookies,
// authentication) or the limits' word on it (written by the limits
// themselves, whose value would be read as the cost): hiding one as a
// cost header would break the response.
var clientsOwn = []string{
	"Cache-Control", "Content-Encoding", "Content-Length", "Content-Location", "Content-Range", "Content-Type",
	"Date", "Etag", "Expires", "Last-Modified", "Location", "Set-Cookie", "Vary", "Www-Authenticate",
	rlheader.HeaderRateLimit, rlheader.HeaderRateLimitPolicy, rlheader.HeaderRetryAfter, rlheader.HeaderReason,
	"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset",
}

// costHeaderName returns why name cannot be a route's cost header, which
// the proxy reads from the upstream's response and hides from the client:
// a hop-by-hop header never arrives, and one in clientsOwn must not be
// hidden. Nil: it can.
func costHeaderName(name string) error {
	c := http.CanonicalHeaderKey(name)
	switch {
	case slices.Contains(hopByHop, c):
		return fmt.Errorf("cost header %s is hop-by-hop: the proxy drops it from the upstream's response; name a header of its own, such as X-Cost", name)
	case slices.ContainsFunc(clientsOwn, func(o string) bool { return http.CanonicalHeaderKey(o) == c }):
		return fmt.Errorf("cost header %s is one the client needs, and a cost header is hidden from the client; name a header of its own, such as X-Cost", name)
	}
	return nil
}

// hideCost is the ResponseWriter ReverseProxy writes to on a route with
// cost headers. It sends the response without them and leaves them in
// the header map once the response is written, where the route's
// settlements read them after the handler (changes to the map after
// WriteHeader do not reach the client, but for trailers, which
// ReverseProxy declares in the Trailer header or marks with
// http.TrailerPrefix; hideCost takes the cost names out of both).
type hideCost struct {
	http.ResponseWriter
	names   []string
	written bool
}

// WriteHeader writes the header without the cost headers, and without
// the cost names in its Trailer declaration, then puts the cost headers
// back in the map, out of the client's sight. A 1xx is written without
// them (its headers are the upstream's interim ones, which ReverseProxy
// clears after it; the cost is the final response's).
func (h *hideCost) WriteHeader(code int) {
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		hdr := h.ResponseWriter.Header()
		for _, name := range h.names {
			delete(hdr, name)
		}
		h.ResponseWriter.WriteHeader(code)
		return
	}
	if h.written {
		h.ResponseWriter.WriteHeader(code) // superfluous: net/http logs it
		return
	}
	h.written = true
	hdr := h.ResponseWriter.Header()
	saved := make([][]string, len(h.names))
	for i, name := range h.names {
		saved[i] = hdr[name]
		delete(hdr, name)
	}
	undeclare(hdr, h.names)
	h.ResponseWriter.WriteHeader(code)
	for i, name := range h.names {
		if saved[i] != nil {
			hdr[name] = saved[i]
		}
	}
}

// Write writes the header first if it has not been.
func (h *hideCost) Write(p []byte) (int, error) {
	if !h.written {
		h.WriteHeader(http.StatusOK)
	}
	return h.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController (ReverseProxy's flushes) reach the
// underlying ResponseWriter.
func (h *hideCost) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// finish takes the cost trailers ReverseProxy marked with
// http.TrailerPrefix (those the upstream did not declare) off the
// response, which sends such keys when the handler returns, and leaves
// them in the map under their own names for the settlements. Called once
// ReverseProxy has returned.
func (h *hideCost) finish() {
	hdr := h.ResponseWriter.Header()
	for _, name := range h.names {
		if v, ok := hdr[http.TrailerPrefix+name]; ok {
			delete(hdr, http.TrailerPrefix+name)
			hdr[name] = append(hdr[name], v...)
		}
	}
}

// undeclare takes names out of hdr's Trailer declaration (one or more
// comma-separated lists), and drops the header if nothing is left.
func undeclare(hdr http.Header, names []string) {
	decl := hdr["Trailer"]
	if len(decl) == 0 {
		return
	}
	var keep []string
	for _, v := range decl {
		for k := range strings.SplitSeq(v, ",") {
			k = strings.TrimSpace(k)
			if k != "" && !slices.Contains(names, http.CanonicalHeaderKey(k)) {
				keep = append(keep, k)
			}
		}
	}
	if len(keep) == 0 {
		delete(hdr, "Trailer")
		return
	}
	hdr["Trailer"] = []string{strings.Join(keep, ", ")}
}

// hideOnUpgrade is the ModifyResponse of a route with cost headers (names):
// ReverseProxy writes a 101's header onto the hijacked connection itself,
// past hideCost, so the names are taken off the upstream's 101 here, before
// it does; the settlements find none, and the estimate stays spent.
func hideOnUpgrade(names []string) func(*http.Response) error {
	return func(res *http.Response) error {
		if res.StatusCode == http.StatusSwitchingProtocols {
			for _, name := range names {
				delete(res.Header, name)
			}
		}
		return nil
	}
}
