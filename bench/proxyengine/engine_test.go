package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/memstore"
)

// rawResponse is the raw upstream's one answer.
const rawResponse = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n"

// rawUpstream is an upstream that answers every request head on a
// keep-alive connection with rawResponse, allocating nothing per request,
// so that a benchmark's allocations are the proxy's. It serves until tb
// ends.
func rawUpstream(tb testing.TB) *url.URL {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if _, err := readHead(br); err != nil {
						return
					}
					if _, err := io.WriteString(c, rawResponse); err != nil {
						return
					}
				}
			}()
		}
	}()
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}
}

// readHead reads an HTTP/1.1 message head from br and returns the value
// of its Content-Length (0 if none).
func readHead(br *bufio.Reader) (int, error) {
	n := 0
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if first {
				continue
			}
			return n, nil
		}
		const cl = "content-length:"
		if len(line) > len(cl) && bytes.EqualFold(line[:len(cl)], []byte(cl)) {
			for _, c := range bytes.TrimSpace(line[len(cl):]) {
				n = n*10 + int(c-'0')
			}
		}
	}
}

// rawClient sends the same GET of path on one keep-alive connection and
// reads each answer, allocating nothing per request.
type rawClient struct {
	c   net.Conn
	br  *bufio.Reader
	req []byte
	buf []byte
}

func dialRaw(tb testing.TB, addr, path string) *rawClient {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	req := "GET " + path + " HTTP/1.1\r\nHost: bench.example\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"
	return &rawClient{c: c, br: bufio.NewReader(c), req: []byte(req), buf: make([]byte, 4096)}
}

// do sends one request and returns the answer's status code.
func (rc *rawClient) do() (int, error) {
	if _, err := rc.c.Write(rc.req); err != nil {
		return 0, err
	}
	status, err := rc.br.Peek(len("HTTP/1.1 200"))
	if err != nil {
		return 0, err
	}
	code := int(status[9]-'0')*100 + int(status[10]-'0')*10 + int(status[11]-'0')
	n, err := readHead(rc.br)
	if err != nil {
		return 0, err
	}
	if n > len(rc.buf) {
		return 0, errors.New("body too large")
	}
	_, err = io.ReadFull(rc.br, rc.buf[:n])
	return code, err
}

// startEngine serves engine (one of main's, or "gateway": sluice's
// gateway with bench/proxy.sh's config) on loopback in front of up, and
// returns its address.
func startEngine(tb testing.TB, engine string, up *url.URL) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	if engine == "gateway" {
		g := sluiceGateway(tb, up)
		go serveHTTP(ln, g)
	} else {
		go serve(engine, ln, up)
	}
	return ln.Addr().String()
}

// sluiceGateway is `sluice proxy`'s gateway with bench/proxy.sh's routes
// (testdata/proxy-routes.yaml).
func sluiceGateway(tb testing.TB, up *url.URL) *gateway.Gateway {
	// From this file's directory, so that a test binary run from
	// elsewhere (bench/callgrind.sh) finds it too.
	_, here, _, _ := runtime.Caller(0)
	routes, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "testdata", "proxy-routes.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	f, err := gateway.ParseFile("proxy-routes.yaml", routes)
	if err != nil {
		tb.Fatal(err)
	}
	store := memstore.New(memstore.Config{})
	tb.Cleanup(func() { store.Close() })
	cfg := f.Config
	cfg.Upstreams = []gateway.Upstream{{Name: "u", URL: up}}
	cfg.Limiter = store
	cfg.Logger = slog.New(slog.DiscardHandler)
	g, err := gateway.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(g.Close)
	return g
}

var engines = []string{"floor", "lean", "fast", "gateway"}

// BenchmarkEngine is one request through each engine over loopback, both
// legs real sockets (a raw client and upstream that allocate nothing), so
// that allocs/op is the proxy's process's own per request: "open"
// forwarded, "limited" almost all refused with 429 ("floor" has no limit
// and forwards them).
func BenchmarkEngine(b *testing.B) {
	for _, engine := range engines {
		for _, path := range []string{"/open/x", "/limited/x"} {
			b.Run(engine+path[:len(path)-2], func(b *testing.B) {
				up := rawUpstream(b)
				addr := startEngine(b, engine, up)
				waitUp(b, addr)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					rc := dialRaw(b, addr, path)
					for pb.Next() {
						code, err := rc.do()
						if err != nil || (code != 200 && code != 429) {
							b.Errorf("status %d, %v", code, err)
							return
						}
					}
				})
			})
		}
	}
}

// waitUp waits until addr accepts connections.
func waitUp(tb testing.TB, addr string) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not come up: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
