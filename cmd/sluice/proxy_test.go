package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testlog"
)

// proxyRun is a `sluice proxy` running in the test.
type proxyRun struct {
	*server
	admin string
}

// launchProxy starts `sluice proxy args` on free loopback ports and waits
// for its addresses.
func launchProxy(t *testing.T, args ...string) *proxyRun {
	t.Helper()
	listen := regexp.MustCompile(`listening  (http://\S+)`)
	admin := regexp.MustCompile(`admin      (http://\S+)`)
	var url, adminURL string
	s := startCmd(t, runProxy, append([]string{"-listen", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0"}, args...), func(out string) bool {
		m, a := listen.FindStringSubmatch(out), admin.FindStringSubmatch(out)
		if m == nil || a == nil {
			// With LOG_FORMAT=json the banner is a JSON line.
			var b struct{ Listen, Admin string }
			for l := range strings.SplitSeq(out, "\n") {
				if json.Unmarshal([]byte(l), &b) == nil && b.Listen != "" {
					url, adminURL = b.Listen, b.Admin
					return true
				}
			}
			return false
		}
		url, adminURL = m[1], a[1]
		return true
	})
	s.url = url
	return &proxyRun{server: s, admin: adminURL}
}

// holdingUpstream starts an upstream that answers 200 at once, but for
// requests for path, which it holds: each sends on entered (buffered for
// capacity of them) as it arrives and is answered once release is called.
// After release nothing is held; release may be called more than once. A
// test calls it before the proxies in front stop, so that they need not
// wait for held requests; the upstream closes when the test ends.
func holdingUpstream(t *testing.T, path string, capacity int) (url string, entered <-chan struct{}, release func()) {
	t.Helper()
	in, out := make(chan struct{}, capacity), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path {
			in <- struct{}{}
			<-out
		}
	}))
	var once sync.Once
	release = func() { once.Do(func() { close(out) }) }
	t.Cleanup(func() {
		release()
		up.Close()
	})
	return up.URL, in, release
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// proxyCfg's per_ip is a token bucket of 2 an hour, which refills one
// request in 30 minutes: a fixed window of a minute let a test that
// crossed the minute's turn through again.
const proxyCfg = `
limits:
  - {name: per_ip, key: ip, rate: 2r/h, algorithm: token_bucket}
routes:
  - {name: api, match: /api/, limits: [per_ip]}
`

// The proxy end to end: limits apply on their route only, the upstream
// sees only what was admitted, the access log and the metrics say so,
// and a reload (file change and SIGHUP) swaps the limits while a bad one
// is refused with file:line.
func TestProxy(t *testing.T) {
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "hello")
	}))
	defer up.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.yaml")
	writeFile(t, cfg, proxyCfg)
	p := launchProxy(t, "-config", cfg, "-upstream", up.URL)
	var codes []int
	for range 3 {
		codes = append(codes, getStatus(t, p.url+"/api/x"))
	}
	if !slices.Equal(codes, []int{200, 200, 429}) {
		t.Fatalf("codes %v", codes)
	}
	if getStatus(t, p.url+"/other") != 200 || hits.Load() != 3 {
		t.Fatalf("unrouted path limited, or upstream saw %d (want 3)", hits.Load())
	}
	if !strings.Contains(p.stderr.String(), `"GET /api/x HTTP/1.1" 429 `) {
		t.Fatalf("no access log line: %s", p.stderr.String())
	}
	_, b := call(t, http.MethodGet, p.admin+"/metrics", "", nil)
	if !strings.Contains(string(b), `sluice_proxy_requests_total{outcome="rejected",route="api"} 1`) ||
		!strings.Contains(string(b), `sluice_http_decisions_total{outcome="rejected",policy="per_ip"} 1`) {
		t.Fatalf("metrics:\n%s", b)
	}

	// A broken config is refused, with its line, and the limits stay.
	writeFile(t, cfg, proxyCfg+"  - {name: bad, match: \"GET /{\"}\n")
	eventually(t, "the failed reload is logged", func() bool {
		return strings.Contains(p.stderr.String(), "proxy.yaml:6:")
	})
	if getStatus(t, p.url+"/api/x") != 429 {
		t.Fatal("the running config was not kept")
	}
	// A good one applies on SIGHUP too (the watcher may also see it).
	writeFile(t, cfg, "routes: []\n")
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	eventually(t, "the new config applies", func() bool { return getStatus(t, p.url+"/api/x") == 200 })
}

