package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/ratelimitenv"
	"github.com/sluicehq/sluice/internal/testlog"
)

// Two configs for domain d that answer a request for k differently, whatever
// came before: blocked (429) and unlimited (200).
const (
	cfgBlocked   = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 0\n"
	cfgUnlimited = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n"
	// cfgBroken has an unknown key on line 5.
	cfgBroken = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requets_per_unit: 1\n"
	reqK      = `{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`
)

// server is a `sluice serve` (or proxy) running in the test.
type server struct {
	url    string // the HTTP base URL
	grpc   string // serve's gRPC target
	debug  string // what serve's banner says of its debug listener
	stderr *testlog.Buffer
	stdout *testlog.Buffer // what it printed: its banner
	cancel context.CancelFunc
	done   chan int // receives the exit code
}

// The lines of serve's banner that launch reads.
var (
	bannerHTTP  = regexp.MustCompile(`HTTP  (http://\S+)`)
	bannerGRPC  = regexp.MustCompile(`gRPC  (\S+)`)
	bannerDebug = regexp.MustCompile(`debug (.+)\n`)
)

// launch starts `sluice serve args` on free loopback ports and waits for
// its banner's HTTP, gRPC and debug lines; the caller stops it (see stop),
// or the test's end does.
func launch(t *testing.T, args ...string) *server {
	t.Helper()
	return launchRun(t, runServe, args...)
}

// launchRun is launch with run in place of runServe (to give it another
// stderr, say).
func launchRun(t *testing.T, run func(context.Context, []string, io.Writer, io.Writer) int, args ...string) *server {
	t.Helper()
	var url, grpcTarget, debug string
	s := startCmd(t, run, append([]string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, args...), func(out string) bool {
		h, g, d := bannerHTTP.FindStringSubmatch(out), bannerGRPC.FindStringSubmatch(out), bannerDebug.FindStringSubmatch(out)
		if h == nil || g == nil || d == nil {
			// With LOG_FORMAT=json the banner is a JSON line.
			var b struct{ HTTP, GRPC, Debug string }
			for l := range strings.SplitSeq(out, "\n") {
				if json.Unmarshal([]byte(l), &b) == nil && b.HTTP != "" {
					url, grpcTarget, debug = b.HTTP, b.GRPC, b.Debug
					return true
				}
			}
			return false
		}
		url, grpcTarget, debug = h[1], g[1], d[1]
		return true
	})
	s.url, s.grpc, s.debug = url, grpcTarget, debug
	return s
}

// startCmd runs a command's run function with args until the test ends,
// and waits until ready accepts what it printed on stdout.
func startCmd(t *testing.T, run func(context.Context, []string, io.Writer, io.Writer) int, args []string, ready func(stdout string) bool) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &testlog.Buffer{}
	s := &server{stderr: &testlog.Buffer{}, stdout: out, cancel: cancel, done: make(chan int, 1)}
	go func() { s.done <- run(ctx, args, out, s.stderr) }()
	t.Cleanup(func() { s.stop(t) })
	deadline := time.Now().Add(10 * time.Second)
	for !ready(out.String()) {
		select {
		case code := <-s.done:
			s.done <- code
			t.Fatalf("exited %d: %s", code, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("printed no address: %q %q", out.String(), s.stderr.String())
		}
		time.Sleep(10 * time.Millisecond) // polling for start-up
	}
	return s
}

// stop cancels the server and checks that it exits 0 within 15 seconds;
// calling it again is a no-op.
func (s *server) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case code, ok := <-s.done:
		if ok && code != 0 {
			t.Errorf("serve exited %d: %s", code, s.stderr.String())
		}
		if ok {
			close(s.done)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("serve did not stop: %s", s.stderr.String())
	}
}

