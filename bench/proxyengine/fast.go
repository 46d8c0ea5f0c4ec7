package main

import (
	"bytes"
	"errors"
	"log"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"
)

// fast forwards with fasthttp on both legs: its Server reads the client's
// request into a pooled RequestCtx, which its HostClient sends upstream as
// it is, less the hop-by-hop headers; the answer is read into the
// context's Response and written back. Bodies are read whole on both legs
// (fasthttp's defaults), HTTP/1.1 only.
type fast struct {
	client *fasthttp.HostClient
	host   string
	limits *limits
}

func newFast(u *url.URL, l *limits) *fasthttp.Server {
	f := &fast{
		client: &fasthttp.HostClient{
			Addr:                          u.Host,
			MaxConns:                      1024,
			MaxIdleConnDuration:           90 * time.Second,
			DisableHeaderNamesNormalizing: true,
			DisablePathNormalizing:        true,
			NoDefaultUserAgentHeader:      true,
		},
		host:   u.Host,
		limits: l,
	}
	return &fasthttp.Server{
		Handler:                       f.serve,
		NoDefaultServerHeader:         true,
		NoDefaultContentType:          true,
		DisableHeaderNamesNormalizing: true,
		ReadTimeout:                   75 * time.Second,
	}
}

var hopHeaders = [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (f *fast) serve(ctx *fasthttp.RequestCtx) {
	peer := ctx.RemoteIP().String()
	if ok, retry := f.limits.allow(ctx, string(ctx.Path()), peer); !ok {
		ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
		ctx.Response.Header.SetContentType("application/problem+json")
		ctx.Response.Header.Set("Retry-After", retry)
		ctx.SetBody(f.limits.problem)
		return
	}
	req := &ctx.Request
	dropListed(req.Header.Peek("Connection"), req.Header.Del)
	for _, k := range hopHeaders {
		req.Header.Del(k)
	}
	req.Header.Set("X-Forwarded-For", peer)
	req.Header.SetBytesV("X-Forwarded-Host", req.Header.Host())
	req.Header.Set("X-Forwarded-Proto", "http")
	req.Header.SetHost(f.host)
	resp := &ctx.Response
	if err := f.client.Do(req, resp); err != nil {
		status := fasthttp.StatusBadGateway
		if errors.Is(err, fasthttp.ErrTimeout) {
			status = fasthttp.StatusGatewayTimeout
		}
		log.Printf("proxyengine: upstream: %v", err)
		resp.Reset()
		ctx.SetStatusCode(status)
		return
	}
	dropListed(resp.Header.Peek("Connection"), resp.Header.Del)
	for _, k := range hopHeaders {
		resp.Header.Del(k)
	}
}

// dropListed deletes the headers a Connection value conn names.
func dropListed(conn []byte, del func(string)) {
	for tok := range bytes.SplitSeq(conn, []byte(",")) {
		tok = bytes.TrimSpace(tok)
		if len(tok) > 0 && !bytes.EqualFold(tok, []byte("close")) && !bytes.EqualFold(tok, []byte("keep-alive")) {
			del(string(tok))
		}
	}
}
