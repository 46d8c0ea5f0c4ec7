package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testlog"
)

// A SIGHUP that comes while serve is still starting (loading a large
// config, say, as a config-reloader sidecar may send one right after a
// deploy) must not kill it: before, SIGHUP's default action ended the
// process (exit 129) until the reload handler was installed after the
// config, the store and the listeners. It is now taken from the start, and
// reloads once serve runs.
//
// The SIGHUPs go from when serve opens its config, its first step after
// taking SIGHUP, every 20 ms until it prints its addresses (see
// startHUPing): not at a fixed time after the exec, as this test once did
// (200 ms), since before serve's first line the runtime and the packages'
// init run, where a SIGHUP ends any Go program. The config, about 1 MB of
// rules, keeps serve parsing for a good while after opening it (seconds
// under -race).
func TestServeSurvivesSIGHUPDuringStartUp(t *testing.T) {
	t.Parallel() // waits on processes and timers; touches no process-wide state
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for j := 0; b.Len() < 1_000_000; j++ {
		fmt.Fprintf(&b, "  - key: k%d\n    rate_limit: {unit: second, requests_per_unit: 1}\n", j)
	}
	path := filepath.Join(dir, "d.yaml")
	writeFile(t, path, b.String())
	p := startHUPing(t, path, regexp.MustCompile(`HTTP  (http://\S+)`), "serve", "-config", dir, "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0")
	// The reload of 1 MB of rules is waited for up to 30 s: on a loaded
	// machine under -race, 3 MB took more than 5.
	if _, ok := metricWithin(t, p.addr, "sluice_config_reloads_total", 30*time.Second, func(v float64) bool { return v >= 1 }); !ok {
		t.Errorf("no reload after the SIGHUPs sent during start-up: %s", p.stderr.String())
	}
	select {
	case <-p.exited:
		t.Fatalf("exited: %v: %s", p.exitErr, p.stderr.String())
	default:
	}
}

// SIGTERM while serve is still loading its config is a stop, not a failure:
// exit 0 with a line saying so. Before, it was exit 1 with "cannot read:
// context canceled", which a supervisor counts as a crash.
func TestServeStoppedDuringStartUpExitsZero(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.yaml")
	writeFile(t, path, cfgBlocked)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // SIGTERM before the config is read
	var out, errb testlog.Buffer
	if code := runServe(ctx, []string{"-config", path, "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, &out, &errb); code != 0 {
		t.Errorf("exit %d, stderr %q; want 0", code, errb.String())
	}
}
