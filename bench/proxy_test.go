package bench

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestProxyAdmittedCounts sends one scheduled arrival pattern per limit to
// `sluice proxy` and to NGINX with limit_req at the same rate and burst, both
// in front of the same upstream (an httptest server answering 200 "ok"), and
// checks that both admit exactly the same requests as a model of NGINX's
// accounting (ngx_http_limit_req_module: excess in milli-requests, time in
// whole milliseconds). For the delaying limits it also compares the measured
// delays with the model's, within wide bounds.
//
// The schedule keeps every arrival at least a fifth of the limit's period
// (20 ms at 10r/s) from the time at which its decision would flip, so that
// scheduling jitter cannot change a decision; see proxySchedule.
//
// It runs against the sluice binary in $SLUICE, else one it builds from the
// repository with `go build`, and nginx from PATH; it is skipped with -short or
// when nginx (or go, to build sluice) is not installed. Run it with
//
//	go test -run ProxyAdmittedCounts -v
//
// It takes about 21 s, the length of the slowest pattern (30r/m).
func TestProxyAdmittedCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the admitted-count comparison with NGINX takes about 21 s")
	}
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx not found in PATH: skipping (install it, e.g. Debian's nginx package)")
	}
	dir := t.TempDir()
	sluiceBin := sluiceBinary(t, dir)

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	}))
	defer upstream.Close()

	slAddr := startSluiceProxy(t, sluiceBin, dir, upstream.URL)
	ngAddr := startNginx(t, nginx, dir, upstream.URL)
	targets := []proxyTarget{{name: "sluice", addr: slAddr}, {name: "nginx", addr: ngAddr}}
	for i := range targets {
		targets[i].client = warmClient(t, targets[i])
	}

	var mu sync.Mutex
	var rows []string
	t.Run("cases", func(t *testing.T) {
		for _, c := range proxyCases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				row := runProxyCase(t, c, targets)
				mu.Lock()
				rows = append(rows, row)
				mu.Unlock()
			})
		}
	})
	slices.Sort(rows)
	t.Log("\n| limit | arrivals | model admitted | sluice admitted | nginx admitted | sluice 200/429 | nginx 200/429 | min margin | latest send |\n|---|---:|---:|---:|---:|---|---|---:|---:|\n" + strings.Join(rows, "\n"))
}

// proxyTarget is a proxy under comparison: its name, address and client.
type proxyTarget struct {
	name, addr string
	client     *http.Client
}

// sluiceBinary returns $SLUICE, or else sluice built into dir (skipping
// the test without go in PATH).
func sluiceBinary(t *testing.T, dir string) string {
	t.Helper()
	if bin := os.Getenv("SLUICE"); bin != "" {
		return bin
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not found in PATH to build sluice, and $SLUICE not set")
	}
	bin := filepath.Join(dir, "sluice")
	if out, err := exec.Command(goBin, "build", "-C", "..", "-o", bin, "./cmd/sluice").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sluice: %v\n%s", err, out)
	}
	return bin
}

// warmClient returns a client of tg, closed at the test's end, with 32
// connections to it open before the clock starts, on a path without
// limits.
func warmClient(t *testing.T, tg proxyTarget) *http.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	if err := proxyWaitOK(client, "http://"+tg.addr+"/warm"); err != nil {
		t.Fatalf("%s: %v", tg.name, err)
	}
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() { proxyGet(client, "http://"+tg.addr+"/warm") })
	}
	wg.Wait()
	return client
}

// proxyOutcome is the answer to one arrival.
type proxyOutcome struct {
	status  int
	took    time.Duration
	late    time.Duration
	err     error
	arrival int
}

// runProxyCase sends case c's schedule to every target at once, checks
// each target's answers against the NGINX model and returns the case's
// row of the report.
func runProxyCase(t *testing.T, c proxyCase, targets []proxyTarget) string {
	sched, slack := proxySchedule(c)
	want := proxyModel(c, sched)
	results := sendSchedule(c, sched, targets)
	modelAdmitted := 0
	for _, d := range want {
		if d.admitted {
			modelAdmitted++
		}
	}
	admitted := make([]int, len(targets))
	limited := make([]int, len(targets))
	var maxLate time.Duration
	var delayNotes []string
	for i, tg := range targets {
		var gotDelays []time.Duration
		admitted[i], limited[i], gotDelays, maxLate = tallyOutcomes(t, tg.name, results[i], maxLate)
		if c.delaying() {
			delayNotes = append(delayNotes, checkDelays(t, tg.name, gotDelays, delaysOf(want)))
		}
	}
	checkArrivalGroups(t, targets, sched, want, results)
	for i, tg := range targets {
		if admitted[i] != modelAdmitted {
			t.Errorf("%s admitted %d, the NGINX model %d (latest arrival %v after its time)", tg.name, admitted[i], modelAdmitted, maxLate)
		}
	}
	row := fmt.Sprintf("| %s | %d | %d | %d | %d | %d/%d | %d/%d | %v | %v |",
		c.config(), len(sched), modelAdmitted, admitted[0], admitted[1], admitted[0], limited[0], admitted[1], limited[1],
		slack.Round(time.Millisecond), maxLate.Round(100*time.Microsecond))
	if c.delaying() {
		row += "\n  model delays: " + fmtDelays(delaysOf(want)) + "\n  " + strings.Join(delayNotes, "\n  ")
	}
	return row
}

