// Command client shows a paced client staying under a server's rate limit,
// with `sluice proxy` as the server.
//
// It offers the proxy twice its limit three times: without pacing, through a
// client.Pacer set to 90% of the limit, and through a Pacer set far above
// the limit that learns the real quota from the proxy's RateLimit-Policy
// header. It prints, second by second, how many requests the proxy admitted
// and refused: the unpaced client is refused about half the time, the paced
// ones not at all once paced. Requests a pacer cannot send within their
// one-second deadline fail on the client without reaching the server; that
// is the excess load, kept home.
//
// By default the program runs the proxy's engine (package gateway, with the
// same proxy.yaml) and a trivial upstream in process:
//
//	go run ./examples/client -seconds 3
//
// Against a real `sluice proxy`, in two terminals:
//
//	go run ./cmd/sluice proxy -listen 127.0.0.1:8080 -upstream http://127.0.0.1:8081 -config examples/client/proxy.yaml
//	go run ./examples/client -url http://127.0.0.1:8080/ -upstream 127.0.0.1:8081
//
// (-upstream makes the program serve the trivial upstream there.) The limit
// in proxy.yaml is 20 requests per second; -limit must match it.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/memstore"
)

func main() {
	limit := flag.Int("limit", 20, "the proxy's limit, in requests per second (proxy.yaml's rate)")
	seconds := flag.Int("seconds", 3, "how long each phase offers load")
	url := flag.String("url", "", "a running `sluice proxy` to drive instead of the in-process one")
	upAddr := flag.String("upstream", "", "with -url: serve the trivial upstream on this address")
	flag.Parse()

	target := *url
	if *upAddr != "" {
		up, _, err := listen(*upAddr, upstream())
		if err != nil {
			log.Fatal(err)
		}
		defer up.Shutdown(context.Background())
	}
	if target == "" {
		up, upURL, err := listen("127.0.0.1:0", upstream())
		if err != nil {
			log.Fatal(err)
		}
		defer up.Shutdown(context.Background())
		srv, addr, err := proxy(upURL)
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Shutdown(context.Background())
		target = addr + "/"
	}

	base := &http.Transport{MaxIdleConnsPerHost: 64}
	defer base.CloseIdleConnections()
	offered := 2 * *limit

	fmt.Printf("server limit %d/s; offering %d/s\n\n", *limit, offered)
	fmt.Println("without pacing:")
	drive(base, target, offered, *seconds)

	time.Sleep(time.Second) // let the server's bucket refill
	pacer := &client.Pacer{Base: base, Limit: sluice.PerSecond(*limit * 9 / 10).WithBurst(1)}
	fmt.Printf("\nthrough a Pacer at %d/s:\n", *limit*9/10)
	drive(pacer, target, offered, *seconds)

	time.Sleep(time.Second)
	learner := &client.Pacer{Base: base, Limit: sluice.PerSecond(10 * *limit)}
	fmt.Printf("\nthrough a Pacer at %d/s that learns the quota from RateLimit-Policy:\n", 10**limit)
	drive(learner, target, offered, *seconds)
}

//go:embed proxy.yaml
var proxyYAML []byte

// upstream is the trivial service behind the proxy.
func upstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
}

// proxy starts the engine of `sluice proxy` with proxy.yaml in front of
// upstreamURL, on a loopback port.
func proxy(upstreamURL string) (*http.Server, string, error) {
	f, err := gateway.ParseFile("proxy.yaml", proxyYAML)
	if err != nil {
		return nil, "", err
	}
	u, err := neturl.Parse(upstreamURL)
	if err != nil {
		return nil, "", err
	}
	store := memstore.New(memstore.Config{})
	cfg := f.Config
	cfg.Upstreams = []gateway.Upstream{{Name: "upstream", URL: u}}
	cfg.Limiter = store
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := gateway.New(cfg)
	if err != nil {
		return nil, "", err
	}
	srv, addr, err := listen("127.0.0.1:0", g)
	if err != nil {
		return nil, "", err
	}
	srv.RegisterOnShutdown(func() { g.Close(); store.Close() })
	return srv, addr, nil
}

// listen serves h on addr and returns the server and its base URL.
func listen(addr string, h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return srv, "http://" + ln.Addr().String(), nil
}

// drive sends rate requests per second through rt for the given number of
// seconds, each with a one-second deadline, and prints second by second how
// many the server admitted and refused, and how many the client held back.
// Neither rt does any retrying, so every 429 the server sends is counted.
func drive(rt http.RoundTripper, url string, rate, seconds int) {
	var admitted, refused, heldBack atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	report := time.NewTicker(time.Second)
	defer report.Stop()
	for s := 1; s <= seconds; {
		select {
		case <-tick.C:
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					if errors.Is(err, client.ErrWaitTooLong) || errors.Is(err, context.DeadlineExceeded) {
						heldBack.Add(1)
					}
					return
				}
				if resp.StatusCode == http.StatusTooManyRequests {
					refused.Add(1)
				} else {
					admitted.Add(1)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		case <-report.C:
			fmt.Printf("  second %d: admitted %3d, refused (429) %3d, held back by the client %3d\n", s, admitted.Swap(0), refused.Swap(0), heldBack.Swap(0))
			s++
		}
	}
	wg.Wait()
}
