package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

// bodySizeProxy is a proxy in front of up with one route, /up, limited to 1
// request per minute, and the body cap max (gateway.Config's
// ClientMaxBodySize).
func bodySizeProxy(t *testing.T, up *upstream, max int64) *httptest.Server {
	t.Helper()
	cfg := parsed(t, `
limits:
  - {name: once, key: ip, rate: 1r/m}
routes:
  - {name: up, match: /up, limits: [once]}
`, up)
	cfg.ClientMaxBodySize = max
	srv := httptest.NewServer(newGateway(t, cfg))
	t.Cleanup(srv.Close)
	return srv
}

// rawPost sends a POST of /up with the header lines hdr and body on a
// connection of its own; it returns the response (its body read) and
// whether the proxy closed the connection after it.
func rawPost(t *testing.T, srv *httptest.Server, hdr, body string) (*http.Response, string, bool) {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	go io.WriteString(c, "POST /up HTTP/1.1\r\nHost: app.test\r\n"+hdr+"\r\n"+body)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	// A connection kept alive would answer this second request.
	io.WriteString(c, "GET /other HTTP/1.1\r\nHost: app.test\r\n\r\n")
	_, err = http.ReadResponse(br, nil)
	return resp, string(b), err != nil
}

// client_max_body_size (NGINX's, 1m by default): a body announced larger
// by its Content-Length is refused with 413 before it is read and before
// the route's limits, so it is charged nothing and reaches no upstream; a
// chunked body is refused with 413 once it grows past the cap, and the
// connection is closed (the rest is not read).
func TestClientMaxBodySize(t *testing.T) {
	const mib = 1 << 20
	t.Run("content-length", func(t *testing.T) {
		up := newUpstream(t)
		srv := bodySizeProxy(t, up, 0) // the default, 1m
		resp, body, closed := rawPost(t, srv, fmt.Sprintf("Content-Length: %d\r\n", mib+1), "")
		if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get("Content-Type") != "application/problem+json" || !closed {
			t.Errorf("Content-Length 1m+1: %d %q %q, closed %v; want 413 problem+json, closed", resp.StatusCode, resp.Header.Get("Content-Type"), body, closed)
		}
		if up.hits.Load() != 0 {
			t.Errorf("the upstream saw %d requests", up.hits.Load())
		}
		// Nothing charged: the one request a minute is still there.
		resp, _, _ = rawPost(t, srv, "Content-Length: 2\r\n", "ok")
		if resp.StatusCode != 200 {
			t.Errorf("a small POST after the 413: %d, want 200 (the 413 was charged)", resp.StatusCode)
		}
	})
	for _, n := range []int{1000, 100 << 10} { // read ahead whole, and streamed past the read-ahead buffer
		t.Run(fmt.Sprintf("chunked-%d", n), func(t *testing.T) {
			up := newUpstream(t)
			up.set(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
			srv := bodySizeProxy(t, up, int64(n-1))
			chunk := strings.Repeat("x", n)
			resp, body, closed := rawPost(t, srv, "Transfer-Encoding: chunked\r\n", fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(chunk), chunk))
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "client_max_body_size") || !closed {
				t.Errorf("chunked %d bytes over a cap of %d: %d %q, closed %v; want 413 naming client_max_body_size, closed", n, n-1, resp.StatusCode, body, closed)
			}
		})
	}
	t.Run("disabled", func(t *testing.T) {
		up := newUpstream(t)
		up.set(func(w http.ResponseWriter, r *http.Request) {
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				t.Errorf("the upstream reading the body: %v", err)
			}
			fmt.Fprint(w, n)
		})
		srv := bodySizeProxy(t, up, -1)
		resp, body, _ := rawPost(t, srv, fmt.Sprintf("Content-Length: %d\r\n", 2*mib), strings.Repeat("x", 2*mib))
		if resp.StatusCode != 200 || body != fmt.Sprint(2*mib) {
			t.Errorf("no cap, 2m: %d %q", resp.StatusCode, body)
		}
	})
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1": 1, "512k": 512 << 10, "1m": 1 << 20, "10M": 10 << 20, "2g": 2 << 30, "1048576": 1 << 20} {
		if got, err := gateway.ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "m", "-1", "+1", "1.5m", "1mb", "1t", " 1m", "9999999999g"} {
		if got, err := gateway.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

// The proxy file's client_max_body_size is NGINX's: a size such as 10k or
// 1m, 0 for no cap; anything else is refused with its line.
func TestFileClientMaxBodySize(t *testing.T) {
	for in, want := range map[string]int64{"10k": 10 << 10, "2m": 2 << 20, "0": -1} {
		f, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://127.0.0.1:1\nclient_max_body_size: "+in+"\n"))
		if err != nil || f.Config.ClientMaxBodySize != want {
			t.Errorf("client_max_body_size: %s: %v, %v; want %d", in, f, err, want)
		}
	}
	f, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://127.0.0.1:1\n"))
	if err != nil || f.Config.ClientMaxBodySize != 0 {
		t.Errorf("no client_max_body_size: %v, %v; want 0 (the default)", f, err)
	}
	if _, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://127.0.0.1:1\nclient_max_body_size: 1mb\n")); err == nil || !strings.Contains(err.Error(), "proxy.yaml:2:") {
		t.Errorf("client_max_body_size: 1mb: %v, want an error at proxy.yaml:2", err)
	}
}

// log_key_secret_file names the file of the secret that keys' hashes in
// logs are keyed with (the program reads it, see sluice proxy).
func TestFileLogKeySecretFile(t *testing.T) {
	f, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://127.0.0.1:1\nlog_key_secret_file: /run/secrets/log-key\n"))
	if err != nil || f.LogKeySecretFile != "/run/secrets/log-key" {
		t.Errorf("log_key_secret_file: %v, %v", f, err)
	}
}