// sendSchedule sends one request of case c to every target at each time
// of sched (from 300 ms on) and returns each target's outcomes, by arrival.
func sendSchedule(c proxyCase, sched []time.Duration, targets []proxyTarget) [][]proxyOutcome {
	start := time.Now().Add(300 * time.Millisecond)
	results := make([][]proxyOutcome, len(targets))
	for i := range results {
		results[i] = make([]proxyOutcome, len(sched))
	}
	var wg sync.WaitGroup
	for k, at := range sched {
		time.Sleep(time.Until(start.Add(at)))
		for i, tg := range targets {
			wg.Go(func() {
				url := "http://" + tg.addr + "/" + c.name + "/"
				late := time.Since(start) - at
				t0 := time.Now()
				status, err := proxyGet(tg.client, url)
				results[i][k] = proxyOutcome{status: status, took: time.Since(t0), late: late, err: err, arrival: k}
			})
		}
	}
	wg.Wait()
	return results
}

// tallyOutcomes counts a target's admitted and limited answers, failing
// the test for an error or another status, and returns them with the
// admitted ones' delays and the latest send (at least maxLate).
func tallyOutcomes(t *testing.T, name string, outs []proxyOutcome, maxLate time.Duration) (admitted, limited int, delays []time.Duration, latest time.Duration) {
	t.Helper()
	latest = maxLate
	for _, o := range outs {
		latest = max(latest, o.late)
		switch {
		case o.err != nil:
			t.Errorf("%s: arrival %d: %v", name, o.arrival, o.err)
		case o.status == http.StatusOK:
			admitted++
			delays = append(delays, o.took)
		case o.status == http.StatusTooManyRequests || o.status == http.StatusServiceUnavailable:
			limited++
		default:
			t.Errorf("%s: arrival %d: status %d", name, o.arrival, o.status)
		}
	}
	return admitted, limited, delays, latest
}

// checkDelays compares a target's delays with the model's and returns a
// note for the report. Requests of one burst arrive together, and which
// of them waits longest is down to chance: it compares the sorted lists.
func checkDelays(t *testing.T, name string, got, want []time.Duration) string {
	t.Helper()
	slices.Sort(got)
	var worst time.Duration
	for j := range min(len(got), len(want)) {
		d := got[j] - want[j]
		if d < -5*time.Millisecond || d > 250*time.Millisecond {
			t.Errorf("%s: delay %v, model %v", name, got[j], want[j])
		}
		worst = max(worst, d)
	}
	return fmt.Sprintf("%s: %s (measured − model ≤ %v)", name, fmtDelays(got), worst.Round(100*time.Microsecond))
}

// checkArrivalGroups compares, for every group of arrivals at the same
// time (which are interchangeable), each target's admitted count with the
// model's.
func checkArrivalGroups(t *testing.T, targets []proxyTarget, sched []time.Duration, want []ngxDecision, results [][]proxyOutcome) {
	t.Helper()
	wantGroup := map[time.Duration]int{}
	for k, d := range want {
		if d.admitted {
			wantGroup[sched[k]]++
		}
	}
	for i, tg := range targets {
		got := map[time.Duration]int{}
		for _, o := range results[i] {
			if o.status == http.StatusOK {
				got[sched[o.arrival]]++
			}
		}
		for _, at := range sched {
			if got[at] != wantGroup[at] {
				t.Errorf("%s: arrivals at %v: %d admitted, the NGINX model %d", tg.name, at, got[at], wantGroup[at])
			}
		}
	}
}

// proxyCase is one limit, in NGINX's terms.
type proxyCase struct {
	name    string
	rate    int           // r per per
	per     time.Duration // time.Second (r/s) or time.Minute (r/m)
	burst   int           // 0: none
	nodelay bool
	delay   int // delay=N; 0: none
}

