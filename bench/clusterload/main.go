// Command clusterload is the load generator of bench/cluster.sh: it drives
// Zipf-distributed ShouldRateLimit calls over the Envoy RLS v3 gRPC API at
// one or more `sluice serve` processes, and prints one line of key=value
// fields: the decisions per second, the CPU per decision of the servers and
// of redis-server (from /proc/PID/stat, utime + stime, over the timed
// interval only), Redis script calls per decision, and the admitted count
// against the limit.
//
// Load: -conc goroutines per target, each with one key at a time drawn from
// a Zipf distribution over -keys descriptor values (user=000000 …; value 0
// is the most frequent), sharing one gRPC connection per target. The first
// -warmup is not timed; the next -duration is.
//
// Admitted versus limit: every decision of the run (warm-up included, so
// that each fixed window is counted whole on a store emptied before the
// run) is put in the epoch-aligned window of -limit-period that holds the
// midpoint of its call. Per key and window, a store that admits exactly
// admits min(sent, limit); the line reports that ideal over the run
// (ideal), what was admitted (admitted), and the admissions past the limit
// in windows that went over it (over) and the ones short of the ideal in
// windows that did not reach it (under). A decision answered near a window's
// turn may be put in the window next to the one the store counted it in,
// which shows as a little over in one and under in the other.
//
// The line's fields:
//
//	targets conc keys zipf_s limit        the load, as given
//	decisions secs dps                    timed decisions, seconds, decisions/s
//	refused errors                        timed refusals (OVER_LIMIT), errors
//	sluice_cpu_us redis_cpu_us cli_cpu_us CPU µs per timed decision
//	redis_calls                           script calls (EVAL*, FCALL*) per timed decision
//	redis_ops                             store operations per timed decision: script calls
//	                                      and INCR/INCRBY calls (envoyproxy/ratelimit's one
//	                                      per descriptor; its EXPIRE rides the same pipeline)
//	run_decisions ideal admitted over under   admitted versus limit, whole run
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// options are clusterload's flags.
type options struct {
	targets     []string // gRPC addresses of the servers
	domain, key string   // the descriptor: domain, entry key
	conc        int      // goroutines per target
	keys        int      // distinct values
	zipfS       float64  // Zipf exponent, > 1
	limit       int64    // the rule's requests per period, for admitted vs limit; 0: not counted
	period      time.Duration
	warmup      time.Duration
	duration    time.Duration
	wait        time.Duration // for the targets to answer
	sluicePIDs  []int
	redisPIDs   []int
	redisAddrs  []string
	clkTck      int64
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterload:", err)
		os.Exit(2)
	}
	line, err := run(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterload:", err)
		os.Exit(1)
	}
	fmt.Println(line)
}

