// Command upstream is the tiny upstream of the walk-through of
// docs/proxy.md: it answers every request with 200 and a line naming the
// request, on -addr (default 127.0.0.1:9000), until it is interrupted. It
// needs nothing but Go.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "the address to listen on")
	flag.Parse()
	srv := &http.Server{
		Addr: *addr,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello from the upstream: %s %s\n", r.Method, r.URL.RequestURI())
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("upstream: listening on http://%s", *addr)
	log.Fatal(srv.ListenAndServe())
}
