package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/rueidis"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/service"
)

// envoyRatelimitModule is the envoyproxy/ratelimit command BenchmarkRLSProcesses
// runs when $ENVOY_RATELIMIT names its binary, and envoyRatelimitVersion the
// version bench-all.sh installs (go install envoyRatelimitModule@envoyRatelimitVersion;
// the script reads both from here).
const (
	envoyRatelimitModule  = "github.com/envoyproxy/ratelimit/src/service_cmd"
	envoyRatelimitVersion = "v1.4.1-0.20260122083618-3fb702589d36"
)

// floorServerEnv names the variable that turns this test binary into the
// floor's server process (TestRLSFloorServerProcess): its value is the
// address to listen on.
const floorServerEnv = "SLUICE_BENCH_FLOOR_ADDR"

// rlsProcess is one row of BenchmarkRLSProcesses: a rate limit service in a
// process of its own.
type rlsProcess struct {
	name string
	// redis: the row needs the redis-server; cmd is the Redis command its
	// decisions send (INFO commandstats): once per decision when
	// callPerDecision, else at least once in all (a store may send one
	// command for several decisions).
	redis           bool
	cmd             string
	callPerDecision bool
	// storeErrors: the server is sluice serve, whose
	// sluice_rls_store_errors_total counts the decisions its failure policy
	// answered instead of the store (reported as fallback/op).
	storeErrors bool
	// start starts the server on at.grpc and returns its command, already
	// started, stopped at b's cleanup.
	start func(b *testing.B, at rlsProcessEnv) *exec.Cmd
}

// rlsProcessEnv is where a row's server runs: its files' directory, its
// gRPC and HTTP addresses, redis-server's address (set for the Redis rows
// only) and the sluice binary.
type rlsProcessEnv struct {
	dir, grpc, http, redis, sluice string
}

// rlsProcesses are the rows of BenchmarkRLSProcesses, in the order they run.
var rlsProcesses = []rlsProcess{
	{name: "floor", start: startFloorProcess},
	{name: "sluice-memstore", storeErrors: true, start: startSluiceServe},
	{name: "sluice-redis", redis: true, cmd: "evalsha", storeErrors: true, start: startSluiceServe},
	{name: "envoy-ratelimit-redis", redis: true, cmd: "incrby", callPerDecision: true, start: startEnvoyRatelimit},
}

// BenchmarkRLSProcesses measures each rate limit service as Envoy meets it:
// a server process of its own, called over gRPC on loopback by this
// process's load generator (BenchmarkRLS's: exactly conc goroutines sharing
// b.N ShouldRateLimit calls over one connection made with go-control-plane's
// client, one descriptor [user=<value>] per call over 10,000 values; the
// rules of rlsYAML). Rows:
//
//   - floor: rlsFloor (a constant OK) on a gRPC server with
//     service.GRPCServerOptions, in a process of its own (this test binary,
//     TestRLSFloorServerProcess): the least a grpc-go RLS costs.
//   - sluice-memstore, sluice-redis: `sluice serve` ($SLUICE, else built)
//     with the rules of rlsYAML, its defaults otherwise, on its memory store
//     and on redis-server (-store redis://…).
//   - envoy-ratelimit-redis: envoyproxy/ratelimit ($ENVOY_RATELIMIT) with the
//     same rules (RUNTIME_ROOT), on the same redis-server (REDIS_SOCKET_TYPE=tcp),
//     its defaults otherwise (a pool of 10 connections, no pipelining window,
//     stats to its stdout sink since USE_STATSD=false).
//
// Each row reports ops/s, p50-µs, p99-µs, denied/op, the server process's
// CPU time per decision (srv-cpu-µs/op: every thread's, from
// /proc/PID/task/*/schedstat), redis-server's (redis-cpu-µs/op, INFO cpu),
// this process's (cli-cpu-µs/op: the load generator and gRPC client), and
// srv-x-floor, its server CPU per decision (redis-server's included) over the
// floor's in the same invocation. The sluice rows report fallback/op, the
// decisions serve's failure policy answered without the store (its
// sluice_rls_store_errors_total); the Redis rows check that Redis ran their
// command (envoyproxy/ratelimit's INCRBY once per decision) and report
// redis-calls/op. A row whose program is missing is skipped,
// saying which.
func BenchmarkRLSProcesses(b *testing.B) {
	var redisAddr string
	var admin rueidis.Client
	if _, err := exec.LookPath("redis-server"); err == nil {
		redisAddr = redistest.StartServer(b).Addr
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		admin = c
	}
	const conc = 64
	values := rlsValues()
	sluiceBin := os.Getenv("SLUICE")
	if sluiceBin == "" {
		sluiceBin = filepath.Join(b.TempDir(), "sluice")
		if out, err := exec.Command("go", "build", "-C", "..", "-o", sluiceBin, "./cmd/sluice").CombinedOutput(); err != nil {
			b.Fatalf("go build ./cmd/sluice: %v\n%s", err, out)
		}
	}
	var floorCPU float64
	for _, p := range rlsProcesses {
		name := "keys=" + strconv.Itoa(len(values)) + "/conc=" + strconv.Itoa(conc) + "/target=" + p.name
		b.Run(name, func(b *testing.B) {
			if p.redis && redisAddr == "" {
				b.Skip("not measured: redis-server not found in PATH")
			}
			at := rlsProcessEnv{dir: b.TempDir(), sluice: sluiceBin}
			if p.redis {
				at.redis = redisAddr
			}
			cpu := benchRLSProcess(b, p, at, admin, values, conc, floorCPU)
			if p.name == "floor" {
				floorCPU = cpu
			}
		})
	}
}

