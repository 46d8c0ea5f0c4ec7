package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A SIGHUP that comes while serve is still starting (loading a large
// config, say, as a config-reloader sidecar may send one right after a
// deploy) must not kill it: before, SIGHUP's default action ended the
// process (exit 129) until the reload handler was installed after the
// config, the store and the listeners. It is now taken from the start, and
// reloads once serve runs.
func TestServeSurvivesSIGHUPDuringStartUp(t *testing.T) {
	dir := t.TempDir()
	// About 3 MB of rules: a start-up long enough for the signal to land in it.
	for i := range 3 {
		var b strings.Builder
		fmt.Fprintf(&b, "domain: d%d\ndescriptors:\n", i)
		for j := 0; b.Len() < 1_000_000; j++ {
			fmt.Fprintf(&b, "  - key: k%d\n    rate_limit: {unit: second, requests_per_unit: 1}\n", j)
		}
		writeFile(t, filepath.Join(dir, fmt.Sprintf("d%d.yaml", i)), b.String())
	}
	// The shell's $$ is serve's PID once it execs. The reload of 3 MB of
	// rules is waited for up to 30 s: on a loaded machine under -race it
	// took more than 5.
	p := startProcess(t, "(sleep 0.2; kill -HUP $$) & true", "serve", "-config", dir, "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0")
	if _, ok := metricWithin(t, p.httpURL, "sluice_config_reloads_total", 30*time.Second, func(v float64) bool { return v >= 1 }); !ok {
		t.Errorf("no reload after the SIGHUP sent during start-up: %s", p.stderr.String())
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
	var out, errb syncBuffer
	if code := runServe(ctx, []string{"-config", path, "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, &out, &errb); code != 0 {
		t.Errorf("exit %d, stderr %q; want 0", code, errb.String())
	}
}
