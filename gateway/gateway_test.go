package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/rlheader"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.Wrap(m), redistest.IgnoreRueidis()...)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// upstream is a real HTTP server that counts what reaches it.
type upstream struct {
	*httptest.Server
	hits    atomic.Int64
	mu      sync.Mutex
	headers []http.Header
	handler http.HandlerFunc // nil: 200 "ok"
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.mu.Lock()
		u.headers = append(u.headers, r.Header.Clone())
		h := u.handler
		u.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) set(h http.HandlerFunc) {
	u.mu.Lock()
	u.handler = h
	u.mu.Unlock()
}

// hold makes the requests for path wait at the upstream: each sends on
// entered as it arrives, and all finish once release is closed. Other
// paths get 200 and nothing.
func (u *upstream) hold(path string) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	u.set(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path {
			entered <- struct{}{}
			<-release
		}
	})
	return entered, release
}

// direct is a Config that forwards every request to up, unlimited.
func direct(t testing.TB, up *upstream) gateway.Config {
	return gateway.Config{Upstreams: []gateway.Upstream{{Name: "app", URL: mustURL(t, up.URL)}}}
}

// trust is a Resolver of X-Forwarded-For (or header, if given) that trusts
// the peers in cidr; a bad cidr fails the test.
func trust(t testing.TB, cidr string, header ...clientip.Header) *clientip.Resolver {
	t.Helper()
	pfx, err := clientip.ParsePrefixes(cidr)
	if err != nil {
		t.Fatal(err)
	}
	r := &clientip.Resolver{TrustedProxies: pfx}
	if len(header) > 0 {
		r.Header = header[0]
	}
	return r
}

// trustIf is trust(t, cidr) if trusted, and nil (no peer trusted) if not.
func trustIf(t testing.TB, trusted bool, cidr string) *clientip.Resolver {
	if !trusted {
		return nil
	}
	return trust(t, cidr)
}

func mustURL(t testing.TB, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// newGateway returns a Gateway for cfg (quiet unless cfg has a Logger),
// closed when the test ends.
func newGateway(t testing.TB, cfg gateway.Config) *gateway.Gateway {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// gatewayOf returns a quiet Gateway of yaml (a proxy file without its
// upstream) that forwards to the upstream "u" at upURL through rt (the
// default transport when nil) and limits in a memstore of its own; edit,
// when not nil, changes the Config before New. All is closed when tb ends.
func gatewayOf(tb testing.TB, yaml, upURL string, rt http.RoundTripper, edit func(*gateway.Config)) *gateway.Gateway {
	tb.Helper()
	f, err := gateway.ParseFile("proxy.yaml", []byte(yaml))
	if err != nil {
		tb.Fatal(err)
	}
	lim := memstore.New(memstore.Config{})
	tb.Cleanup(func() { lim.Close() })
	cfg := f.Config
	cfg.Upstreams = []gateway.Upstream{{Name: "u", URL: mustURL(tb, upURL)}}
	cfg.Limiter, cfg.Logger, cfg.Transport = lim, quiet, rt
	if edit != nil {
		edit(&cfg)
	}
	return newGateway(tb, cfg)
}

// served is what h answers a request of method for target from
// httptest's client, 192.0.2.1:1234.
func served(h http.Handler, method, target string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, target, nil))
	return w
}

// front starts a Gateway on a real server.
func front(t *testing.T, cfg gateway.Config) (*gateway.Gateway, *httptest.Server) {
	t.Helper()
	g := newGateway(t, cfg)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close) // before g.Close: cleanups run last first
	return g, srv
}