// parseFlags reads the command line.
func parseFlags(args []string) (options, error) {
	var o options
	var targets, sluicePIDs, redisPIDs, redisAddrs string
	fs := flag.NewFlagSet("clusterload", flag.ContinueOnError)
	fs.StringVar(&targets, "targets", "", "comma-separated gRPC addresses of the sluice serve processes")
	fs.StringVar(&o.domain, "domain", "bench", "the RLS domain")
	fs.StringVar(&o.key, "key", "user", "the descriptor entry's key")
	fs.IntVar(&o.conc, "conc", 32, "concurrent calls per target")
	fs.IntVar(&o.keys, "keys", 10000, "distinct descriptor values")
	fs.Float64Var(&o.zipfS, "zipf-s", 1.1, "Zipf exponent (> 1); value i is drawn with weight 1/(1+i)^s")
	fs.Int64Var(&o.limit, "limit", 0, "the rule's requests per -limit-period, for admitted versus limit; 0: not counted")
	fs.DurationVar(&o.period, "limit-period", time.Second, "the rule's period (fixed, epoch-aligned windows)")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "load before the timed interval")
	fs.DurationVar(&o.duration, "duration", 8*time.Second, "the timed interval")
	fs.DurationVar(&o.wait, "wait", 30*time.Second, "how long each target may take to answer its first call")
	fs.StringVar(&sluicePIDs, "sluice-pids", "", "comma-separated PIDs of the servers, for their CPU")
	fs.StringVar(&redisPIDs, "redis-pids", "", "comma-separated PIDs of the redis-servers, for their CPU")
	fs.StringVar(&redisAddrs, "redis-addrs", "", "comma-separated host:port of the redis-servers, for their script calls (INFO commandstats)")
	fs.Int64Var(&o.clkTck, "clk-tck", 100, "clock ticks per second of /proc/PID/stat (getconf CLK_TCK)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.targets = splitList(targets)
	o.redisAddrs = splitList(redisAddrs)
	var err error
	if o.sluicePIDs, err = parsePIDs(sluicePIDs); err != nil {
		return o, fmt.Errorf("-sluice-pids: %w", err)
	}
	if o.redisPIDs, err = parsePIDs(redisPIDs); err != nil {
		return o, fmt.Errorf("-redis-pids: %w", err)
	}
	switch {
	case len(o.targets) == 0:
		return o, errors.New("-targets: none given")
	case o.conc < 1 || o.keys < 1:
		return o, errors.New("-conc and -keys: want 1 or more")
	case !(o.zipfS > 1):
		return o, fmt.Errorf("-zipf-s %v: want more than 1", o.zipfS)
	case o.period <= 0 || o.duration <= 0 || o.warmup < 0 || o.clkTck <= 0:
		return o, errors.New("-limit-period, -duration, -clk-tck: want more than 0; -warmup: 0 or more")
	}
	return o, nil
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parsePIDs parses a comma-separated list of process IDs.
func parsePIDs(s string) ([]int, error) {
	var pids []int
	for _, f := range splitList(s) {
		p, err := strconv.Atoi(f)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("%q is not a process ID", f)
		}
		pids = append(pids, p)
	}
	return pids, nil
}

// windows counts, per key and window, the decisions sent and admitted.
type windows struct {
	keys     int
	first    int64 // the first window's index (its start / period)
	period   time.Duration
	sent     []atomic.Int32
	admitted []atomic.Int32
}

// newWindows returns counters for keys over the windows from start to end.
func newWindows(keys int, period time.Duration, start, end time.Time) *windows {
	first := start.UnixNano() / int64(period)
	n := int(end.UnixNano()/int64(period)-first) + 2
	return &windows{keys: keys, first: first, period: period,
		sent: make([]atomic.Int32, keys*n), admitted: make([]atomic.Int32, keys*n)}
}

// add counts one decision on key at instant at; one past the last window
// is dropped.
func (w *windows) add(key int, at time.Time, ok bool) {
	i := int(at.UnixNano()/int64(w.period)-w.first)*w.keys + key
	if i < 0 || i >= len(w.sent) {
		return
	}
	w.sent[i].Add(1)
	if ok {
		w.admitted[i].Add(1)
	}
}

// admission is the admitted count against the limit over a run.
type admission struct {
	decisions, ideal, admitted, over, under int64
}

// tally compares each window's admissions with min(sent, limit).
func (w *windows) tally(limit int64) admission {
	var a admission
	for i := range w.sent {
		s, adm := int64(w.sent[i].Load()), int64(w.admitted[i].Load())
		ideal := min(s, limit)
		a.decisions += s
		a.ideal += ideal
		a.admitted += adm
		if adm > limit {
			a.over += adm - limit
		} else if adm < ideal {
			a.under += ideal - adm
		}
	}
	return a
}

// snapshot is what is read at each end of the timed interval.
type snapshot struct {
	at                 time.Time
	decisions, refused int64
	errors             int64
	sluice, redis, cli time.Duration
	calls, ops         int64
}

// counters are the load's running totals.
type counters struct {
	decisions, refused, errors atomic.Int64
	firstErr                   atomic.Pointer[error]
}

