// Command client shows a paced client staying under a server's rate limit.
//
// It starts an HTTP server protected by package httplimit (a token bucket of
// -limit requests per second, global) on a loopback port, in process, and
// offers it twice that rate, first without pacing and then through a
// client.Pacer set to 90% of the limit. It prints, second by second, how many
// requests the server admitted and refused: the unpaced client is refused
// about half the time, the paced one never once it is paced. Requests the
// pacer cannot send within their one-second deadline fail on the client,
// without reaching the server; that is the excess load, kept home.
//
// Issue 7 asks for this to drive `sluice serve` or `sluice proxy`; neither
// command exists yet, so the program runs its own httplimit server. When
// they land, point -url at one of them and skip the in-process server.
//
//	go run ./examples/client -limit 20 -seconds 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
)

func main() {
	limit := flag.Int("limit", 20, "the server's limit, in requests per second")
	seconds := flag.Int("seconds", 3, "how long each phase offers load")
	url := flag.String("url", "", "an existing rate-limited server to drive instead of the in-process one")
	flag.Parse()

	target := *url
	if target == "" {
		srv, addr, err := serve(*limit)
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Shutdown(context.Background())
		target = "http://" + addr + "/"
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
}

// serve starts an httplimit-protected server on a loopback port.
func serve(limit int) (*http.Server, string, error) {
	store := memstore.New(memstore.Config{})
	wrap, err := httplimit.Wrap(httplimit.Config{
		Limiter:  store,
		Policies: []httplimit.Policy{{Name: "global", Limit: sluice.PerSecond(limit), Key: httplimit.Global()}},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, "", err
	}
	h := wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	srv.RegisterOnShutdown(func() { store.Close() })
	go srv.Serve(ln)
	return srv, ln.Addr().String(), nil
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