func store(t *testing.T, c *clocktest.Clock) *memstore.Store {
	s := memstore.New(memstore.Config{Clock: c, SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	return s
}

func get(t *testing.T, c *http.Client, u string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return send(t, c, req)
}

// getHeaders is get with the header lines kv (name, value, name, value...).
func getHeaders(t *testing.T, c *http.Client, u string, kv ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	return send(t, c, req)
}

// send sends req with c and reads the whole response; an error fails the
// test.
func send(t *testing.T, c *http.Client, req *http.Request) *http.Response {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return drained(t, resp)
}

// drained reads the whole of resp's body and closes it; a read error fails
// the test.
func drained(t *testing.T, resp *http.Response) *http.Response {
	t.Helper()
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp
}

// doRaw sends method and a request-target written as is (no cleaning or
// re-encoding by the client) with host as the Host header.
func doRaw(t *testing.T, srv string, c *http.Client, method, target, host string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, srv+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = target
	if host != "" {
		req.Host = host
	}
	return send(t, c, req)
}

// parsed loads a proxy config, yaml preceded by "upstream: <up's URL>".
// Its Limiter is a memstore on a fake clock that stands still; a test that
// needs another sets its own.
func parsed(t *testing.T, yaml string, up *upstream) gateway.Config {
	t.Helper()
	f, err := gateway.ParseFile("proxy.yaml", []byte("upstream: "+up.URL+"\n"+yaml))
	if err != nil {
		t.Fatal(err)
	}
	f.Config.Limiter = store(t, clocktest.New())
	return f.Config
}

// NGINX cases 55, 59 and 60: no burst, requests at given instants, through
// the proxy to a real upstream. Rejected requests change nothing.
func TestNGINXNoBurst(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		rate  string
		at    []time.Duration
		codes []int
	}{
		{"55 rate=1r/s", "1r/s", []time.Duration{0, 0, 500 * ms, 1000 * ms}, []int{200, 503, 503, 200}},
		{"59 rate=30r/m", "30r/m", []time.Duration{0, 1000 * ms, 2000 * ms}, []int{200, 503, 200}},
		{"60 rate=10r/s", "10r/s", []time.Duration{0, 100 * ms, 150 * ms}, []int{200, 200, 503}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t)
			clock := clocktest.New()
			cfg := parsed(t, `
status: 503
limits:
  - {name: one, key: global, rate: `+tc.rate+`}
routes:
  - {name: all, match: /, limits: [one]}
`, up)
			cfg.Limiter = store(t, clock)
			_, srv := front(t, cfg)
			start := clock.Now()
			var codes []int
			for _, at := range tc.at {
				clock.Set(start.Add(at))
				codes = append(codes, get(t, srv.Client(), srv.URL+"/x").StatusCode)
			}
			if !slices.Equal(codes, tc.codes) {
				t.Fatalf("codes %v, want %v", codes, tc.codes)
			}
			passed := 0
			for _, c := range tc.codes {
				if c == 200 {
					passed++
				}
			}
			if got := up.hits.Load(); got != int64(passed) {
				t.Fatalf("upstream saw %d, want %d", got, passed)
			}
		})
	}
}

// waits records the delays the proxy asks for without waiting them.
type waits struct {
	mu sync.Mutex
	ds []time.Duration
}

func (w *waits) wait(_ context.Context, d time.Duration) error {
	w.mu.Lock()
	w.ds = append(w.ds, d)
	w.mu.Unlock()
	return nil
}

// NGINX cases 56–58: seven requests at one instant under 1r/s burst=5,
// with delays, nodelay, and delay=3; the seventh gets limit_req_status.
func TestNGINXBurst(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name   string
		extra  string
		delays []time.Duration // asked of the admitted requests that wait
	}{
		{"56 burst=5", "", []time.Duration{1 * s, 2 * s, 3 * s, 4 * s, 5 * s}},
		{"57 burst=5 nodelay", ", nodelay: true", nil},
		{"58 burst=5 delay=3", ", delay: 3", []time.Duration{1 * s, 2 * s}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t)
			cfg := parsed(t, `
status: 503
limits:
  - {name: q, key: ip, rate: 1r/s, burst: 5`+tc.extra+`}
routes:
  - {name: all, match: /, limits: [q]}
`, up)
			var w waits
			cfg.Wait = w.wait
			_, srv := front(t, cfg)
			var codes []int
			for range 7 {
				codes = append(codes, get(t, srv.Client(), srv.URL+"/").StatusCode)
			}
			if want := []int{200, 200, 200, 200, 200, 200, 503}; !slices.Equal(codes, want) {
				t.Fatalf("codes %v, want %v", codes, want)
			}
			if up.hits.Load() != 6 {
				t.Fatalf("upstream saw %d, want 6", up.hits.Load())
			}
			if !slices.Equal(w.ds, tc.delays) {
				t.Fatalf("delays %v, want %v", w.ds, tc.delays)
			}
		})
	}
}

