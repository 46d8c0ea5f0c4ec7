package main

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// TestStatCPUTicksCountsFieldsAfterTheLastParenthesis: a command name with
// spaces and parentheses does not shift utime and stime.
func TestStatCPUTicksCountsFieldsAfterTheLastParenthesis(t *testing.T) {
	line := "4242 (redis (a) b) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 37 0 0 20 0 5 0 123 456 789\n"
	got, err := statCPUTicks(line)
	if err != nil {
		t.Fatal(err)
	}
	if got != 287 {
		t.Errorf("statCPUTicks = %d, want 287 (utime 250 + stime 37)", got)
	}
	if _, err := statCPUTicks("4242 (short) S 1 2"); err == nil {
		t.Error("statCPUTicks of a truncated line: no error")
	}
}

// TestTallyComparesEachWindowWithMinOfSentAndLimit: per key and window,
// the ideal is min(sent, limit); admissions past the limit are over,
// admissions short of the ideal are under, and windows do not offset each
// other.
func TestTallyComparesEachWindowWithMinOfSentAndLimit(t *testing.T) {
	start := time.Unix(1000, 0)
	w := newWindows(2, time.Second, start, start.Add(2*time.Second))
	add := func(key int, sec int64, sent, admitted int) {
		for i := range sent {
			w.add(key, time.Unix(1000+sec, 500_000_000), i < admitted)
		}
	}
	add(0, 0, 10, 5) // limit 5: exact
	add(0, 1, 10, 7) // 2 over
	add(1, 0, 3, 1)  // ideal 3: 2 under
	add(1, 1, 4, 4)  // exact
	got := w.tally(5)
	want := admission{decisions: 27, ideal: 5 + 5 + 3 + 4, admitted: 5 + 7 + 1 + 4, over: 2, under: 2}
	if got != want {
		t.Errorf("tally = %+v, want %+v", got, want)
	}
}

// TestWindowsDropDecisionsOutsideTheRun: an instant before the first
// window or past the last is not counted in another key's cell.
func TestWindowsDropDecisionsOutsideTheRun(t *testing.T) {
	start := time.Unix(1000, 0)
	w := newWindows(2, time.Second, start, start.Add(time.Second))
	w.add(1, time.Unix(999, 0), true)
	w.add(0, time.Unix(1010, 0), true)
	if got := w.tally(1); got != (admission{}) {
		t.Errorf("tally = %+v, want nothing counted", got)
	}
}

// TestCommandCallsSumsScriptsAndIncrbyAsOperations: the script commands'
// calls are summed apart, and with INCR and INCRBY (envoyproxy/ratelimit's
// operation) as operations; INFO, CLUSTER, EXPIRE and the commands a script
// runs (HSET) are not.
func TestCommandCallsSumsScriptsAndIncrbyAsOperations(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=120,usec=3000,usec_per_call=25.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_fcall_ro:calls=2,usec=10,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=9,usec=100,usec_per_call=11.1,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_cluster|slots:calls=4,usec=40,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_incrby:calls=50,usec=40,usec_per_call=0.80,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_expire:calls=50,usec=40,usec_per_call=0.80,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hset:calls=70,usec=40,usec_per_call=0.80,rejected_calls=0,failed_calls=0\r\n"
	scripts, ops, err := commandCalls(info)
	if err != nil {
		t.Fatal(err)
	}
	if scripts != 125 {
		t.Errorf("scripts = %d, want 125 (120 + 3 + 2)", scripts)
	}
	if ops != 175 {
		t.Errorf("ops = %d, want 175 (125 scripts + 50 INCRBY)", ops)
	}
}

// fixedAnswer is an RLS server that answers every call with code.
type fixedAnswer struct {
	pb.UnimplementedRateLimitServiceServer
	code  pb.RateLimitResponse_Code
	calls atomic.Int64
}

func (f *fixedAnswer) ShouldRateLimit(context.Context, *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	f.calls.Add(1)
	return &pb.RateLimitResponse{OverallCode: f.code}, nil
}

// serveFixed starts f on a loopback gRPC server and returns its address.
func serveFixed(t *testing.T, f *fixedAnswer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	pb.RegisterRateLimitServiceServer(gs, f)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}

// fields parses the report line as cluster.sh's awk does.
func fields(t *testing.T, line string) map[string]string {
	t.Helper()
	f := map[string]string{}
	for _, kv := range strings.Fields(line) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("field %q is not key=value in %q", kv, line)
		}
		f[k] = v
	}
	return f
}

// TestRunReportsAdmittedAgainstTheLimit drives two servers, one admitting
// every call and one refusing every call, and checks the line cluster.sh
// reads: each server's admissions against min(sent, limit) per window,
// which is exact whatever the timing (the limit is above anything one
// window can send, so min(sent, limit) is sent).
func TestRunReportsAdmittedAgainstTheLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		code  pb.RateLimitResponse_Code
		check func(t *testing.T, f map[string]string)
	}{
		{"admits every call", pb.RateLimitResponse_OK, func(t *testing.T, f map[string]string) {
			if f["admitted"] != f["run_decisions"] || f["ideal"] != f["run_decisions"] || f["over"] != "0" || f["under"] != "0" {
				t.Errorf("admitted=%s ideal=%s over=%s under=%s, want admitted = ideal = run_decisions (%s), none over or under",
					f["admitted"], f["ideal"], f["over"], f["under"], f["run_decisions"])
			}
			if f["refused"] != "0" {
				t.Errorf("refused = %s, want 0", f["refused"])
			}
		}},
		{"refuses every call", pb.RateLimitResponse_OVER_LIMIT, func(t *testing.T, f map[string]string) {
			if f["admitted"] != "0" || f["under"] != f["ideal"] || f["ideal"] != f["run_decisions"] || f["over"] != "0" {
				t.Errorf("admitted=%s ideal=%s over=%s under=%s, want none admitted, all of run_decisions (%s) under",
					f["admitted"], f["ideal"], f["over"], f["under"], f["run_decisions"])
			}
			if f["refused"] != f["decisions"] {
				t.Errorf("refused = %s, want every timed decision (%s)", f["refused"], f["decisions"])
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &fixedAnswer{code: tc.code}
			o, err := parseFlags([]string{"-targets", serveFixed(t, srv), "-conc", "4", "-keys", "50",
				"-limit", "1000000000", "-warmup", "50ms", "-duration", "200ms", "-wait", "10s"})
			if err != nil {
				t.Fatal(err)
			}
			line, err := run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			f := fields(t, line)
			for _, k := range []string{"dps", "decisions", "refused", "errors", "sluice_cpu_us", "redis_cpu_us", "cli_cpu_us",
				"redis_calls", "run_decisions", "ideal", "admitted", "over", "under"} {
				if _, ok := f[k]; !ok {
					t.Errorf("no %s= in %q", k, line)
				}
			}
			if f["decisions"] == "0" || f["errors"] != "0" {
				t.Fatalf("decisions=%s errors=%s, want some decisions and no errors: %q", f["decisions"], f["errors"], line)
			}
			// The probe's call is not counted, every other one is.
			if got := strconv.FormatInt(srv.calls.Load()-1, 10); f["run_decisions"] != got {
				t.Errorf("run_decisions = %s, want the server's calls less the probe (%s)", f["run_decisions"], got)
			}
			tc.check(t, f)
		})
	}
}