// A malformed config at start-up is a clear exit with file:line; an
// unreachable upstream only a warning.
func TestProxyStartup(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bad.yaml")
	os.WriteFile(cfg, []byte("upstream: http://127.0.0.1:1\nlimits:\n  - {name: a, key: ip, rate: 1r/s, burst: 0}\n"), 0o644)
	var out, errb testlog.Buffer
	if code := runProxy(context.Background(), []string{"-config", cfg, "-listen", "127.0.0.1:0", "-admin-addr", ""}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(errb.String(), "bad.yaml:3:") || !strings.Contains(errb.String(), "burst") {
		t.Fatalf("stderr %q", errb.String())
	}

	p := launchProxy(t, "-upstream", "http://127.0.0.1:1")
	if !strings.Contains(p.stderr.String(), "upstream unreachable at start-up") {
		t.Fatalf("no warning: %s", p.stderr.String())
	}
	if c := getStatus(t, p.url+"/"); c != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", c)
	}
}

// Graceful shutdown: a request queued when the proxy is told to stop is
// still answered.
func TestProxyGracefulShutdown(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "q.yaml")
	// 20r/m with burst 1: the second request waits 3 s, so that it is
	// queued however late it comes under load (at 5r/s it waited 200 ms,
	// and a second request sent later than that was not queued at all).
	os.WriteFile(cfg, []byte("limits: [{name: q, key: global, rate: 20r/m, burst: 1}]\nroutes: [{name: all, match: /, limits: [q]}]\n"), 0o644)
	p := launchProxy(t, "-config", cfg, "-upstream", up.URL)
	if getStatus(t, p.url+"/") != 200 {
		t.Fatal("first")
	}
	var wg sync.WaitGroup
	var code atomic.Int64
	wg.Go(func() { code.Store(int64(getStatus(t, p.url+"/"))) })
	eventually(t, "the second request is queued", func() bool {
		resp, err := http.Get(p.admin + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `sluice_http_decisions_total{outcome="delayed",policy="q"} 1`)
	})
	p.cancel()
	wg.Wait()
	if code.Load() != 200 {
		t.Fatalf("the queued request got %d during shutdown, want 200", code.Load())
	}
}

// -h2c: HTTP/2 without TLS, with the limit_conn rule counting each stream
// of one connection (NGINX case 62 over h2c).
func TestProxyH2C(t *testing.T) {
	upURL, entered, release := holdingUpstream(t, "/slow", 0)
	defer release()
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte("conn_status: 503\nconns: [{name: c, key: ip, max: 1}]\nroutes: [{name: all, match: /, conns: [c]}]\n"), 0o644)
	p := launchProxy(t, "-config", cfg, "-upstream", upURL, "-h2c")
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	done := make(chan int, 1)
	go func() {
		resp, err := c.Get(p.url + "/slow")
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-entered
	resp, err := c.Get(p.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	release()
	if resp.ProtoMajor != 2 || resp.StatusCode != 503 {
		t.Fatalf("second stream: %s %d, want HTTP/2 503", resp.Proto, resp.StatusCode)
	}
	if code := <-done; code != 200 {
		t.Fatalf("first stream: %d", code)
	}
}

// -check validates like nginx -t: 0 and the routes, or 1 and file:line.
func TestProxyCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("upstream: http://127.0.0.1:1\nlimits: [{name: a, key: ip, rate: 1r/s, burst: 5, delay: 2}]\nroutes: [{name: r, match: /a/, limits: [a]}]\n"), 0o644)
	var out, errb testlog.Buffer
	if code := runProxy(context.Background(), []string{"-check", "-config", good}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "limit a: queue 1 per 1s, burst 5, delay=2") {
		t.Fatalf("output %q", out.String())
	}
	// The body's least rate is a timeout like the others: -check shows it.
	if !strings.Contains(out.String(), "client_body 1m0s (min rate 1024 B/s)") {
		t.Errorf("output %q does not show the default client_body_min_rate", out.String())
	}
	var off testlog.Buffer
	if code := runProxy(context.Background(), []string{"-check", "-config", good, "-client-body-min-rate", "0"}, &off, &errb); code != 0 || !strings.Contains(off.String(), "(min rate off)") {
		t.Errorf("-client-body-min-rate 0: exit %d, output %q", code, off.String())
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("upstream: http://127.0.0.1:1\nstatus: 600\n"), 0o644)
	if code := runProxy(context.Background(), []string{"-check", "-config", bad}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "bad.yaml:2:") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// SIGUSR1 reopens the access log file, as `nginx -s reopen` does: after