// The delays are real with the default Wait: at 20r/s with burst=3, four
// requests at once leave about 50 ms apart. Only the order and wide bounds
// are asserted.
func TestQueueRealDelays(t *testing.T) {
	up := newUpstream(t)
	var mu sync.Mutex
	var arrivals []time.Time
	up.set(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
	})
	cfg := parsed(t, `
limits: [{name: q, key: global, rate: 20r/s, burst: 3}]
routes: [{name: all, match: /, limits: [q]}]
`, up)
	cfg.Limiter = memstore.New(memstore.Config{})
	defer cfg.Limiter.(*memstore.Store).Close()
	_, srv := front(t, cfg)
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { get(t, srv.Client(), srv.URL+"/") })
	}
	wg.Wait()
	if len(arrivals) != 4 {
		t.Fatalf("%d arrivals", len(arrivals))
	}
	last := arrivals[3].Sub(start)
	// Three waits of 50 ms: the last leaves no sooner than 150 ms (minus a
	// millisecond of rounding), and not absurdly late.
	if last < 149*time.Millisecond || last > 10*time.Second {
		t.Fatalf("the last request reached the upstream after %v, want about 150ms", last)
	}
}

// NGINX case 61: burst=0, delay=0 and statuses outside 400–599 are config
// errors, with the line, as every error of the file is; one for an item
// without a key it needs names all the keys the item needs.
func TestNGINXConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"upstream: http://u\nlimits:\n  - {name: a, key: ip, rate: 1r/s, burst: 0}\n", "proxy.yaml:3:"},
		{"upstream: http://u\nlimits:\n  - {name: a, key: ip, rate: 1r/s, burst: 2, delay: 0}\n", "proxy.yaml:3:"},
		{"upstream: http://u\nstatus: 399\n", "proxy.yaml:2:"},
		{"upstream: http://u\nconn_status: 600\n", "proxy.yaml:2:"},
		{"upstream: http://u\nroutes:\n  - name: r\n    match: [\"/a\", \"GET /{x\"]\n", "proxy.yaml:4:"},
		{"upstream: http://u\nroutes:\n  - {name: r, match: [\"/a\", \"/a\"]}\n", "proxy.yaml:3:"},
		{"upstream: http://u\nlimits:\n  - {name: a, key: ip, rate: 10 per second}\n", "proxy.yaml:3:"},
		{"upstream: http://u\nlimits:\n  - {name: a, key: ip, rate: 1r/s, burst: 1, delay: 2}\n", "proxy.yaml:3:"},
		{"upstream: http://u\nlimits:\n  - {name: a, key: ip, rate: 1r/s, nodelay: true, algorithm: token_bucket}\n", "proxy.yaml:3:"},
		{"upstream: http://u\nroutes:\n  - {name: r, match: /, limits: [nope]}\n", "proxy.yaml:3:"},
		{"upstream: http://u\nlimits:\n  - {name: a, key: ip, rate: 5r/s, burst: 2, algorithm: fixed_window}\n", "proxy.yaml:3:"},
		{"upstream: http://u\nlimts: []\n", "proxy.yaml:2:"},
		{"upstream: ftp://u\n", "proxy.yaml:1:"},
		{"upstream: http://u\n  bad: [\n", "proxy.yaml:2:"},
		{"[]", "proxy.yaml:1:1: config: the file must be a mapping, not a list"},
		// An item without a key it needs: the error names all it needs.
		{"upstreams:\n  - {name: a}\n", "proxy.yaml:2:5: config: an upstream needs a name and a url"},
		{"upstream: http://u\nlimits:\n  - {name: a, rate: 1r/s}\n", "proxy.yaml:3:5: config: a limit needs a name, a key and a rate"},
		{"upstream: http://u\nconns:\n  - {max: 1}\n", "proxy.yaml:3:5: config: a conn limit needs a name and a max"},
		{"upstream: http://u\nroutes:\n  - {name: r}\n", "proxy.yaml:3:5: config: a route needs a name and a match"},
		// A pattern no canonical request matches: a last %2F is a trailing slash.
		{"upstream: http://u\nroutes:\n  - {name: r, match: /a/%2F}\n", "proxy.yaml:3:22: "},
		{"upstream: http://u\nroutes:\n  - {name: r, match: [/b, \"/a/%2F/{$}\"]}\n", "proxy.yaml:3:27: "},
	} {
		_, err := gateway.ParseFile("proxy.yaml", []byte(tc.yaml))
		// A want that ends at a position ("proxy.yaml:3:") is the error's
		// start; any other is the whole error.
		atPosition := strings.HasSuffix(strings.TrimSuffix(tc.want, " "), ":")
		if err == nil || !atPosition && err.Error() != tc.want || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// NGINX case 62: limit_conn 1 — a second request while the first is in
// flight is refused, over a second HTTP/1.1 connection and over a second
// HTTP/2 stream of the same connection; after the first completes, a new
// request passes.
func TestNGINXLimitConn(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		name := "http1"
		if h2 {
			name = "http2"
		}
		t.Run(name, func(t *testing.T) {
			up := newUpstream(t)
			entered, release := up.hold("/slow")
			cfg := parsed(t, `
conn_status: 503
conns: [{name: c, key: ip, max: 1}]
routes: [{name: all, match: /, conns: [c]}]
`, up)
			srv := httptest.NewUnstartedServer(newGateway(t, cfg))
			var client *http.Client
			if h2 {
				srv.EnableHTTP2 = true
				srv.StartTLS()
				client = srv.Client()
			} else {
				srv.Start()
				// One connection per request: no reuse.
				client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			}
			defer srv.Close()
			done := make(chan *http.Response)
			go func() {
				resp, err := client.Get(srv.URL + "/slow")
				if err != nil {
					t.Error(err)
				}
				done <- resp
			}()
			<-entered
			resp := get(t, client, srv.URL+"/")
			if resp.StatusCode != 503 {
				t.Fatalf("second in flight: %d, want 503", resp.StatusCode)
			}
			if h2 && resp.ProtoMajor != 2 {
				t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
			}
			close(release)
			if first := <-done; first == nil || first.StatusCode != 200 {
				t.Fatalf("first: %v", first)
			} else {
				first.Body.Close()
			}
			if c := get(t, client, srv.URL+"/").StatusCode; c != 200 {
				t.Fatalf("after the first completed: %d, want 200", c)
			}
			client.CloseIdleConnections()
		})
	}
}