// metric returns the value of the unlabelled metric name at /metrics, or
// -1 when it is missing.
func metric(t *testing.T, url, name string) float64 {
	t.Helper()
	_, b := call(t, http.MethodGet, url+"/metrics", "", nil)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// configMap lays out dir as the kubelet lays out a mounted ConfigMap: the
// files are in a timestamped ..YYYY_MM_DD_… directory, ..data links to it,
// and each key is a symlink ..data/key in dir.
type configMap struct {
	t   *testing.T
	dir string
	n   int
}

func newConfigMap(t *testing.T, dir string, files map[string]string) *configMap {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &configMap{t: t, dir: dir}
	c.update(files)
	return c
}

// update publishes files as the kubelet's atomic writer does: a new data
// directory, a ..data_tmp symlink to it renamed over ..data, symlinks for
// new keys, then the old data directory removed.
func (c *configMap) update(files map[string]string) {
	t := c.t
	t.Helper()
	c.n++
	data := fmt.Sprintf("..2026_11_30_12_00_00.%09d", c.n)
	if err := os.Mkdir(filepath.Join(c.dir, data), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		writeFile(t, filepath.Join(c.dir, data, name), body)
	}
	old, _ := os.Readlink(filepath.Join(c.dir, "..data"))
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(data, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(c.dir, name)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(c.dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// status POSTs body to /json with client and returns the status code.
func status(client *http.Client, url, body string) (int, error) {
	resp, err := client.Post(url+"/json", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// A config directory mounted from a ConfigMap: serve reloads by itself when
// the ..data symlink is swapped, and a broken update keeps the running
// config, logs file:line and counts a failure.
func TestServeWatchConfigMap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config")
	cm := newConfigMap(t, dir, map[string]string{"rl.yaml": cfgBlocked})
	s := launch(t, "-config", dir)
	if got := post(t, s.url, reqK); got != 429 {
		t.Fatalf("blocked config: %d", got)
	}

	cm.update(map[string]string{"rl.yaml": cfgUnlimited})
	eventually(t, "the unlimited config after a ..data swap", func() bool { return post(t, s.url, reqK) == 200 })
	if got := metric(t, s.url, "sluice_config_reloads_total"); got != 1 {
		t.Errorf("sluice_config_reloads_total = %v, want 1", got)
	}
	if got := metric(t, s.url, "sluice_config_last_reload_success_timestamp_seconds"); got < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("sluice_config_last_reload_success_timestamp_seconds = %v", got)
	}

	cm.update(map[string]string{"rl.yaml": cfgBroken})
	eventually(t, "a reload failure counted", func() bool { return metric(t, s.url, "sluice_config_reload_failures_total") == 1 })
	if got := post(t, s.url, reqK); got != 200 {
		t.Errorf("after a broken update the unlimited config should run: %d", got)
	}
	if got := metric(t, s.url, "sluice_config_last_reload_successful"); got != 0 {
		t.Errorf("sluice_config_last_reload_successful = %v, want 0", got)
	}
	if e := s.stderr.String(); !strings.Contains(e, "keeping the running config") || !strings.Contains(e, filepath.Join(dir, "rl.yaml")+":5:") {
		t.Errorf("the failure is not logged with file:line: %s", e)
	}

	// A new key in the ConfigMap, a second domain, is picked up too.
	cm.update(map[string]string{"rl.yaml": cfgBlocked, "e.yaml": strings.Replace(cfgBlocked, "domain: d", "domain: e", 1)})
	eventually(t, "the blocked config again, with domain e from the new key", func() bool {
		return post(t, s.url, reqK) == 429 && post(t, s.url, strings.Replace(reqK, `"d"`, `"e"`, 1)) == 429
	})
	// Two when the update is one burst of events, as it is unless the
	// test stalls between the ..data swap and the new key's symlink.
	if got := metric(t, s.url, "sluice_config_reloads_total"); got < 2 || got > 3 {
		t.Errorf("sluice_config_reloads_total = %v, want 2", got)
	}
}

// A single config file: written in place, and replaced by a rename, as
// editors do; both reload.
func TestServeWatchFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rl.yaml")
	writeFile(t, path, cfgBlocked)
	s := launch(t, "-config", path)
	if got := post(t, s.url, reqK); got != 429 {
		t.Fatalf("blocked config: %d", got)
	}
	writeFile(t, path, cfgUnlimited)
	eventually(t, "the unlimited config after a write", func() bool { return post(t, s.url, reqK) == 200 })
	tmp := filepath.Join(dir, ".rl.yaml.swp")
	writeFile(t, tmp, cfgBlocked)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the blocked config after a rename", func() bool { return post(t, s.url, reqK) == 429 })
}

// envoyproxy/ratelimit's layout from the environment, with RUNTIME_ROOT a
// symlink swapped atomically (RUNTIME_WATCH_ROOT's default): serve loads
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY and reloads on the
// swap.
func TestServeWatchRuntimeRoot(t *testing.T) {
	base := t.TempDir()
	for v, cfg := range map[string]string{"v1": cfgBlocked, "v2": cfgUnlimited} {
		d := filepath.Join(base, v, "ratelimit", "config")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(d, "rl.yaml"), cfg)
	}
	current := filepath.Join(base, "current")
	if err := os.Symlink("v1", current); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RUNTIME_ROOT", current)
	t.Setenv("RUNTIME_SUBDIRECTORY", "ratelimit")
	t.Setenv("RUNTIME_APPDIRECTORY", "config")
	t.Setenv("RUNTIME_WATCH_ROOT", "true")
	s := launch(t)
	if got := post(t, s.url, reqK); got != 429 {
		t.Fatalf("v1, blocked: %d", got)
	}
	tmp := filepath.Join(base, "current_tmp")
	if err := os.Symlink("v2", tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, current); err != nil {
		t.Fatal(err)
	}
	eventually(t, "v2, unlimited, after the root swap", func() bool { return post(t, s.url, reqK) == 200 })
}

// The reload storm: 100 reloads, alternating two configs (each published
// as a ConfigMap update, which the watcher sees, and each followed by a
// SIGHUP), while 8 clients keep asking. No request fails, every reload
// succeeds, and once serve has stopped no goroutine is left behind.
func TestServeReloadStorm(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		// signal.Notify's runtime goroutine lives as long as the process.
		goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreAnyFunction("os/signal.loop"))
	dir := filepath.Join(t.TempDir(), "config")
	cm := newConfigMap(t, dir, map[string]string{"rl.yaml": cfgBlocked})
	s := launch(t, "-config", dir)

	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	var (
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		requests atomic.Int64
		mu       sync.Mutex
		failures []string
	)
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := reqK
				if i%2 == 1 { // a descriptor the configs do not know: 200
					body = fmt.Sprintf(`{"domain":"d","descriptors":[{"entries":[{"key":"other","value":"%d-%d"}]}]}`, g, i)
				}
				code, err := status(client, s.url, body)
				requests.Add(1)
				if err != nil || code != 200 && code != 429 {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%d %v", code, err))
					mu.Unlock()
				}
			}
		})
	}

	reloaded := func() int { return strings.Count(s.stderr.String(), "msg=reloaded ") }
	for i := range 100 {
		cfg := cfgUnlimited
		if i%2 == 1 {
			cfg = cfgBlocked
		}
		cm.update(map[string]string{"rl.yaml": cfg})
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("reload %d", i+1), func() bool { return reloaded() >= i+1 })
	}
	// The last config, blocked, is the one running once all is quiet.
	eventually(t, "the last config", func() bool {
		code, err := status(client, s.url, reqK)
		return err == nil && code == 429
	})
	close(stop)
	wg.Wait()

	if n := requests.Load(); n < 100 {
		t.Errorf("only %d requests during the storm", n)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed, e.g. %v", len(failures), requests.Load(), failures[:min(5, len(failures))])
	}
	if got := metric(t, s.url, "sluice_config_reload_failures_total"); got != 0 {
		t.Errorf("sluice_config_reload_failures_total = %v: %s", got, s.stderr.String())
	}
	if got := metric(t, s.url, "sluice_config_reloads_total"); got < 100 {
		t.Errorf("sluice_config_reloads_total = %v, want at least 100", got)
	}
	s.stop(t)
	tr.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	t.Logf("%d requests, %d reloads", requests.Load(), reloaded())
}

