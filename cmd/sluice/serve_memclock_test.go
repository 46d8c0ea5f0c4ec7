package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testlog"
)

// -memory-clock-resolution puts the memory store on a coarse clock of that
// resolution; without it the store reads the exact clock.
func TestServeMemoryClockResolutionReachesTheStore(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 0},
		{[]string{"-memory-clock-resolution", "100us"}, 100 * time.Microsecond},
	} {
		s, code, done := parseServeFlags(tt.args, io.Discard, io.Discard)
		if done || code != 0 {
			t.Fatalf("%v: parse: code %d, done %v", tt.args, code, done)
		}
		if err := s.checkOptions(); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if err := s.openStore(context.Background()); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if got := s.st.Mem.ClockResolution(); got != tt.want {
			t.Errorf("%v: the memory store's clock resolution is %v, want %v", tt.args, got, tt.want)
		}
		s.st.Close()
	}
}

// A resolution outside 10µs–10ms (other than 0) is refused, naming the
// flag: finer costs more than it saves, coarser makes short periods late.
func TestServeRefusesAMemoryClockResolutionOutOfRange(t *testing.T) {
	for _, v := range []string{"1us", "11ms", "-1ms"} {
		var out, errb testlog.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		code := runServe(ctx, []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-memory-clock-resolution", v}, &out, &errb)
		cancel()
		if code != 2 || !strings.Contains(errb.String(), "-memory-clock-resolution") {
			t.Errorf("-memory-clock-resolution %s: exit %d, stderr %q; want 2 naming it", v, code, errb.String())
		}
	}
}

// With Redis the flag is moot, and the start-up line of what is not acted
// on names it.
func TestServeNamesMemoryClockResolutionMootWithRedis(t *testing.T) {
	s := launch(t, "-store", "redis://127.0.0.1:1", "-memory-clock-resolution", "100us")
	defer s.stop(t)
	for l := range strings.SplitSeq(s.stderr.String(), "\n") {
		if strings.Contains(l, "not acted on") && strings.Contains(l, "-memory-clock-resolution") {
			return
		}
	}
	t.Errorf("the start-up lines %q do not name -memory-clock-resolution as not acted on", s.stderr.String())
}
