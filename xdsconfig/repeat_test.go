package xdsconfig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/internal/xdstest"
)

// fakeNow is a clock a test moves.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// A control plane in a loop, re-sending the same resources under a new
// version each time, costs one apply and one log line, not one each: a
// server sent 23 k updates per 10 s and megabytes of INFO log. The same
// refused resources re-sent are NACKed each time with the same error, not
// applied again, and logged once, then once per RefusalLogEvery with the
// count of the repeats. Before, each of the 40 identical responses was
// applied and logged (40 applies, 40 lines), as was each refused one.
func TestRepeatedXDSUpdatesAreAppliedAndLoggedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	srv := xdstest.Start(t, "127.0.0.1:0", nil)
	var logs testlog.Buffer
	var mu sync.Mutex
	applies := 0
	clock := &fakeNow{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c, err := New(Config{Target: srv.Addr, NodeID: "node-1", Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: clock.now,
		Apply: func(_ context.Context, c *config.Config) error {
			mu.Lock()
			defer mu.Unlock()
			applies++
			if c.Lookup("refused", []config.Entry{{Key: "user", Value: "x"}}) != nil {
				return errors.New("the domain refused is refused")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(rctx); close(done) }()
	defer func() { stop(); <-done }()
	count := func(s string) int { return strings.Count(logs.String(), s) }
	nApplies := func() int { mu.Lock(); defer mu.Unlock(); return applies }

	const n = 40
	i := 0
	for v := range n {
		version := fmt.Sprintf("same-%d", v)
		srv.Push(t, "node-1", version, userLimit("a", "d", 5))
		_, i = srv.WaitRequest(ctx, t, i, func(r xdstest.Request) bool { return xdstest.IsACK(r, version) })
	}
	if got, lines := nApplies(), count("config applied"); got != 1 || lines != 1 {
		t.Errorf("the same resources sent %d times: applied %d times, %d log lines; want 1 and 1", n, got, lines)
	}
	if c.Version() != fmt.Sprintf("same-%d", n-1) {
		t.Errorf("Version() = %q, want the last version ACKed", c.Version())
	}

	for v := range n {
		srv.Push(t, "node-1", fmt.Sprintf("bad-%d", v), userLimit("a", "refused", 5))
		var nack xdstest.Request
		nack, i = srv.WaitRequest(ctx, t, i+1, xdstest.IsNACK)
		if !strings.Contains(nack.GetErrorDetail().GetMessage(), "domain refused is refused") || nack.GetVersionInfo() != fmt.Sprintf("same-%d", n-1) {
			t.Fatalf("NACK %d: %v, want the error, and the running version", v, nack.DiscoveryRequest)
		}
	}
	if got, lines := nApplies(), count("config refused"); got != 2 || lines != 1 {
		t.Errorf("the same refused resources sent %d times: applied %d times in all, %d log lines; want 2 (one good, one refused) and 1", n, got, lines)
	}
	// The server itself re-sends a refused version after each NACK: the
	// responses refused are n and more.
	clock.add(RefusalLogEvery)
	srv.Push(t, "node-1", "bad-again", userLimit("a", "refused", 5))
	// The server keeps re-sending the refused version after each NACK, so
	// a NACK seen now may answer one of those: wait for the line itself.
	for count("config refused again") == 0 && ctx.Err() == nil {
		_, i = srv.WaitRequest(ctx, t, i+1, xdstest.IsNACK)
	}
	again := regexp.MustCompile(`config refused again \(NACK\); keeping the running config" version=bad-\S+ running_version=same-39 err="the domain refused is refused" repeats=(\d+) since=1m0s`).FindAllStringSubmatch(logs.String(), -1)
	if lines := count("config refused"); lines != 2 || len(again) != 1 {
		t.Fatalf("a minute on, the refusal repeated: %d lines, %d with a count; want 2 and 1:\n%s", lines, len(again), logs.String())
	}
	if r, _ := strconv.Atoi(again[0][1]); r < n {
		t.Errorf("the refusal's line counts %d repeats, want at least %d", r, n)
	}
	if got := nApplies(); got != 2 {
		t.Errorf("applied %d times in all, want 2", got)
	}
}