// A client that ignores 429 and keeps sending stays limited: over 10 s of
// a request every 10 ms under 10r/s (reject at once, token bucket with
// burst 5), the upstream sees no more than rate·t + burst.
func TestIgnoring429StaysLimited(t *testing.T) {
	up := newUpstream(t)
	clock := clocktest.New()
	cfg := parsed(t, `
limits: [{name: tb, key: ip, rate: 10r/s, burst: 5, algorithm: token_bucket}]
routes: [{name: all, match: /, limits: [tb]}]
`, up)
	cfg.Limiter = store(t, clock)
	_, srv := front(t, cfg)
	var limited int
	for range 1000 {
		resp := get(t, srv.Client(), srv.URL+"/")
		switch resp.StatusCode {
		case 200:
		case 429:
			limited++
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
		clock.Advance(10 * time.Millisecond)
	}
	hits := up.hits.Load()
	if hits > 10*10+5 || hits < 10*10 {
		t.Fatalf("upstream saw %d over 10 s, want 100 to 105", hits)
	}
	if int64(limited)+hits != 1000 {
		t.Fatalf("%d limited + %d forwarded != 1000", limited, hits)
	}
}

// 2,000 concurrent clients on one queue of burst 10: exactly 11 are
// admitted (one passes, ten wait), the rest are refused at once; the queue
// never holds more than ten; when the waiting clients leave, their places
// are given back and nothing reaches the upstream for them; no goroutine
// is left behind (TestMain).
func TestQueueBoundUnderLoad(t *testing.T) {
	up := newUpstream(t)
	cfg := parsed(t, `
limits: [{name: q, key: global, rate: 1r/m, burst: 10}]
routes: [{name: all, match: /, limits: [q]}]
`, up)
	clock := clocktest.New()
	lim := store(t, clock)
	cfg.Limiter = lim
	var waiting, maxWaiting atomic.Int64
	cfg.Wait = func(ctx context.Context, d time.Duration) error {
		n := waiting.Add(1)
		for {
			m := maxWaiting.Load()
			if n <= m || maxWaiting.CompareAndSwap(m, n) {
				break
			}
		}
		<-ctx.Done() // a minute is a long time: these clients give up
		waiting.Add(-1)
		return ctx.Err()
	}
	g := newGateway(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var codes sync.Map
	var wg sync.WaitGroup
	var refused atomic.Int64
	const clients = 2000 // far more than the queue holds (10)
	for i := range clients {
		wg.Go(func() {
			r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			if w.Code == 429 {
				refused.Add(1)
			}
			codes.Store(i, w.Code)
		})
	}
	// All but the admitted eleven are refused without waiting.
	deadline := time.Now().Add(30 * time.Second)
	for refused.Load() < clients-11 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling for the goroutines, not to pass time
	}
	for waiting.Load() < 10 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if refused.Load() != clients-11 || waiting.Load() != 10 {
		t.Fatalf("refused %d, waiting %d; want %d and 10", refused.Load(), waiting.Load(), clients-11)
	}
	cancel()
	wg.Wait()
	if maxWaiting.Load() != 10 {
		t.Fatalf("the queue held %d at most, want 10", maxWaiting.Load())
	}
	if up.hits.Load() != 1 {
		t.Fatalf("upstream saw %d, want 1 (the one that passed)", up.hits.Load())
	}
	// The ten places were given back: ten more fit in the queue now.
	q, err := queue.New(lim, queue.Config{Rate: 1, Period: time.Minute, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		d, err := q.Reserve(context.Background(), "q:global")
		if err != nil || !d.Allowed {
			t.Fatalf("place %d after the cancels: %+v %v", i, d, err)
		}
	}
}

// The upstream saturated: beyond MaxInFlight the gateway sheds with 503 and
// Retry-After, not the client's 429, and says so in the access log.
func TestShedLoad(t *testing.T) {
	up := newUpstream(t)
	entered, release := up.hold("/slow")
	var log testlog.Buffer
	cfg := direct(t, up)
	cfg.Upstreams[0].MaxInFlight = 1
	cfg.MaxInFlight = 100
	cfg.AccessLog = &log
	_, srv := front(t, cfg)
	go func() {
		resp, err := srv.Client().Get(srv.URL + "/slow")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	resp, err := srv.Client().Get(srv.URL + "/b")
	if err != nil {
		t.Fatal(err)
	}
	var p rlheader.Problem
	json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	close(release)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || p.Status != 503 {
		t.Fatalf("shed: %d Retry-After=%q problem=%+v", resp.StatusCode, resp.Header.Get("Retry-After"), p)
	}
	line := log.String()
	if !strings.Contains(line, `"GET /b HTTP/1.1" 503 `) || !strings.Contains(line, `outcome=SHED by="app"`) {
		t.Fatalf("access log %q", line)
	}
}

// Upstream failures: unreachable is 502, too slow is 504, each with a
// problem body.
func TestUpstreamErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	_, srv := front(t, gateway.Config{Upstreams: []gateway.Upstream{{Name: "dead", URL: mustURL(t, dead)}}})
	resp := get(t, srv.Client(), srv.URL+"/")
	if resp.StatusCode != 502 || resp.Header.Get("Content-Type") != rlheader.ProblemContentType {
		t.Fatalf("unreachable: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	up := newUpstream(t)
	stop := make(chan struct{})
	up.set(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	})
	_, srv2 := front(t, gateway.Config{
		Upstreams:       []gateway.Upstream{{Name: "slow", URL: mustURL(t, up.URL)}},
		UpstreamTimeout: 50 * time.Millisecond,
	})
	resp = get(t, srv2.Client(), srv2.URL+"/")
	close(stop)
	if resp.StatusCode != 504 {
		t.Fatalf("slow upstream: %d, want 504", resp.StatusCode)
	}
}

// A streamed response reaches the client before the upstream finishes it.
func TestStreamedResponseReachesClientBeforeItEnds(t *testing.T) {
	up := newUpstream(t)
	more := make(chan struct{})
	up.set(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		http.NewResponseController(w).Flush()
		<-more
		io.WriteString(w, "data: two\n\n")
	})
	_, srv := front(t, direct(t, up))
	resp, err := srv.Client().Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event %q %v: the proxy buffered the stream", line, err)
	}
	close(more)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rest), "data: two") {
		t.Fatalf("rest %q", rest)
	}
}