// the file is moved away, refusals go to a new file at the path.
func TestProxyReopenAccessLog(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "p.yaml")
	logPath := filepath.Join(dir, "access.log")
	os.WriteFile(cfg, []byte("limits: [{name: l, key: global, rate: 1r/h, algorithm: token_bucket}]\nroutes: [{name: all, match: /, limits: [l]}]\n"), 0o644)
	p := launchProxy(t, "-config", cfg, "-upstream", up.URL, "-access-log", logPath)
	getStatus(t, p.url+"/")
	if getStatus(t, p.url+"/first") != 429 {
		t.Fatal("not limited")
	}
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	eventually(t, "the access log is reopened", func() bool {
		_, err := os.Stat(logPath)
		return err == nil
	})
	if getStatus(t, p.url+"/second") != 429 {
		t.Fatal("not limited")
	}
	eventually(t, "the new file gets the second refusal", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "GET /second")
	})
	old, _ := os.ReadFile(logPath + ".1")
	if !strings.Contains(string(old), "GET /first") || strings.Contains(string(old), "GET /second") {
		t.Fatalf("rotated file %q", old)
	}
}

// The slow-body attack on the real proxy over TCP: five clients send a
// POST's header and one byte of a 1000-byte body and stall, against
// max_in_flight: 5. While they stall, a normal request is served, and the
// upstream sees none of them; each ends with 408 once its body has stalled
// for client_body_timeout.
func TestProxySlowBodies(t *testing.T) {
	t.Parallel() // waits on processes and timers; touches no process-wide state
	up, hits := discardingUpstream(t)
	cfg := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(cfg, []byte("max_in_flight: 5\n"), 0o644)
	const bodyTimeout = time.Second
	p := launchProxy(t, "-config", cfg, "-upstream", up.URL, "-client-body-timeout", bodyTimeout.String())
	host := strings.TrimPrefix(p.url, "http://")
	start := time.Now()
	type answer struct {
		code    int
		elapsed time.Duration
	}
	answers := make(chan answer, 5)
	for range 5 {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\nx", host)
		go func() {
			c.SetReadDeadline(time.Now().Add(bodyTimeout + 10*time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answers <- answer{}
				return
			}
			resp.Body.Close()
			answers <- answer{resp.StatusCode, time.Since(start)}
		}()
	}
	// The five are inside the proxy: reading their bodies (or, before the
	// fix, forwarded to the upstream).
	eventually(t, "the slow requests are in", func() bool {
		return metric(t, p.admin, "sluice_proxy_reading_body") == 5 || hits.Load() == 5
	})
	if code := getStatus(t, p.url+"/normal"); code != http.StatusOK {
		t.Errorf("a normal request beside five stalled bodies: %d, want 200", code)
	}
	for range 5 {
		a := <-answers
		if a.code != http.StatusRequestTimeout {
			t.Errorf("stalled body: status %d, want 408", a.code)
		} else if a.elapsed < bodyTimeout || a.elapsed > bodyTimeout+5*time.Second {
			t.Errorf("stalled body answered after %v, want about client_body_timeout %v", a.elapsed, bodyTimeout)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the upstream saw %d requests, want 1", n)
	}
	if !strings.Contains(p.stderr.String(), `"POST /upload HTTP/1.1" 408 `) {
		t.Errorf("no access log line for the 408: %s", p.stderr.String())
	}
}

// A config that is not a regular file (a FIFO, which os.ReadFile waits on
// forever) is refused at once with its name.
func TestProxyRefusesAFIFOConfig(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "proxy.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFO here:", err)
	}
	var out, errb testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runProxy(context.Background(), []string{"-check", "-config", fifo}, &out, &errb)
	}()
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(errb.String(), "proxy.yaml") || !strings.Contains(errb.String(), "not a regular file") {
			t.Fatalf("exit %d, stderr %q", code, errb.String())
		}
	case <-time.After(5 * time.Second):
		// Unblock the reader so that the goroutine ends.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("the proxy was still reading a FIFO after 5 s")
	}
}

