package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
)

// usedMemory returns INFO memory's used_memory.
func usedMemory(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	for _, line := range strings.Split(srv.Do(t, "INFO", "memory"), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("used_memory: %q", v)
			}
			return n
		}
	}
	t.Fatal("INFO memory has no used_memory")
	return 0
}

// slowCalls returns the commands the slow log holds (each took longer than
// its threshold), one line each, and empties it.
func slowCalls(t *testing.T, srv *redistest.Server) []string {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(srv.Do(t, "SLOWLOG", "LEN")))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if n > 0 {
		out = strings.Split(strings.TrimSpace(srv.Do(t, "SLOWLOG", "GET", strconv.Itoa(n))), "\n")
	}
	srv.Do(t, "SLOWLOG", "RESET")
	return out
}

// TestSlidingLogAmplificationBounded plays the amplification attack on
// Redis: requests of cost 1,048,576 on a sliding log of 1,048,576 per year,
// one, then 100 on keys of their own. Each must keep Redis busy under 5 ms
// (the slow log, set to 5 ms, stays empty: it times the command on the
// server, whatever the load of the machine running the test) and the 100
// keys must cost Redis under 1 MB, not a sorted-set member per unit.
func TestSlidingLogAmplificationBounded(t *testing.T) {
	srv := redistest.StartServer(t)
	srv.Do(t, "CONFIG", "SET", "slowlog-log-slower-than", "5000")
	s := open(t, "redis://"+srv.Addr, nil)
	ctx := context.Background()
	lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: sluice.MaxLogRate, Period: 365 * 24 * time.Hour}
	// Load the script first, so that its first call is timed as any other.
	if _, err := s.AllowN(ctx, "amplify:warm", lim, 1); err != nil {
		t.Fatal(err)
	}
	slowCalls(t, srv)
	before := usedMemory(t, srv)
	// A script whose work grew with the cost would be slow on every one of
	// the 100 requests; a loaded machine may deschedule redis-server during
	// a few of them, so a handful over 5 ms is noise, not amplification.
	var slowReqs []string
	for i := range 100 {
		key := "amplify:" + strconv.Itoa(i)
		r, err := s.AllowN(ctx, key, lim, lim.Rate)
		if err != nil || !r.Allowed {
			t.Fatalf("AllowN(%q, cost %d) = %+v, %v; want admitted", key, lim.Rate, r, err)
		}
		if slow := slowCalls(t, srv); len(slow) > 0 {
			slowReqs = append(slowReqs, fmt.Sprintf("request %d: SLOWLOG GET begins: %s", i+1, strings.Join(slow[:min(len(slow), 6)], " ")))
		}
		if r, err := s.AllowN(ctx, key, lim, 1); err != nil || r.Allowed {
			t.Fatalf("AllowN(%q, 1) after the whole allowance = %+v, %v; want denied", key, r, err)
		}
	}
	if len(slowReqs) > 5 {
		t.Fatalf("%d of 100 requests of cost %d kept Redis busy over 5 ms:\n%s", len(slowReqs), lim.Rate, strings.Join(slowReqs, "\n"))
	}
	grown := usedMemory(t, srv) - before
	if grown > 1<<20 {
		t.Fatalf("100 requests of cost %d grew Redis's used_memory by %d bytes, want under 1 MiB", lim.Rate, grown)
	}
	t.Logf("100 requests of cost %d grew used_memory by %d bytes", lim.Rate, grown)
}