// benchRLSProcess starts p, warms it up, measures b.N decisions and returns
// the server's CPU time per decision in µs (redis-server's included).
func benchRLSProcess(b *testing.B, p rlsProcess, at rlsProcessEnv, admin rueidis.Client, values []string, conc int, floorCPU float64) float64 {
	ctx := context.Background()
	if p.redis {
		// sluice serve keeps envoyproxy/ratelimit's key layout: each row
		// starts on an empty Redis, not on the keys of the row before.
		if err := admin.Do(ctx, admin.B().Flushall().Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}
	var err error
	if at.grpc, err = freeLoopbackAddr(); err != nil {
		b.Fatal(err)
	}
	if at.http, err = freeLoopbackAddr(); err != nil {
		b.Fatal(err)
	}
	cmd := p.start(b, at)
	decide, closeConn, err := dialRLS(at.grpc)
	if err != nil {
		b.Fatal(err)
	}
	defer closeConn()
	if err := waitRLS(ctx, decide, 30*time.Second); err != nil {
		b.Fatalf("%s: %v", p.name, err)
	}
	if _, err := runRedis(ctx, decide, values, conc, max(20*conc, 2000), nil); err != nil {
		b.Fatal(err)
	}
	if p.redis {
		if err := admin.Do(ctx, admin.B().ConfigResetstat().Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}
	c0 := readCounters(b, p, at, cmd.Process.Pid, admin)
	m := measure(b, ctx, decide, values, conc)
	c1 := readCounters(b, p, at, cmd.Process.Pid, admin)
	// Decisions the failure policy answered (serve's per-call timeout on
	// Redis is 50 ms, then its breaker opens): they never reached Redis,
	// and the row's ops/s count them.
	fallbacks := c1.storeErrors - c0.storeErrors
	if p.storeErrors {
		b.ReportMetric(fallbacks/m.n, "fallback/op")
	}
	if p.redis {
		calls := c1.calls - c0.calls
		if p.callPerDecision && calls != int64(b.N) || calls == 0 && fallbacks == 0 {
			b.Fatalf("redis-server counted %d %s calls for %d decisions (%v answered by the failure policy)",
				calls, strings.ToUpper(p.cmd), b.N, fallbacks)
		}
		b.ReportMetric(float64(calls)/m.n, "redis-calls/op")
		b.ReportMetric((c1.redis-c0.redis).Seconds()*1e6/m.n, "redis-cpu-µs/op")
	}
	m.report(b)
	b.ReportMetric((c1.srv-c0.srv).Seconds()*1e6/m.n, "srv-cpu-µs/op")
	cpu := (c1.srv - c0.srv + c1.redis - c0.redis).Seconds() * 1e6 / m.n
	if p.name != "floor" && floorCPU > 0 {
		b.ReportMetric(cpu/floorCPU, "srv-x-floor")
	}
	return cpu
}

// processCounters are what benchRLSProcess reads before and after the
// timed decisions.
type processCounters struct {
	srv, redis  time.Duration // CPU time of the server's process, of redis-server
	calls       int64         // p.cmd's calls since the last CONFIG RESETSTAT
	storeErrors float64       // sluice serve's sluice_rls_store_errors_total
}

// readCounters reads the counters of p's server (pid) and, for a Redis row,
// redis-server's.
func readCounters(b *testing.B, p rlsProcess, at rlsProcessEnv, pid int, admin rueidis.Client) processCounters {
	ctx := context.Background()
	var c processCounters
	var err error
	if p.storeErrors {
		if c.storeErrors, err = storeErrorsTotal(at.http); err != nil {
			b.Fatal(err)
		}
	}
	if p.redis {
		if c.calls, err = redisCmdCalls(ctx, admin, p.cmd); err != nil {
			b.Fatal(err)
		}
		if c.redis, err = redisServerCPU(ctx, admin); err != nil {
			b.Fatal(err)
		}
	}
	if c.srv, err = threadsCPU(pid); err != nil {
		b.Fatal(err)
	}
	return c
}

// storeErrorsTotal returns the sum of sluice serve's
// sluice_rls_store_errors_total (every rule) from its /metrics at httpAddr.
func storeErrorsTotal(httpAddr string) (float64, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, err
	}
	var total float64
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, "sluice_rls_store_errors_total") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("/metrics: %q: %w", line, err)
		}
		total += v
	}
	return total, nil
}