// One line per refusal, without the API key it was keyed by: the access
// log's, or with -access-log off the log's, never both.
func TestProxyRefusalLoggedOnceWithoutKey(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	cfg := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(cfg, []byte(`limits: [{name: k, key: "header:X-Api-Key", rate: 1r/h, algorithm: token_bucket}]
routes: [{name: all, match: /, limits: [k]}]
`), 0o644)
	for _, off := range []bool{false, true} {
		args := []string{"-config", cfg, "-upstream", up.URL}
		if off {
			args = append(args, "-access-log", "off")
		}
		p := launchProxy(t, args...)
		for i, want := range []int{200, 429} {
			req, _ := http.NewRequest("GET", p.url+"/x", nil)
			req.Header.Set("X-Api-Key", "sk_live_SECRET")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Fatalf("access log off %v, request %d: %d, want %d", off, i+1, resp.StatusCode, want)
			}
		}
		p.stop(t)
		log := p.stderr.String()
		access := strings.Count(log, `" 429 `)
		slogLines := strings.Count(log, "httplimit: refused")
		if access+slogLines != 1 || (off && slogLines != 1) || strings.Contains(log, "sk_live_SECRET") {
			t.Errorf("access log off %v: %d access lines, %d log lines (want one line in all), key shown %v:\n%s",
				off, access, slogLines, strings.Contains(log, "sk_live_SECRET"), log)
		}
	}
}

