package bench

import (
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	tollbooth "github.com/didip/tollbooth/v7"
	"github.com/go-chi/httprate"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rlheader"
)

// numClients is the number of client addresses the middleware benchmarks
// spread their requests over.
const numClients = 1_000

// middlewareContender is one HTTP rate limiting middleware under test. wrap
// returns next behind a fresh middleware, allowing limitN requests per
// limitPeriod to each client IP, and a function that releases it.
type middlewareContender struct {
	name string
	wrap func(b *testing.B, next http.Handler) (http.Handler, func())
}

func middlewareContenders() []middlewareContender {
	return []middlewareContender{
		{"none", func(_ *testing.B, next http.Handler) (http.Handler, func()) { return next, func() {} }},
		{"sluice-httplimit", func(b *testing.B, next http.Handler) (http.Handler, func()) {
			return wrapSluice(b, next, false)
		}},
		{"sluice-httplimit-legacy", func(b *testing.B, next http.Handler) (http.Handler, func()) {
			return wrapSluice(b, next, true)
		}},
		{"httprate", wrapHTTPRate},
		{"tollbooth", wrapTollbooth},
	}
}

// wrapSluice is httplimit with memstore and one per-IP token bucket policy,
// draft headers (RateLimit, RateLimit-Policy) on, and with legacy also the
// X-RateLimit-* headers.
func wrapSluice(b *testing.B, next http.Handler, legacy bool) (http.Handler, func()) {
	s := memstore.New(memstore.Config{})
	headers := rlheader.Draft11
	if legacy {
		headers = rlheader.Both
	}
	m, err := httplimit.New(httplimit.Config{
		Settings: httplimit.Settings{Limiter: s, Headers: headers},
		Policies: []httplimit.Policy{{
			Name:  "ip",
			Limit: sluice.PerSecond(limitN),
			Key:   httplimit.ClientIP(nil),
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return m.Handler(next), func() { s.Close() }
}

// wrapHTTPRate is go-chi/httprate keyed by the peer address exactly as
// httprate.LimitByIP keys it (its KeyByIP: net.SplitHostPort of RemoteAddr,
// then CanonicalizeIP), written out with LimitBy because v0.16 deprecates
// LimitByIP and KeyByIP. Default options: its local sliding-window counter and
// its X-RateLimit-Limit, -Remaining and -Reset headers.
func wrapHTTPRate(_ *testing.B, next http.Handler) (http.Handler, func()) {
	keyByPeer := func(r *http.Request) (string, error) {
		ip, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			ip = r.RemoteAddr
		}
		return httprate.CanonicalizeIP(ip), nil
	}
	return httprate.LimitBy(limitN, limitPeriod, keyByPeer)(next), func() {}
}

// wrapTollbooth is didip/tollbooth v7 (the newest major version the Go
// module proxy serves), tollbooth.NewLimiter(limitN, nil) (rate limitN per
// second, burst limitN) with two settings changed so that it applies the same
// policy as the others: the key is the peer address only (NewLimiter would
// look at X-Forwarded-For and X-Real-IP first; the benchmark's requests carry
// neither) and not the URL path too (SetIgnoreURL). It sets its own headers
// (X-Rate-Limit-*, RateLimit-Limit, -Reset, -Remaining) on every request.
func wrapTollbooth(_ *testing.B, next http.Handler) (http.Handler, func()) {
	lmt := tollbooth.NewLimiter(limitN, nil)
	lmt.SetIPLookups([]string{"RemoteAddr"})
	lmt.SetIgnoreURL(true)
	return tollbooth.LimitHandler(lmt, next), func() {}
}

// okHandler is the handler behind every middleware: 200, no body.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusOK)
})

// discardWriter is a reusable http.ResponseWriter. reset empties its header
// map with clear, which keeps the map's storage, so the map itself is not
// allocated per request for any contender; what a middleware allocates to
// set its headers (value slices, formatted strings) is counted.
type discardWriter struct {
	h    http.Header
	code int
}

func newDiscardWriter() *discardWriter { return &discardWriter{h: make(http.Header, 8)} }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

func (w *discardWriter) reset() {
	clear(w.h)
	w.code = 0
}

// clientRequests returns numClients GET / requests, from 203.0.x.y:1234,
// one address each.
func clientRequests() []*http.Request {
	rs := make([]*http.Request, numClients)
	for i := range rs {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "203.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":1234"
		rs[i] = r
	}
	return rs
}

// BenchmarkMiddleware serves pre-built requests through each middleware and
// the trivial okHandler, on the allowed path: the limit is limitN (1e9) per
// second per client IP, every client is known to the middleware before the
// timer starts, and a response other than 200 fails the benchmark. The
// "none" row is okHandler alone; a middleware's overhead is its row minus
// that one.
func BenchmarkMiddleware(b *testing.B) {
	reqs := clientRequests()
	for _, c := range middlewareContenders() {
		b.Run(c.name, func(b *testing.B) { benchMiddleware(b, c, reqs) })
	}
	b.Run("parallel", func(b *testing.B) {
		for _, c := range middlewareContenders() {
			b.Run(c.name, func(b *testing.B) { benchMiddlewareParallel(b, c, reqs) })
		}
	})
}

// warm sends every request through h once, so that the timed loop decides
// on clients the middleware already holds.
func warm(b *testing.B, h http.Handler, reqs []*http.Request) {
	w := newDiscardWriter()
	for _, r := range reqs {
		w.reset()
		h.ServeHTTP(w, r)
		if w.code != http.StatusOK {
			b.Fatalf("warm-up: status %d, want 200", w.code)
		}
	}
}

// benchMiddleware serves the requests in turn from one goroutine.
func benchMiddleware(b *testing.B, c middlewareContender, reqs []*http.Request) {
	h, closeFn := c.wrap(b, okHandler)
	defer closeFn()
	warm(b, h, reqs)
	w := newDiscardWriter()
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for range b.N {
		w.reset()
		h.ServeHTTP(w, reqs[i])
		if w.code != http.StatusOK {
			b.Fatalf("%s: status %d, want 200", c.name, w.code)
		}
		if i++; i == len(reqs) {
			i = 0
		}
	}
}

// benchMiddlewareParallel serves the requests from GOMAXPROCS goroutines,
// each with its own writer, walking the requests from its own offset.
func benchMiddlewareParallel(b *testing.B, c middlewareContender, reqs []*http.Request) {
	h, closeFn := c.wrap(b, okHandler)
	defer closeFn()
	warm(b, h, reqs)
	var (
		offset atomic.Int64
		bad    atomic.Int64
		code   atomic.Int64
	)
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := newDiscardWriter()
		i := int(offset.Add(numClients/7)) % len(reqs)
		var n int64
		for pb.Next() {
			w.reset()
			h.ServeHTTP(w, reqs[i])
			if w.code != http.StatusOK {
				n++
				code.Store(int64(w.code))
			}
			if i++; i == len(reqs) {
				i = 0
			}
		}
		bad.Add(n)
	})
	b.StopTimer()
	if n := bad.Load(); n > 0 {
		b.Fatalf("%s: %d responses were not 200 (last status %d)", c.name, n, code.Load())
	}
}