// threadsCPU returns the CPU time every thread of process pid has run so
// far: the sum of the first field of /proc/pid/task/*/schedstat
// (nanoseconds), precise where /proc/pid/stat counts clock ticks. A thread
// that exits takes its time with it; the servers measured are Go programs,
// whose runtime keeps its threads (it ends one only when a goroutine exits
// locked to it).
func threadsCPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	if err != nil {
		return 0, err
	}
	if len(tasks) == 0 {
		return 0, fmt.Errorf("process %d: no /proc/%d/task/*/schedstat (Linux only)", pid, pid)
	}
	var total time.Duration
	for _, f := range tasks {
		data, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread exited
		}
		if err != nil {
			return 0, err
		}
		field, _, _ := strings.Cut(string(data), " ")
		ns, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// dialRLS returns a decision through go-control-plane's client on one
// connection to addr (the requests built beforehand, one per value of
// rlsValues), and a function that closes the connection.
func dialRLS(addr string) (redisDecide, func(), error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	client := pb.NewRateLimitServiceClient(cc)
	reqs := make(map[string]*pb.RateLimitRequest, redisNumKeys)
	for _, v := range rlsValues() {
		reqs[v] = rlsRequest(v)
	}
	decide := func(ctx context.Context, v *[1]string) (bool, error) {
		req, ok := reqs[v[0]]
		if !ok {
			return false, fmt.Errorf("no request for value %q", v[0])
		}
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			return false, err
		}
		return resp.GetOverallCode() == pb.RateLimitResponse_OK, nil
	}
	return decide, func() { cc.Close() }, nil
}

// waitRLS calls decide until a call is answered OK, or fails after
// timeout: the server has started, loaded its rules and reached its store.
func waitRLS(ctx context.Context, decide redisDecide, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	v := [1]string{rlsValues()[0]}
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		ok, err := decide(cctx, &v)
		cancel()
		if err == nil && ok {
			return nil
		}
		if err == nil {
			err = errors.New("answered OVER_LIMIT")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// benchEnv is the environment of the servers: PATH and HOME only, so that
// neither reads a REDIS_URL, GOMAXPROCS or GOGC of the caller's.
func benchEnv(extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, extra...)
}

// startFloorProcess runs this test binary as the floor's server
// (TestRLSFloorServerProcess) on grpcAddr.
func startFloorProcess(b *testing.B, at rlsProcessEnv) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run", "^TestRLSFloorServerProcess$")
	cmd.Env = benchEnv(floorServerEnv + "=" + at.grpc)
	startProcess(b, cmd, "floor server")
	return cmd
}

// TestRLSFloorServerProcess is the floor's server process of
// BenchmarkRLSProcesses, when $SLUICE_BENCH_FLOOR_ADDR is set: rlsFloor on a
// gRPC server with service.GRPCServerOptions listening there, serving until
// the process is killed. Without the variable it has nothing to do.
func TestRLSFloorServerProcess(t *testing.T) {
	addr := os.Getenv(floorServerEnv)
	if addr == "" {
		t.Skip("the floor server of BenchmarkRLSProcesses: runs only as its child process")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(service.GRPCServerOptions()...)
	pb.RegisterRateLimitServiceServer(gs, rlsFloor{})
	if err := gs.Serve(ln); err != nil {
		t.Fatal(err)
	}
}

// rlsBinary returns the program $env names, or "" after skipping b with
// why when it is unset.
func rlsBinary(b *testing.B, env, why string) string {
	bin := os.Getenv(env)
	if bin == "" {
		b.Skipf("not measured: $%s not set (%s)", env, why)
	}
	return bin
}

// writeRLSConfig writes rlsYAML to dir/rel and returns its path.
func writeRLSConfig(b *testing.B, dir, rel string) string {
	file := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(rlsYAML), 0o644); err != nil {
		b.Fatal(err)
	}
	return file
}