// -max-conns caps the client connections: with a cap of 1, a second
// connection waits while the first is busy (its request at the upstream),
// and takes its place as soon as the first is idle between keep-alive
// requests, without waiting for -keepalive-timeout: clients that open
// connections and leave them idle cannot hold the proxy (as NGINX reuses
// idle keep-alive connections when worker_connections run out).
func TestProxyMaxConns(t *testing.T) {
	upURL, entered, release := holdingUpstream(t, "/first", 1)
	defer release()
	p := launchProxy(t, "-upstream", upURL, "-max-conns", "1", "-keepalive-timeout", "1h")
	host := strings.TrimPrefix(p.url, "http://")
	first, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	fmt.Fprintf(first, "GET /first HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	<-entered // the first connection is accepted and busy
	done := make(chan int, 1)
	go func() {
		tr := &http.Transport{DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(p.url + "/second")
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case code := <-done:
		t.Fatalf("a second connection was served (%d) while the first was busy", code)
	case <-time.After(200 * time.Millisecond):
	}
	release() // the first is answered, then idle
	resp, err := http.ReadResponse(bufio.NewReader(first), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v %v", resp, err)
	}
	resp.Body.Close()
	if code := <-done; code != 200 {
		t.Fatalf("second, once the first was idle: %d, want 200", code)
	}
	first.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := first.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the idle first connection is still open (%d, %v), want it closed for the second", n, err)
	}
}

// A log written into the watched config directory does not feed itself:
// with -log-level debug and stderr a file beside the config, each line
// the watcher logged about a change to a file that is not the config was
// itself such a change, and the log grew without end (tens of thousands
// of lines a second).
func TestProxyDebugLogInConfigDirDoesNotFeedItself(t *testing.T) {
	t.Parallel() // waits on processes and timers; touches no process-wide state
	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.yaml")
	writeAtomic(t, cfg, proxyCfg)
	logf, err := os.Create(filepath.Join(dir, "sluice.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var out testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runProxy(ctx, []string{"-listen", "127.0.0.1:0", "-admin-addr", "", "-log-level", "debug", "-config", cfg, "-upstream", up.URL}, &out, logf)
	}()
	for !strings.Contains(out.String(), "listening") {
		time.Sleep(10 * time.Millisecond) // polling for start-up
	}
	time.Sleep(200 * time.Millisecond) // for the watch to be set up
	io.WriteString(logf, "one write beside the config\n")
	time.Sleep(time.Second) // the log's own growth is what is measured
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d", code)
	}
	b, _ := os.ReadFile(logf.Name())
	if n := strings.Count(string(b), "\n"); n > 100 {
		t.Errorf("the log has %d lines after a second of idling; it feeds itself:\n%.600s", n, b)
	}
}

// discardingUpstream is an upstream, closed when the test ends, that reads
// and discards each request's body and counts the requests in hits.
func discardingUpstream(t *testing.T) (up *httptest.Server, hits *atomic.Int64) {
	t.Helper()
	hits = new(atomic.Int64)
	up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(up.Close)
	return up, hits
}

// The file's top-level path_semantics is the upstream's that -upstream
// gives when the file names none, and -check shows it: the upstream made
// from the flag would otherwise read paths strictly, and /LOGIN dodge
// /login's limit in front of an IIS server.
func TestProxyUpstreamFlagTakesTheFilesPathSemantics(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(cfg, []byte("path_semantics: iis\nroutes: [{name: login, match: /login}]\n"), 0o644)
	var out, errb testlog.Buffer
	if code := runProxy(context.Background(), []string{"-check", "-config", cfg, "-upstream", "http://127.0.0.1:1"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "upstream upstream http://127.0.0.1:1 path_semantics=iis") {
		t.Errorf("-check output %q; want the -upstream upstream with path_semantics=iis", out.String())
	}
}

// With LOG_FORMAT=json every line the proxy prints is a JSON object with
// @timestamp and @message: the start-up banner on stdout (naming the
// listener and admin URLs), and on stderr the log and the access log of a
// refused request. Before, the banner was plain text lines.
func TestProxyLinesAreJSONWithJSONLogs(t *testing.T) {
	t.Setenv("LOG_FORMAT", "json")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer up.Close()
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	writeFile(t, cfg, proxyCfg)
	p := launchProxy(t, "-config", cfg, "-upstream", up.URL)
	for range 3 {
		getStatus(t, p.url+"/api/x")
	}
	eventually(t, "the refused request's access line", func() bool { return strings.Contains(p.stderr.String(), `"outcome":"REJECTED"`) })
	if !strings.Contains(p.stdout.String(), `"listen":"http://`) {
		t.Errorf("the banner names no listen URL: %q", p.stdout.String())
	}
	for what, out := range map[string]string{"stdout": p.stdout.String(), "stderr": p.stderr.String()} {
		out = strings.TrimSpace(out)
		if out == "" {
			t.Errorf("nothing on %s", what)
		}
		for l := range strings.SplitSeq(out, "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Errorf("a line on %s that is not JSON: %q: %v", what, l, err)
				continue
			}
			if m["@timestamp"] == nil || m["@message"] == nil {
				t.Errorf("a line on %s without @timestamp or @message: %q", what, l)
			}
		}
	}
	if _, b := call(t, http.MethodGet, p.admin+"/healthcheck", "", nil); string(b) != "OK\n" {
		t.Errorf("GET /healthcheck at the banner's admin URL: %q", b)
	}
}

// The proxy's store logs on the proxy's log: with LOG_FORMAT=json the
// warning that Redis cannot be reached at start-up is a JSON line on the
// proxy's stderr, as every other line is. Before, the store was opened
// with slog's default logger, so the line went to the process's standard
// logger in its own format ("2026/12/02 16:44:11 WARN ..."), JSON asked
// for or not.
func TestProxyStoreLogsOnTheProxysLog(t *testing.T) {
	t.Setenv("LOG_FORMAT", "json")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer up.Close()
	p := launchProxy(t, "-upstream", up.URL, "-store", "redis://127.0.0.1:1/0", "-failure-mode", "open")
	eventually(t, "the store's warning on the proxy's log", func() bool {
		return strings.Contains(p.stderr.String(), "rate limit store unreachable")
	})
	for l := range strings.SplitSeq(strings.TrimSpace(p.stderr.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["@message"] == nil {
			t.Errorf("a line on stderr that is not the log's JSON: %q", l)
		}
	}
}
