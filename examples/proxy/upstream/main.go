// Command upstream is the tiny upstream of the walk-through of
// docs/proxy.md: it answers every request with 200 and a line naming the
// request, on -addr (default 127.0.0.1:9000), until it is interrupted. It
// needs nothing but Go. The walk-throughs of docs/settle.md and
// docs/adaptive.md use it too: -header adds a response header (the cost a
// backend reports, "X-Tokens-Used: 600"), and -capacity N -work D makes it
// a backend that works D per request on at most N at once, the others
// waiting their turn, so that its latency grows with its load.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"strings"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "the address to listen on")
	header := flag.String("header", "", `a header every response carries, "Name: value"`)
	capacity := flag.Int("capacity", 0, "requests worked on at once, the others waiting (0: no limit, no work)")
	work := flag.Duration("work", 100*time.Millisecond, "with -capacity, the time each request takes")
	flag.Parse()
	name, value, _ := strings.Cut(*header, ":")
	var slots chan struct{}
	if *capacity > 0 {
		slots = make(chan struct{}, *capacity)
	}
	srv := &http.Server{
		Addr: *addr,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slots != nil {
				select {
				case slots <- struct{}{}:
				case <-r.Context().Done():
					return
				}
				time.Sleep(*work) // the backend's work
				<-slots
			}
			if name != "" {
				w.Header().Set(strings.TrimSpace(name), strings.TrimSpace(value))
			}
			fmt.Fprintf(w, "hello from the upstream: %s %s\n", r.Method, r.URL.RequestURI())
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("upstream: listening on http://%s", *addr)
	log.Fatal(srv.ListenAndServe())
}