var proxyCases = []proxyCase{
	{name: "r10", rate: 10, per: time.Second},
	{name: "r10b5nodelay", rate: 10, per: time.Second, burst: 5, nodelay: true},
	{name: "r2b3nodelay", rate: 2, per: time.Second, burst: 3, nodelay: true},
	{name: "r30m", rate: 30, per: time.Minute},
	{name: "r10b3", rate: 10, per: time.Second, burst: 3},
	{name: "r5b6d2", rate: 5, per: time.Second, burst: 6, delay: 2},
}

func (c proxyCase) unit() string {
	if c.per == time.Minute {
		return "m"
	}
	return "s"
}

// config is the case as NGINX's limit_req_zone rate and limit_req arguments.
func (c proxyCase) config() string {
	s := fmt.Sprintf("rate=%dr/%s", c.rate, c.unit())
	if c.burst > 0 {
		s += fmt.Sprintf(" burst=%d", c.burst)
	}
	if c.nodelay {
		s += " nodelay"
	}
	if c.delay > 0 {
		s += fmt.Sprintf(" delay=%d", c.delay)
	}
	return s
}

// delaying reports whether some admitted requests wait.
func (c proxyCase) delaying() bool { return c.burst > 0 && !c.nodelay && c.delay < c.burst }

// milliRate is NGINX's ctx->rate: requests per second × 1000, rounded down.
func (c proxyCase) milliRate() int64 {
	if c.per == time.Minute {
		return int64(c.rate) * 1000 / 60
	}
	return int64(c.rate) * 1000
}

// period is the time one request takes to leak out.
func (c proxyCase) period() time.Duration { return c.per / time.Duration(c.rate) }

// proxyTemplate is the arrival pattern, in periods of the case's rate, and
// the size of each group beyond the burst (a group arrives back to back):
// a burst of burst+3 at 0, single requests at uneven spacings (some closer
// than a period, some further), a pause, a burst of burst+2, more singles.
var proxyTemplate = []struct {
	at    float64
	extra int // the group is burst+extra requests; 0 means one request
}{
	{0, 3},
	{0.5, 0}, {0.9, 0}, {1.3, 0}, {1.6, 0}, {2.1, 0}, {2.4, 0}, {2.45, 0}, {3.0, 0}, {3.7, 0}, {4.2, 0},
	{6.5, 2},
	{7.1, 0}, {7.5, 0}, {7.8, 0}, {8.6, 0}, {9.3, 0}, {9.35, 0}, {10.1, 0},
}

// proxySchedule returns the case's arrival times, the template less every
// arrival closer than a fifth of a period to the time at which the model's
// decision for it would flip, and the smallest such distance kept. An
// arrival's margin is computed with the model's state, including the time
// of the last admitted request.
func proxySchedule(c proxyCase) ([]time.Duration, time.Duration) {
	p := c.period()
	margin := p / 5
	var sched []time.Duration
	var st ngxState
	minSlack := time.Duration(math.MaxInt64)
	for _, g := range proxyTemplate {
		n := 1
		if g.extra > 0 {
			n = c.burst + g.extra
		}
		at := time.Duration(g.at * float64(p)).Round(time.Millisecond)
		for range n {
			s := st.slack(c, at)
			if s < margin {
				continue
			}
			minSlack = min(minSlack, s)
			st.decide(c, at)
			sched = append(sched, at)
		}
	}
	return sched, minSlack
}

// ngxState is one key of an NGINX limit_req zone.
type ngxState struct {
	seen         bool
	excess, last int64 // milli-requests, ms
}

type ngxDecision struct {
	admitted bool
	delay    time.Duration
}

// excessAt is NGINX's excess for a request at now (ms).
func (st *ngxState) excessAt(c proxyCase, now int64) int64 {
	ms := max(now-st.last, 0)
	return max(st.excess-c.milliRate()*ms/1000+1000, 0)
}

// decide applies NGINX's accounting to a request at at.
func (st *ngxState) decide(c proxyCase, at time.Duration) ngxDecision {
	now := at.Milliseconds()
	if !st.seen {
		st.seen, st.excess, st.last = true, 0, now
		return ngxDecision{admitted: true}
	}
	excess := st.excessAt(c, now)
	if excess > int64(c.burst)*1000 {
		return ngxDecision{}
	}
	st.excess = excess
	if now != st.last {
		st.last = now
	}
	d := ngxDecision{admitted: true}
	if !c.nodelay && excess > int64(c.delay)*1000 {
		d.delay = time.Duration((excess-int64(c.delay)*1000)*1000/c.milliRate()) * time.Millisecond
	}
	return d
}