// run drives the load and returns the report line.
func run(ctx context.Context, o options) (string, error) {
	conns := make([]pb.RateLimitServiceClient, len(o.targets))
	for i, addr := range o.targets {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return "", err
		}
		defer cc.Close()
		conns[i] = pb.NewRateLimitServiceClient(cc)
	}
	reqs := make([]*pb.RateLimitRequest, o.keys)
	for i := range reqs {
		reqs[i] = &pb.RateLimitRequest{Domain: o.domain, Descriptors: []*rlpb.RateLimitDescriptor{{
			Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: o.key, Value: fmt.Sprintf("%06d", i)}},
		}}}
	}
	// The readiness probe uses a value outside the measured ones, so that
	// it spends no key's limit.
	probe := &pb.RateLimitRequest{Domain: o.domain, Descriptors: []*rlpb.RateLimitDescriptor{{
		Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: o.key, Value: "probe"}},
	}}}
	for i, c := range conns {
		if err := waitReady(ctx, c, probe, o.wait); err != nil {
			return "", fmt.Errorf("%s: %w", o.targets[i], err)
		}
	}

	start := time.Now()
	timedFrom := start.Add(o.warmup)
	end := timedFrom.Add(o.duration)
	win := newWindows(o.keys, o.period, start, end)
	var cnt counters
	var wg sync.WaitGroup
	for t, c := range conns {
		for g := range o.conc {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				drive(ctx, c, reqs, o, seed, end, win, &cnt)
			}(uint64(t*o.conc + g + 1))
		}
	}
	time.Sleep(time.Until(timedFrom))
	s0, err := take(o, &cnt)
	if err != nil {
		return "", err
	}
	time.Sleep(time.Until(end))
	s1, err := take(o, &cnt)
	if err != nil {
		return "", err
	}
	wg.Wait()
	if p := cnt.firstErr.Load(); p != nil && cnt.decisions.Load() == 0 {
		return "", *p
	}
	return format(o, s0, s1, win), nil
}

// drive makes decisions until end, drawing keys from its own Zipf source.
func drive(ctx context.Context, c pb.RateLimitServiceClient, reqs []*pb.RateLimitRequest, o options, seed uint64, end time.Time, win *windows, cnt *counters) {
	z := rand.NewZipf(rand.New(rand.NewPCG(seed, 0x5eed)), o.zipfS, 1, uint64(o.keys-1))
	for {
		t0 := time.Now()
		if !t0.Before(end) {
			return
		}
		k := int(z.Uint64())
		resp, err := c.ShouldRateLimit(ctx, reqs[k])
		t1 := time.Now()
		if err != nil {
			cnt.errors.Add(1)
			cnt.firstErr.CompareAndSwap(nil, &err)
			time.Sleep(time.Millisecond) // a server gone does not become a busy loop
			continue
		}
		ok := resp.GetOverallCode() == pb.RateLimitResponse_OK
		cnt.decisions.Add(1)
		if !ok {
			cnt.refused.Add(1)
		}
		win.add(k, t0.Add(t1.Sub(t0)/2), ok)
	}
}

// waitReady calls probe until it is answered (OK or OVER_LIMIT), or fails
// after timeout.
func waitReady(ctx context.Context, c pb.RateLimitServiceClient, probe *pb.RateLimitRequest, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.ShouldRateLimit(cctx, probe)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not answering within %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// take reads the counters, the processes' CPU and Redis's script calls.
func take(o options, cnt *counters) (snapshot, error) {
	s := snapshot{at: time.Now(), decisions: cnt.decisions.Load(), refused: cnt.refused.Load(), errors: cnt.errors.Load()}
	var err error
	if s.sluice, err = pidsCPU(o.sluicePIDs, o.clkTck); err != nil {
		return s, err
	}
	if s.redis, err = pidsCPU(o.redisPIDs, o.clkTck); err != nil {
		return s, err
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.cli = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, addr := range o.redisAddrs {
		n, ops, err := redisCommandCalls(addr)
		if err != nil {
			return s, fmt.Errorf("redis %s: %w", addr, err)
		}
		s.calls += n
		s.ops += ops
	}
	return s, nil
}

// pidsCPU sums utime + stime of the processes.
func pidsCPU(pids []int, clkTck int64) (time.Duration, error) {
	var total time.Duration
	for _, p := range pids {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if err != nil {
			return 0, err
		}
		ticks, err := statCPUTicks(string(data))
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", p, err)
		}
		total += time.Duration(ticks * int64(time.Second) / clkTck)
	}
	return total, nil
}

// statCPUTicks returns utime + stime (fields 14 and 15) of a /proc/PID/stat
// line, in clock ticks. The command name (field 2) is in parentheses and
// may hold spaces and parentheses: the fields are counted after its last ')'.
func statCPUTicks(line string) (int64, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, errors.New("no ')' after the command name")
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state): utime is field 14, f[11]; stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want 13 or more", len(f))
	}
	u, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	s, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return u + s, nil
}