// Hop-by-hop headers are dropped; X-Forwarded-For from an untrusted peer
// is replaced by the peer, from a trusted one extended.
func TestForwardingHeaders(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		up := newUpstream(t)
		cfg := direct(t, up)
		cfg.TrustedProxies = trustIf(t, trusted, "127.0.0.0/8")
		_, srv := front(t, cfg)
		// A client that asks for no compression.
		plain := &http.Client{Transport: &http.Transport{DisableCompression: true}}
		getHeaders(t, plain, srv.URL+"/", "Connection", "X-Secret", "X-Secret", "hop", "X-Forwarded-For", "198.51.100.7")
		plain.CloseIdleConnections()
		h := up.headers[0]
		if h.Get("X-Secret") != "" {
			t.Errorf("trusted=%v: hop-by-hop header forwarded", trusted)
		}
		want := "127.0.0.1"
		if trusted {
			want = "198.51.100.7, 127.0.0.1"
		}
		if got := strings.Join(h.Values("X-Forwarded-For"), ", "); got != want {
			t.Errorf("trusted=%v: X-Forwarded-For %q, want %q", trusted, got, want)
		}
		if h.Get("Accept-Encoding") != "" {
			t.Errorf("trusted=%v: the proxy asked for %q on the client's behalf", trusted, h.Get("Accept-Encoding"))
		}
		if h.Get("X-Forwarded-Host") == "" || h.Get("X-Forwarded-Proto") != "http" {
			t.Errorf("trusted=%v: X-Forwarded-Host/Proto %q %q", trusted, h.Get("X-Forwarded-Host"), h.Get("X-Forwarded-Proto"))
		}
	}
}