// slack is how far at is from the time at which the decision for a request
// would flip: before it the request is rejected, after it admitted.
func (st *ngxState) slack(c proxyCase, at time.Duration) time.Duration {
	if !st.seen {
		return math.MaxInt64
	}
	// excess + 1000 − rate·(t − last)/1000 = burst·1000
	over := st.excess + 1000 - int64(c.burst)*1000
	if over <= 0 {
		return math.MaxInt64 // admitted whenever it comes
	}
	flip := time.Duration(st.last)*time.Millisecond + time.Duration(float64(over)*1000/float64(c.milliRate())*float64(time.Millisecond))
	if at > flip {
		return at - flip
	}
	return flip - at
}

// proxyModel returns the model's decision for every arrival of sched.
func proxyModel(c proxyCase, sched []time.Duration) []ngxDecision {
	var st ngxState
	out := make([]ngxDecision, len(sched))
	for i, at := range sched {
		out[i] = st.decide(c, at)
	}
	return out
}

func delaysOf(ds []ngxDecision) []time.Duration {
	var out []time.Duration
	for _, d := range ds {
		if d.admitted {
			out = append(out, d.delay)
		}
	}
	slices.Sort(out)
	return out
}

func fmtDelays(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprint(d.Round(time.Millisecond).Milliseconds())
	}
	return "[" + strings.Join(parts, " ") + "] ms"
}

// proxyGet GETs url and returns the status.
func proxyGet(c *http.Client, url string) (int, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// proxyWaitOK polls url until it answers 200, for up to 10 s.
func proxyWaitOK(c *http.Client, url string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, err := proxyGet(c, url)
		if err == nil && status == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within 10s (last: %d, %v)", url, status, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startProcess starts cmd, stopping it (SIGTERM, then SIGKILL after 5 s) when
// tb's cleanup runs; its output goes to log, shown if tb fails.
func startProcess(tb testing.TB, cmd *exec.Cmd, name string) {
	tb.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = redisProcAttr()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if tb.Failed() {
			tb.Logf("%s said:\n%s", name, out.Bytes())
		}
	})
}

// startSluiceProxy starts sluice proxy with one route and limit per case
// (path /<name>/, key ip) and returns its address.
func startSluiceProxy(tb testing.TB, bin, dir, upstream string) string {
	addr, err := freeLoopbackAddr()
	if err != nil {
		tb.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %s\nupstream: %s\nstatus: 429\naccess_log: \"off\"\nlimits:\n", addr, upstream)
	for _, c := range proxyCases {
		fmt.Fprintf(&b, "  - {name: %s, key: ip, rate: %dr/%s", c.name, c.rate, c.unit())
		if c.burst > 0 {
			fmt.Fprintf(&b, ", burst: %d", c.burst)
		}
		if c.nodelay {
			b.WriteString(", nodelay: true")
		}
		if c.delay > 0 {
			fmt.Fprintf(&b, ", delay: %d", c.delay)
		}
		b.WriteString("}\n")
	}
	b.WriteString("routes:\n")
	for _, c := range proxyCases {
		fmt.Fprintf(&b, "  - {name: %s, match: /%s/, limits: [%s]}\n", c.name, c.name, c.name)
	}
	file := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	startProcess(tb, exec.Command(bin, "proxy", "-config", file, "-admin-addr", "", "-watch=false", "-log-level", "warn"), "sluice proxy")
	return addr
}

// startNginx starts nginx in its own prefix under dir, with one
// limit_req_zone and location per case (key $binary_remote_addr,
// limit_req_status 429), and returns its address.
func startNginx(tb testing.TB, bin, dir, upstream string) string {
	addr, err := freeLoopbackAddr()
	if err != nil {
		tb.Fatal(err)
	}
	prefix := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		tb.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `worker_processes 2;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events {
    worker_connections 1024;
}
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    limit_req_status 429;
`, prefix)
	for _, c := range proxyCases {
		fmt.Fprintf(&b, "    limit_req_zone $binary_remote_addr zone=%s:1m rate=%dr/%s;\n", c.name, c.rate, c.unit())
	}
	fmt.Fprintf(&b, "    server {\n        listen %s;\n        location / {\n            proxy_pass %s;\n        }\n", addr, upstream)
	for _, c := range proxyCases {
		args := strings.TrimPrefix(c.config(), fmt.Sprintf("rate=%dr/%s", c.rate, c.unit()))
		fmt.Fprintf(&b, "        location /%s/ {\n            limit_req zone=%s%s;\n            proxy_pass %s;\n        }\n", c.name, c.name, args, upstream)
	}
	b.WriteString("    }\n}\n")
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command(bin, "-t", "-p", prefix, "-c", conf, "-e", filepath.Join(prefix, "error.log")).CombinedOutput(); err != nil {
		tb.Fatalf("nginx -t: %v\n%s\n%s", err, out, b.String())
	}
	startProcess(tb, exec.Command(bin, "-p", prefix, "-c", conf, "-e", filepath.Join(prefix, "error.log")), "nginx")
	return addr
}
