package main

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// serveHTTP serves h on ln with net/http's server.
func serveHTTP(ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute, IdleTimeout: 75 * time.Second}
	return srv.Serve(ln)
}

// newTransport is the upstream Transport of the net/http engines: the
// gateway's (a clone of the default with more idle connections kept and
// no compression asked for).
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	t.MaxIdleConns = 1024
	t.DisableCompression = true
	return t
}

// newFloor is the floor: a bare ReverseProxy to u with the gateway's
// Transport and pooled copy buffers, and nothing else.
func newFloor(u *url.URL) http.Handler {
	return &httputil.ReverseProxy{
		Transport: newTransport(),
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		BufferPool: buffers,
	}
}

// buffers lends 32 KiB copy buffers, as array pointers so that a Put does
// not allocate.
var buffers = &bufferPool{}

type bufferPool struct{ p sync.Pool }

const bufferSize = 32 << 10

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[bufferSize]byte); ok {
		return v[:]
	}
	return make([]byte, bufferSize)
}

func (b *bufferPool) Put(buf []byte) {
	if cap(buf) == bufferSize {
		b.p.Put((*[bufferSize]byte)(buf[:bufferSize]))
	}
}