// Routing: the most specific pattern wins, methods and hosts count, dot
// segments cannot dodge a limit, and unmatched requests pass unlimited.
func TestMostSpecificRouteWinsAndNoPathDodgesIt(t *testing.T) {
	up := newUpstream(t)
	cfg := parsed(t, `
limits:
  - {name: admin, key: global, rate: 1r/m, algorithm: fixed_window}
  - {name: writes, key: global, rate: 1r/m, algorithm: fixed_window}
routes:
  - {name: admin, match: /admin/, limits: [admin]}
  - {name: writes, match: [POST /api/, "PUT /api/{id}"], limits: [writes]}
`, up)
	_, srv := front(t, cfg)
	do := func(method, path string) int {
		// sent as written, dot segments included
		return doRaw(t, srv.URL, srv.Client(), method, path, "").StatusCode
	}
	if do("GET", "/admin/a") != 200 || do("GET", "/public/../admin/b") != 429 {
		t.Error("a dot segment dodged the admin limit")
	}
	for range 3 {
		if code := do("GET", "/api/x"); code != 200 {
			t.Fatalf("GET /api/x is unlimited, got %d", code)
		}
	}
	if do("POST", "/api/x") != 200 || do("PUT", "/api/7") != 429 {
		t.Error("POST and PUT on /api share the writes limit")
	}
	// ServeMux would redirect /admin to /admin/; the gateway never
	// redirects, and /admin falls under the /admin/ subtree's limit.
	if code := do("GET", "/admin"); code != 429 {
		t.Errorf("/admin: %d, want 429 (the admin route, not a redirect)", code)
	}
	if code := do("GET", "/other"); code != 200 {
		t.Errorf("/other: %d, want 200 (no route, no limit)", code)
	}
}