// redisCommandCalls returns the script calls (EVAL, EVALSHA, FCALL and
// their _RO forms) and the store operations (those and INCR, INCRBY) that
// a redis-server has counted since it started or its last CONFIG
// RESETSTAT, from INFO commandstats over one plain connection.
func redisCommandCalls(addr string) (scripts, ops int64, err error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")); err != nil {
		return 0, 0, err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, 0, err
	}
	if !strings.HasPrefix(head, "$") {
		return 0, 0, fmt.Errorf("INFO: unexpected reply %q", strings.TrimSpace(head))
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || n < 0 {
		return 0, 0, fmt.Errorf("INFO: bad length %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := readFull(r, body); err != nil {
		return 0, 0, err
	}
	return commandCalls(string(body))
}

// readFull reads len(p) bytes.
func readFull(r *bufio.Reader, p []byte) (int, error) {
	got := 0
	for got < len(p) {
		n, err := r.Read(p[got:])
		got += n
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

// commandCalls sums, in an INFO commandstats text (lines such as
// cmdstat_evalsha:calls=12,usec=…), the calls= of the script commands
// (scripts) and of those and INCR, INCRBY (ops). Redis counts the commands
// a script runs as well, so the others (HSET, PEXPIRE, …) are not summed:
// they may be a script's.
func commandCalls(info string) (scripts, ops int64, err error) {
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		cmd, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		script := strings.HasPrefix(cmd, "eval") || strings.HasPrefix(cmd, "fcall")
		if !script && cmd != "incr" && cmd != "incrby" {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, 0, fmt.Errorf("%s: %w", name, err)
				}
				ops += n
				if script {
					scripts += n
				}
			}
		}
	}
	return scripts, ops, nil
}

// format makes the report line.
func format(o options, s0, s1 snapshot, win *windows) string {
	n := float64(s1.decisions - s0.decisions)
	secs := s1.at.Sub(s0.at).Seconds()
	per := func(d time.Duration) string {
		if n == 0 {
			return "0"
		}
		return strconv.FormatFloat(d.Seconds()*1e6/n, 'f', 2, 64)
	}
	calls, ops := "0", "0"
	if n > 0 {
		calls = strconv.FormatFloat(float64(s1.calls-s0.calls)/n, 'f', 4, 64)
		ops = strconv.FormatFloat(float64(s1.ops-s0.ops)/n, 'f', 4, 64)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "targets=%d conc=%d keys=%d zipf_s=%g limit=%d", len(o.targets), o.conc, o.keys, o.zipfS, o.limit)
	fmt.Fprintf(&b, " decisions=%d secs=%.2f dps=%.0f refused=%d errors=%d",
		s1.decisions-s0.decisions, secs, n/secs, s1.refused-s0.refused, s1.errors-s0.errors)
	fmt.Fprintf(&b, " sluice_cpu_us=%s redis_cpu_us=%s cli_cpu_us=%s redis_calls=%s redis_ops=%s",
		per(s1.sluice-s0.sluice), per(s1.redis-s0.redis), per(s1.cli-s0.cli), calls, ops)
	if o.limit > 0 {
		a := win.tally(o.limit)
		fmt.Fprintf(&b, " run_decisions=%d ideal=%d admitted=%d over=%d under=%d", a.decisions, a.ideal, a.admitted, a.over, a.under)
	}
	return b.String()
}
