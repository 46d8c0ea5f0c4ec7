package main

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
)

// lean forwards with net/http's Transport without ReverseProxy: the
// request's headers are copied once into a pooled map (the values shared,
// not copied), the outgoing URL and the 1xx trace are pooled with it, and
// nothing is allocated per request that the Transport does not need. An
// upgrade (WebSocket) goes to a ReverseProxy, which tunnels it.
type lean struct {
	target    *url.URL
	transport *http.Transport
	limits    *limits
	upgrade   http.Handler
	flows     sync.Pool // *flow
}

func newLean(u *url.URL, l *limits) *lean {
	t := newTransport()
	up := newFloor(u).(*httputil.ReverseProxy)
	up.Transport = t
	return &lean{target: u, transport: t, limits: l, upgrade: up}
}

// flow is the pooled state of one forwarded request.
type flow struct {
	header http.Header
	url    url.URL
	trace  httptrace.ClientTrace
	w      http.ResponseWriter
	vals   [2]string // X-Forwarded-For's and -Host's values
}

func (f *flow) got1xx(code int, h textproto.MIMEHeader) error {
	dst := f.w.Header()
	for k, v := range h {
		dst[k] = v
	}
	f.w.WriteHeader(code)
	clear(dst) // WriteHeader keeps the header map after a 1xx
	return nil
}

func (l *lean) getFlow(w http.ResponseWriter) *flow {
	f, ok := l.flows.Get().(*flow)
	if !ok {
		f = &flow{header: make(http.Header, 16)}
		f.trace.Got1xxResponse = f.got1xx
	}
	f.w = w
	return f
}

func (l *lean) putFlow(f *flow) {
	clear(f.header)
	f.url = url.URL{}
	f.w = nil
	l.flows.Put(f)
}

// Read-only values shared by every request.
var (
	teTrailers  = []string{"trailers"}[:1:1]
	emptyValue  = []string{""}[:1:1]
	httpProto   = []string{"http"}[:1:1]
	problemType = []string{"application/problem+json"}[:1:1]
)

func (l *lean) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	if ok, retry := l.limits.allow(r.Context(), r.URL.Path, host); !ok {
		h := w.Header()
		h["Content-Type"] = problemType
		h["Retry-After"] = []string{retry}
		h["Content-Length"] = []string{l.limits.problemLength}
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(l.limits.problem)
		return
	}
	if len(r.Header["Upgrade"]) > 0 {
		l.upgrade.ServeHTTP(w, r)
		return
	}
	l.forward(w, r, host)
}

// forward sends r to the target and copies the answer to w.
func (l *lean) forward(w http.ResponseWriter, r *http.Request, peer string) {
	f := l.getFlow(w)
	pooled := r.Body == nil || r.Body == http.NoBody // else the Transport may still read the header as it sends the body
	if pooled {
		defer l.putFlow(f)
	} else {
		f.header = make(http.Header, len(r.Header)+4)
	}
	f.copyRequestHeader(r.Header, peer, r.Host)
	f.url = url.URL{Scheme: l.target.Scheme, Host: l.target.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	out := r.WithContext(httptrace.WithClientTrace(r.Context(), &f.trace))
	out.URL, out.Header, out.Host, out.RequestURI, out.Close = &f.url, f.header, "", "", false
	if r.ContentLength == 0 {
		out.Body = nil
	}
	resp, err := l.transport.RoundTrip(out)
	if err != nil {
		l.failed(w, r, err)
		return
	}
	defer resp.Body.Close()
	copyResponse(w, resp)
}

// copyRequestHeader fills f's header with src's end-to-end headers (their
// values shared) and this hop's X-Forwarded-For, -Host and -Proto, in
// place of the client's.
func (f *flow) copyRequestHeader(src http.Header, peer, host string) {
	dst := f.header
	conn := src["Connection"]
	for k, v := range src {
		if hopByHop(k) || listed(conn, k) {
			continue
		}
		dst[k] = v
	}
	if tokenIn(src["Te"], "trailers") {
		dst["Te"] = teTrailers
	}
	if _, ok := dst["User-Agent"]; !ok {
		dst["User-Agent"] = emptyValue // not Go's
	}
	// No proxy is trusted: the client's X-Forwarded-* are replaced, as
	// the gateway does by default.
	f.vals = [2]string{peer, host}
	dst["X-Forwarded-For"] = f.vals[0:1:1]
	dst["X-Forwarded-Host"] = f.vals[1:2:2]
	dst["X-Forwarded-Proto"] = httpProto
}

// copyResponse writes resp to w: its end-to-end headers, its body, flushed
// as it comes when its length is unknown or it is an event stream, and its
// trailers.
func copyResponse(w http.ResponseWriter, resp *http.Response) {
	dst := w.Header()
	conn := resp.Header["Connection"]
	for k, v := range resp.Header {
		if hopByHop(k) || listed(conn, k) {
			continue
		}
		if old, ok := dst[k]; ok {
			v = append(old[:len(old):len(old)], v...)
		}
		dst[k] = v
	}
	announced := len(resp.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		dst["Trailer"] = []string{strings.Join(keys, ", ")}
	}
	w.WriteHeader(resp.StatusCode)
	stream := resp.ContentLength == -1 || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	if err := copyBody(w, resp.Body, stream); err != nil {
		panic(http.ErrAbortHandler) // the client must not take a cut body for a whole one
	}
	if len(resp.Trailer) == 0 {
		return
	}
	if announced > 0 && len(resp.Trailer) == announced {
		for k, v := range resp.Trailer {
			dst[k] = v
		}
		return
	}
	for k, v := range resp.Trailer {
		dst[http.TrailerPrefix+k] = v
	}
}

// copyBody copies src to w with a pooled buffer, flushing after each write
// when stream.
func copyBody(w http.ResponseWriter, src io.Reader, stream bool) error {
	buf := buffers.Get()
	defer buffers.Put(buf)
	var rc *http.ResponseController
	if stream {
		rc = http.NewResponseController(w)
	}
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if stream {
				rc.Flush()
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// failed answers 502, or 504 on a timeout, unless the client left.
func (l *lean) failed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	status := http.StatusBadGateway
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		status = http.StatusGatewayTimeout
	}
	log.Printf("proxyengine: upstream: %v", err)
	w.WriteHeader(status)
}

// hopByHop reports whether k (canonical) is a hop-by-hop header of RFC 9110
// §7.6.1, or one of the older ones that proxies drop too.
func hopByHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// listed reports whether the Connection header values conn name k.
func listed(conn []string, k string) bool {
	for _, v := range conn {
		for tok := range strings.SplitSeq(v, ",") {
			if textproto.TrimString(tok) != "" && strings.EqualFold(textproto.TrimString(tok), k) {
				return true
			}
		}
	}
	return false
}

// tokenIn reports whether one of values lists token.
func tokenIn(values []string, token string) bool {
	for _, v := range values {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(tok), token) {
				return true
			}
		}
	}
	return false
}