// Update swaps the config; a bad one is refused and the running one kept.
func TestUpdateRefusesBadConfigAndKeepsTheRunningOne(t *testing.T) {
	up := newUpstream(t)
	lim := store(t, clocktest.New())
	strict := parsed(t, `
limits: [{name: one, key: global, rate: 1r/m, algorithm: fixed_window}]
routes: [{name: all, match: /, limits: [one]}]
`, up)
	strict.Limiter = lim
	g, srv := front(t, gateway.Config{Upstreams: strict.Upstreams, Settings: httplimit.Settings{Logger: quiet}})
	c := srv.Client()
	for range 2 {
		if get(t, c, srv.URL+"/").StatusCode != 200 {
			t.Fatal("unlimited at first")
		}
	}
	strict.Logger = quiet
	if err := g.Update(strict); err != nil {
		t.Fatal(err)
	}
	if get(t, c, srv.URL+"/").StatusCode != 200 || get(t, c, srv.URL+"/").StatusCode != 429 {
		t.Fatal("the new limit does not apply")
	}
	bad := strict
	bad.Routes = append([]gateway.Route(nil), strict.Routes...)
	bad.Routes = append(bad.Routes, gateway.Route{Name: "x", Patterns: []string{"GET /{"}})
	if err := g.Update(bad); err == nil {
		t.Fatal("a bad pattern was accepted")
	}
	if get(t, c, srv.URL+"/").StatusCode != 429 {
		t.Fatal("the running config was not kept")
	}
}

// Dry run: nothing is refused or delayed, and refusals are still counted.
func TestDryRunRefusesNothingAndCountsRefusals(t *testing.T) {
	up := newUpstream(t)
	cfg := parsed(t, `
dry_run: true
limits: [{name: one, key: global, rate: 1r/m, burst: 1}]
routes: [{name: all, match: /, limits: [one]}]
`, up)
	cfg.Wait = func(context.Context, time.Duration) error {
		return errors.New("a dry run must not delay")
	}
	_, srv := front(t, cfg)
	for range 5 {
		if code := get(t, srv.Client(), srv.URL+"/").StatusCode; code != 200 {
			t.Fatalf("dry run refused: %d", code)
		}
	}
	if up.hits.Load() != 5 {
		t.Fatalf("upstream saw %d, want 5", up.hits.Load())
	}
}

// Rejections carry the full header contract and an access log line.
func TestRejectionContract(t *testing.T) {
	up := newUpstream(t)
	var log testlog.Buffer
	cfg := parsed(t, `
headers: both
limits: [{name: per_ip, key: ip, rate: 2r/m, algorithm: fixed_window}]
routes: [{name: api, match: /api/, limits: [per_ip]}]
`, up)
	cfg.AccessLog = &log
	_, srv := front(t, cfg)
	var resp *http.Response
	for range 3 {
		resp = get(t, srv.Client(), srv.URL+"/api/x?y=1")
	}
	h := resp.Header
	if resp.StatusCode != 429 || h.Get("Retry-After") == "" || h.Get(httplimit.ReasonHeader) != "per_ip" ||
		!strings.Contains(h.Get("RateLimit-Policy"), `"per_ip";q=2;w=60`) || h.Get("RateLimit") == "" ||
		h.Get("X-RateLimit-Limit") != "2" || h.Get("Content-Type") != rlheader.ProblemContentType {
		t.Fatalf("rejection: %d %v", resp.StatusCode, h)
	}
	line := log.String()
	if !strings.HasPrefix(line, "127.0.0.1 - - [") || !strings.Contains(line, `"GET /api/x?y=1 HTTP/1.1" 429 `) ||
		!strings.HasSuffix(line, "outcome=REJECTED by=\"per_ip\"\n") || strings.Count(line, "\n") != 1 {
		t.Fatalf("access log %q", line)
	}
}

