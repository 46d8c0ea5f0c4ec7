// Command proxyengine is a bench prototype: one forwarding engine of a
// rate limiting reverse proxy, chosen by -engine, in front of -upstream.
// bench/proxy.sh runs each engine next to `sluice proxy`, NGINX and HAProxy
// with the same upstream and routes, so that the cost of the engine itself
// can be told from the rest of the gateway. The decision it measured is
// docs/adr/0001-proxy-engine.md.
//
// Engines:
//
//	floor  a bare httputil.ReverseProxy (SetURL, SetXForwarded) with a
//	       keep-alive Transport and pooled copy buffers, and no limit: the
//	       least net/http's reverse proxy costs
//	lean   a forwarding handler on net/http's server and Transport: the
//	       request's headers copied once, pooled buffers and state, no
//	       per-request closure; limits as below
//	fast   github.com/valyala/fasthttp for both legs (server and
//	       HostClient), HTTP/1.1 only; limits as below
//
// Routes, as bench/proxy.sh's sluice config: /open/ at 1000000r/s burst
// 100000 and /limited/ at 1000r/s burst 100, both keyed by the client's
// address in a memstore, refusing with 429, Retry-After and a small
// problem+json body; anything else is forwarded unlimited.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	upstream := flag.String("upstream", "", "upstream URL, http://host:port")
	engine := flag.String("engine", "lean", "floor, lean or fast")
	flag.Parse()
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400) // as sluice proxy does
	}
	u, err := url.Parse(*upstream)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		log.Fatalf("proxyengine: -upstream %q: want http://host:port", *upstream)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	if err := serve(*engine, ln, u); err != nil {
		log.Fatal(err)
	}
}

// serve runs engine on ln, forwarding to u, until ln fails.
func serve(engine string, ln net.Listener, u *url.URL) error {
	l := newLimits()
	switch engine {
	case "floor":
		return serveHTTP(ln, newFloor(u))
	case "lean":
		return serveHTTP(ln, newLean(u, l))
	case "fast":
		return newFast(u, l).Serve(ln)
	}
	return fmt.Errorf("proxyengine: unknown engine %q", engine)
}

// limits are the routes' limits of bench/proxy.sh, by path prefix.
type limits struct {
	store         *memstore.Store
	open, limited sluice.Limit
	problem       []byte // the 429's body
	problemLength string
}

func newLimits() *limits {
	body := []byte(`{"type":"about:blank","title":"Too Many Requests","status":429}`)
	return &limits{
		store:         memstore.New(memstore.Config{}),
		open:          sluice.PerSecond(1000000).WithBurst(100000),
		limited:       sluice.PerSecond(1000).WithBurst(100),
		problem:       body,
		problemLength: strconv.Itoa(len(body)),
	}
}

// allow decides the request to path from the client host, and returns
// whether it may go on and, if not, the Retry-After in whole seconds.
func (l *limits) allow(ctx context.Context, path, host string) (bool, string) {
	lim, name := l.open, "open:"
	switch {
	case strings.HasPrefix(path, "/open/"):
	case strings.HasPrefix(path, "/limited/"):
		lim, name = l.limited, "limited:"
	default:
		return true, ""
	}
	res, err := l.store.AllowN(ctx, name+host, lim, 1)
	if err != nil || res.Allowed {
		return true, ""
	}
	return false, strconv.Itoa(int((res.RetryAfter + time.Second - 1) / time.Second))
}