// Cancelling serve's context drains it: a request in flight, whose body is
// still coming, is answered in full before serve returns 0.
func TestServeGracefulShutdown(t *testing.T) {
	s := launch(t)
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", s.url+"/json", pr)
	if err != nil {
		t.Fatal(err)
	}
	// Expect: 100-continue makes the server say when its handler starts
	// reading the body: from then on the request is in flight.
	req.Header.Set("Expect", "100-continue")
	inHandler := make(chan struct{})
	req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got100Continue: func() { close(inHandler) },
	}))
	tr := &http.Transport{ExpectContinueTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	type result struct {
		code int
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			res <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		res <- result{resp.StatusCode, string(b), err}
	}()
	select {
	case <-inHandler:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never read the body")
	}

	s.cancel()
	// Draining has begun once the health check fails or the listener is
	// closed.
	eventually(t, "draining", func() bool {
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(s.url + "/healthcheck")
		if err != nil {
			return true
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	select {
	case code := <-s.done:
		s.done <- code
		t.Fatalf("serve returned %d with a request in flight", code)
	default:
	}
	go func() {
		io.WriteString(pw, `{"domain":"example","descriptors":[{"entries":[{"key":"user","value":"bob"}]}]}`)
		pw.Close()
	}()
	r := <-res
	if r.err != nil || r.code != 200 || !strings.Contains(r.body, `"overallCode":"OK"`) {
		t.Fatalf("in-flight request: %d %q %v", r.code, r.body, r.err)
	}
	s.stop(t)
}

// The environment variables serve honours beyond addresses.
func TestServeEnv(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		for _, tt := range []struct {
			env  map[string]string
			want string
		}{
			{map[string]string{}, "memory"},
			{map[string]string{"REDIS_URL": "redis:6379"}, "redis://redis:6379"},
			{map[string]string{"REDIS_URL": "redis:6379", "REDIS_TLS": "true", "REDIS_AUTH": "p@ss/word"}, "rediss://:p%40ss%2Fword@redis:6379"},
			{map[string]string{"REDIS_URL": "a:7000,b:7000", "REDIS_TYPE": "CLUSTER", "REDIS_AUTH": "u:p"}, "redis+cluster://u:p@a:7000,b:7000"},
			{map[string]string{"REDIS_URL": "mymaster,s1:26379,s2:26379", "REDIS_TYPE": "sentinel"}, "redis+sentinel://s1:26379,s2:26379/mymaster"},
			{map[string]string{"REDIS_URL": "redis://r:6379/2", "REDIS_AUTH": "p"}, "redis://:p@r:6379/2"},
			{map[string]string{"REDIS_URL": "redis://x:y@r:6379", "REDIS_AUTH": "p"}, "redis://x:y@r:6379"},
		} {
			for _, name := range []string{"REDIS_URL", "REDIS_TLS", "REDIS_AUTH", "REDIS_TYPE"} {
				t.Setenv(name, tt.env[name])
			}
			if got := redisFromEnv(); got != tt.want {
				t.Errorf("%v: %q, want %q", tt.env, got, tt.want)
			}
		}
	})
	t.Run("log level", func(t *testing.T) {
		t.Setenv("LOG_LEVEL", "nonsense")
		var out, errb strings.Builder
		if code := runServe(context.Background(), nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown log level "nonsense"`) {
			t.Errorf("LOG_LEVEL=nonsense: exit %d, %q", code, errb.String())
		}
		for in, want := range map[string]string{"DEBUG": "DEBUG", "warning": "WARN", "Error": "ERROR", "trace": "DEBUG"} {
			if l, err := daemon.ParseLogLevel(in); err != nil || l.String() != want {
				t.Errorf("parseLogLevel(%q) = %v, %v; want %s", in, l, err, want)
			}
		}
	})
	t.Run("not acted on", func(t *testing.T) {
		t.Setenv("PROMETHEUS_ADDR", ":9090")
		t.Setenv("USE_STATSD", "false")
		t.Setenv("RUNTIME_IGNOREDOTFILES", "1")
		t.Setenv("BACKEND_TYPE", "memcache")
		if got, want := strings.Join(ratelimitenv.NotActedOn(), ","), "PROMETHEUS_ADDR,BACKEND_TYPE=memcache"; got != want {
			t.Errorf("notActedOn() = %s, want %s", got, want)
		}
	})
}