// A client that disconnects while queued (a real TCP close, the default
// Wait on a real timer) leaves the queue at once: its place is given back
// and nothing reaches the upstream for it.
func TestQueuedClientDisconnects(t *testing.T) {
	up := newUpstream(t)
	cfg := parsed(t, `
limits: [{name: q, key: global, rate: 1r/m, burst: 1}]
routes: [{name: all, match: /, limits: [q]}]
`, up)
	lim := memstore.New(memstore.Config{})
	defer lim.Close()
	cfg.Limiter = lim
	var left atomic.Int64
	queued := make(chan struct{}, 1)
	cfg.Wait = func(ctx context.Context, d time.Duration) error {
		queued <- struct{}{}
		err := httplimit.Sleep(ctx, d) // the default Wait
		if err != nil {
			left.Add(1)
		}
		return err
	}
	_, srv := front(t, cfg)
	if get(t, srv.Client(), srv.URL+"/").StatusCode != 200 {
		t.Fatal("first")
	}
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/", nil)
		errc := make(chan error, 1)
		go func() {
			resp, err := srv.Client().Do(req)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		<-queued // the proxy is waiting on its timer
		cancel() // the client hangs up
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("client: %v", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for left.Load() != int64(i+1) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // the server sees the close
		}
		if left.Load() != int64(i+1) {
			t.Fatalf("request %d did not leave the queue", i)
		}
		// Its place comes back once the handler has given it back, just
		// after the wait ends: a probe finds a free place (a refused
		// probe changes nothing, so polling is safe), then returns it.
		lq := mustQueueLimit(t, lim)
		for {
			res, err := lim.AllowN(context.Background(), "q:*", lq, 1)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				lim.RefundN(context.Background(), "q:*", lq, 1)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("request %d left the queue but its place was not given back: %+v", i, res)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if up.hits.Load() != 1 {
		t.Fatalf("upstream saw %d, want 1", up.hits.Load())
	}
}

func mustQueueLimit(t *testing.T, lim *memstore.Store) sluice.Limit {
	q, err := queue.New(lim, queue.Config{Rate: 1, Period: time.Minute, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	return q.Limit()
}

// A request without the limit's key (missing_key: reject) is a 400, in the
// access log and the metrics too.
func TestMissingKeyLogged(t *testing.T) {
	up := newUpstream(t)
	var log testlog.Buffer
	cfg := parsed(t, `
limits: [{name: by_key, key: "header:X-Api-Key", rate: 10r/s, algorithm: token_bucket}]
routes: [{name: api, match: /, limits: [by_key]}]
`, up)
	cfg.AccessLog = &log
	_, srv := front(t, cfg)
	if c := get(t, srv.Client(), srv.URL+"/x").StatusCode; c != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", c)
	}
	line := log.String()
	if !strings.Contains(line, `"GET /x HTTP/1.1" 400 - `) || !strings.HasSuffix(line, "outcome=NO_KEY by=\"by_key\"\n") {
		t.Fatalf("access log %q", line)
	}
	if up.hits.Load() != 0 {
		t.Fatal("the upstream saw a request without a key")
	}
}

// With forwarded_header: forwarded, the upstream gets an RFC 7239 chain:
// the trusted proxy's elements and then this hop's, which a resolver that
// trusts the gateway reads back as the original client.
func TestForwardedChain(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		up := newUpstream(t)
		cfg := direct(t, up)
		cfg.TrustedProxies = trust(t, "10.0.0.0/8", clientip.Forwarded)
		if trusted {
			cfg.TrustedProxies = trust(t, "127.0.0.0/8", clientip.Forwarded)
		}
		_, srv := front(t, cfg)
		getHeaders(t, srv.Client(), srv.URL+"/", "Forwarded", `for="[2001:db8::7]";proto=https`)
		got := strings.Join(up.headers[0].Values("Forwarded"), ", ")
		host := strings.TrimPrefix(srv.URL, "http://")
		hop := `for=127.0.0.1;host="` + host + `";proto=http`
		want := hop
		if trusted {
			want = `for="[2001:db8::7]";proto=https, ` + hop
		}
		if got != want {
			t.Errorf("trusted=%v: Forwarded %q, want %q", trusted, got, want)
		}
		// The upstream, trusting the gateway (loopback), finds the client.
		back := trust(t, "127.0.0.0/8", clientip.Forwarded)
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "127.0.0.1:40000"
		r.Header["Forwarded"] = up.headers[0].Values("Forwarded")
		a, err := back.ClientIP(r)
		wantIP := "127.0.0.1"
		if trusted {
			wantIP = "2001:db8::7"
		}
		if err != nil || a.String() != wantIP {
			t.Errorf("trusted=%v: the upstream reads client %v %v, want %s", trusted, a, err, wantIP)
		}
	}
}
