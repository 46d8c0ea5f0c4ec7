package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"testing"
	"time"
)

// behaviours are what the gateway's tests pin of its forwarding, each
// checked against one engine in front of a net/http upstream.
var behaviours = []struct {
	name string
	// check returns how engine failed the behaviour; t is for set-up.
	check func(t *testing.T, engine string) error
}{
	{"hop-by-hop headers dropped both ways", checkHopByHop},
	{"X-Forwarded-For is the peer (no proxy trusted)", checkForwardedFor},
	{"1xx (103 Early Hints) passed on", checkEarlyHints},
	{"trailers passed on", checkTrailers},
	{"a streamed response reaches the client before it ends", checkStreaming},
	{"a request body is forwarded whole", checkBody},
	{"an upgrade is tunnelled", checkUpgrade},
}

// lost are the behaviours an engine does not keep, and why; every other
// behaviour must pass, and these must fail (so that the table stays true).
var lost = map[string]map[string]string{
	"fast": {
		"1xx (103 Early Hints) passed on":                       "fasthttp's client skips 1xx responses; its server has no way to send one",
		"a streamed response reaches the client before it ends": "fasthttp reads the upstream's body whole before answering (StreamResponseBody streams without flushing per chunk)",
		"trailers passed on":                                    "the upstream's trailers are read, but the buffered body goes out with a Content-Length, and fasthttp writes trailers only after a chunked body stream",
		"an upgrade is tunnelled":                               "the upgrade reaches the upstream as a plain request (Upgrade is hop-by-hop) and the 101 is not tunnelled; it needs a hijack path of its own",
	},
}

// TestEngineBehaviours checks every engine against every behaviour: the
// ones an engine keeps must pass, the ones lost must fail.
func TestEngineBehaviours(t *testing.T) {
	for _, engine := range []string{"floor", "lean", "fast"} {
		for _, b := range behaviours {
			t.Run(engine+"/"+b.name, func(t *testing.T) {
				err := b.check(t, engine)
				why, isLost := lost[engine][b.name]
				switch {
				case !isLost && err != nil:
					t.Error(err)
				case isLost && err == nil:
					t.Errorf("%s keeps this now (listed as lost: %s): update the table and the ADR", engine, why)
				case isLost:
					t.Logf("lost, as listed (%s): %v", why, err)
				}
			})
		}
	}
}

// through starts engine in front of h and returns its base URL.
func through(t *testing.T, engine string, h http.Handler) string {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	return "http://" + startEngine(t, engine, u)
}

func checkHopByHop(t *testing.T, engine string) error {
	got := make(chan http.Header, 1)
	base := through(t, engine, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("Connection", "X-Up-Hop")
		w.Header().Set("X-Up-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		io.WriteString(w, "ok")
	}))
	req, _ := http.NewRequest("GET", base+"/x", nil)
	req.Header.Set("Connection", "X-Client-Hop")
	req.Header.Set("X-Client-Hop", "1")
	req.Header.Set("Proxy-Authorization", "Basic eDp5")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	h := <-got
	for _, k := range []string{"X-Client-Hop", "Proxy-Authorization"} {
		if v := h.Get(k); v != "" {
			return fmt.Errorf("upstream got %s: %q", k, v)
		}
	}
	for _, k := range []string{"X-Up-Hop", "Keep-Alive"} {
		if v := resp.Header.Get(k); v != "" {
			return fmt.Errorf("client got %s: %q", k, v)
		}
	}
	return nil
}

func checkForwardedFor(t *testing.T, engine string) error {
	got := make(chan string, 1)
	base := through(t, engine, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- strings.Join(r.Header.Values("X-Forwarded-For"), ", ")
	}))
	req, _ := http.NewRequest("GET", base+"/x", nil)
	req.Header.Set("X-Forwarded-For", "192.0.2.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if v := <-got; v != "127.0.0.1" {
		return fmt.Errorf("X-Forwarded-For %q, want the peer alone, 127.0.0.1", v)
	}
	return nil
}

func checkEarlyHints(t *testing.T, engine string) error {
	base := through(t, engine, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "ok")
	}))
	var hints []int
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
		hints = append(hints, code)
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", base+"/x", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if len(hints) != 1 || hints[0] != http.StatusEarlyHints || resp.StatusCode != 200 {
		return fmt.Errorf("1xx %v then %d; want [103] then 200", hints, resp.StatusCode)
	}
	return nil
}

func checkTrailers(t *testing.T, engine string) error {
	base := through(t, engine, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "body")
		w.Header().Set("X-Sum", "42")
	}))
	resp, err := http.Get(base + "/x")
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if v := resp.Trailer.Get("X-Sum"); v != "42" {
		return fmt.Errorf("trailer X-Sum %q, want 42", v)
	}
	return nil
}

func checkStreaming(t *testing.T, engine string) error {
	release := make(chan struct{})
	base := through(t, engine, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-release: // the end comes only after the client saw the start
		case <-time.After(10 * time.Second):
		}
		io.WriteString(w, "second\n")
	}))
	t.Cleanup(func() { close(release) }) // before the upstream closes
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(base + "/x")
	if err != nil {
		return fmt.Errorf("no response while the upstream holds its end: %v", err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if line != "first\n" {
		return fmt.Errorf("first line %q, %v", line, err)
	}
	return nil
}

func checkBody(t *testing.T, engine string) error {
	got := make(chan int, 1)
	base := through(t, engine, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got <- int(n)
	}))
	const size = 256 << 10
	resp, err := http.Post(base+"/x", "application/octet-stream", strings.NewReader(strings.Repeat("a", size)))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if n := <-got; n != size {
		return fmt.Errorf("upstream read %d bytes, want %d", n, size)
	}
	return nil
}

func checkUpgrade(t *testing.T, engine string) error {
	base := through(t, engine, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "no upgrade", http.StatusBadRequest)
			return
		}
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "echo")
		w.WriteHeader(http.StatusSwitchingProtocols)
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, rw)
	}))
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return fmt.Errorf("status %d, want 101", resp.StatusCode)
	}
	io.WriteString(c, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		return fmt.Errorf("through the tunnel: %q, %v", buf, err)
	}
	return nil
}