// startSluiceServe runs `sluice serve` with the rules of rlsYAML on
// at.grpc: on Redis when at.redis is set, on its memory store otherwise.
func startSluiceServe(b *testing.B, at rlsProcessEnv) *exec.Cmd {
	store := "memory"
	if at.redis != "" {
		store = "redis://" + at.redis
	}
	cmd := exec.Command(at.sluice, "serve", "-config", writeRLSConfig(b, at.dir, "bench.yaml"), "-store", store,
		"-grpc-addr", at.grpc, "-http-addr", at.http, "-log-level", "warn", "-watch=false")
	cmd.Env = benchEnv()
	startProcess(b, cmd, "sluice serve")
	return cmd
}

// startEnvoyRatelimit runs envoyproxy/ratelimit ($ENVOY_RATELIMIT) with the
// rules of rlsYAML on at.grpc, on the redis-server at at.redis.
func startEnvoyRatelimit(b *testing.B, at rlsProcessEnv) *exec.Cmd {
	bin := rlsBinary(b, "ENVOY_RATELIMIT", "build it with GOBIN=DIR go install "+envoyRatelimitModule+"@"+envoyRatelimitVersion)
	writeRLSConfig(b, at.dir, filepath.Join("ratelimit", "config", "bench.yaml"))
	_, grpcPort, _ := net.SplitHostPort(at.grpc)
	env := []string{
		"RUNTIME_ROOT=" + at.dir, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + at.redis,
		"USE_STATSD=false", "LOG_LEVEL=warn",
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + grpcPort,
	}
	debugAddr, err := freeLoopbackAddr()
	if err != nil {
		b.Fatal(err)
	}
	for _, hp := range [][3]string{{"HOST", "PORT", at.http}, {"DEBUG_HOST", "DEBUG_PORT", debugAddr}} {
		host, port, _ := net.SplitHostPort(hp[2])
		env = append(env, hp[0]+"="+host, hp[1]+"="+port)
	}
	cmd := exec.Command(bin)
	cmd.Dir = at.dir
	cmd.Env = benchEnv(env...)
	startProcess(b, cmd, "envoyproxy/ratelimit")
	return cmd
}

// TestStoreErrorsTotalSumsEveryRule checks the fallback count read from
// sluice serve's /metrics: every rule's sluice_rls_store_errors_total
// summed, the other series ignored.
func TestStoreErrorsTotalSumsEveryRule(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "# HELP sluice_rls_store_errors_total Decisions the store failed to make, per rule.\n"+
			"# TYPE sluice_rls_store_errors_total counter\n"+
			`sluice_rls_store_errors_total{domain="bench",rule="user"} 3`+"\n"+
			`sluice_rls_store_errors_total{domain="bench",rule="ip"} 4.5e+01`+"\n"+
			`sluice_rls_hits_total{domain="bench",rule="user"} 1000`+"\n")
	}))
	defer srv.Close()
	got, err := storeErrorsTotal(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if got != 48 {
		t.Errorf("storeErrorsTotal = %v, want 48 (3 + 45)", got)
	}
}

// TestThreadsCPUAgreesWithGetrusage checks the server CPU of
// BenchmarkRLSProcesses on this process: over work on two threads, the sum
// of its threads' schedstat moves as getrusage's user and system time do.
func TestThreadsCPUAgreesWithGetrusage(t *testing.T) {
	pid := os.Getpid()
	if _, err := threadsCPU(pid); err != nil {
		t.Skip(err)
	}
	s0, _ := threadsCPU(pid)
	r0 := processCPU()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Locked, so that the two loops run on two threads; unlocked
			// before the goroutine ends, or its thread would exit and
			// take its schedstat with it.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			x := 1.0
			for i := range 50_000_000 {
				x = x*1.0000001 + float64(i&1)
			}
			sinkFloat.Add(int64(x))
		}()
	}
	wg.Wait()
	s1, err := threadsCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	ds, dr := s1-s0, processCPU()-r0
	if dr < 20*time.Millisecond {
		t.Skipf("getrusage moved by %v only: too little to compare", dr)
	}
	if ratio := float64(ds) / float64(dr); ratio < 0.8 || ratio > 1.25 {
		t.Errorf("threads' schedstat moved by %v, getrusage by %v (ratio %.2f, want 0.8–1.25)", ds, dr, ratio)
	}
}

// sinkFloat keeps TestThreadsCPUAgreesWithGetrusage's loop from being
// optimized away.
var sinkFloat atomic.Int64
