package redisstore_test

import (
	"context"
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
)

// logString returns a sliding log as sliding_log.lua keeps it: a header of
// (dead, base) and n entries one microsecond apart from first, each of one
// unit, as little-endian doubles.
func logString(first int64, n int) string {
	b := make([]byte, 16+16*n)
	for i := range n {
		binary.LittleEndian.PutUint64(b[16+16*i:], math.Float64bits(float64(first+int64(i))))
		binary.LittleEndian.PutUint64(b[24+16*i:], math.Float64bits(float64(i+1)))
	}
	return string(b)
}

// slowestScript returns the longest a script (EVALSHA or EVAL) took, in
// microseconds, among the commands the slow log holds, and empties it.
func slowestScript(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(srv.Do(t, "SLOWLOG", "GET", "128")), "\n")
	srv.Do(t, "SLOWLOG", "RESET")
	var worst int64
	// Each entry flattens to id, timestamp, microseconds, then the command.
	for i := 0; i+3 < len(lines); i++ {
		if c := strings.ToUpper(lines[i+3]); c != "EVALSHA" && c != "EVAL" && c != "EVALSHA_RO" {
			continue
		}
		if us, err := strconv.ParseInt(lines[i+2], 10, 64); err == nil {
			worst = max(worst, us)
		}
	}
	return worst
}

// A long log compacts to its live entries, and the call that compacts
// is the one whose work grows with the log: it copies every live entry
// once (GETRANGE, then SET), while Redis serves no other client. The test
// builds logs of 16,384, 131,072 (the default max_log_entries) and
// 1,048,576 entries (the most max_log_entries allows), lets a third of
// each leave the window, and logs how long the compacting call took by
// the slow log (docs/algorithms.md quotes the figures). It asserts the
// compaction: the string holds the header and the live entries alone.
func TestSlidingLogCompactionKeepsOnlyTheLiveEntries(t *testing.T) {
	srv := redistest.StartServer(t)
	clock := clocktest.New()
	s := open(t, "redis://"+srv.Addr, clock)
	ctx := context.Background()
	for _, n := range []int{1 << 14, 1 << 17, 1 << 20} {
		lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: n, Period: time.Hour}
		key := "long" + strconv.Itoa(n)
		if _, err := s.AllowN(ctx, key, lim, 1); err != nil { // loads the script
			t.Fatal(err)
		}
		first := clock.Now().UnixMicro() + 1
		srv.Do(t, "SET", s.LimitKey(lim, key), logString(first, n))
		srv.Do(t, "PEXPIRE", s.LimitKey(lim, key), "7200000")
		srv.Do(t, "CONFIG", "SET", "slowlog-log-slower-than", "0")
		srv.Do(t, "SLOWLOG", "RESET")
		// A third of the entries have left: the next admitted request
		// compacts, keeping the other two thirds and its own entry.
		gone := n / 3
		clock.Set(time.UnixMicro(first + int64(time.Hour/time.Microsecond) + int64(gone-1)))
		r, err := s.AllowN(ctx, key, lim, 1)
		if err != nil || !r.Allowed || r.Remaining != gone-1 {
			t.Fatalf("log of %d with %d gone: %+v, %v; want admitted, remaining %d", n, gone, r, err, gone-1)
		}
		us := slowestScript(t, srv)
		srv.Do(t, "CONFIG", "SET", "slowlog-log-slower-than", "10000")
		l, _ := strconv.Atoi(srv.Do(t, "STRLEN", s.LimitKey(lim, key)))
		if want := 16 + 16*(n-gone+1); l != want {
			t.Errorf("log of %d entries with %d gone: %d bytes after the call, want %d (compacted)", n, gone, l, want)
		}
		t.Logf("log of %d entries (%d bytes), %d gone: the compacting call took %d µs", n, 16*n, gone, us)
	}
}
