package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testlog"
)

// A config directory is bounded as a whole, not only file by file: files
// each under config.MaxFileBytes but together over config.MaxTotalBytes are
// refused at start-up, at once and naming the total, instead of being
// parsed (200 files of 1 MB took a running server to 1.5 GB on a reload).
func TestServeRefusesAConfigOverItsTotalSize(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), cfgBlocked)
	// Comment lines: valid YAML, each file just under the per-file cap.
	filler := strings.Repeat("# "+strings.Repeat("x", 77)+"\n", (config.MaxFileBytes-1024)/80)
	for i := range config.MaxTotalBytes/len(filler) + 1 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f%02d.yaml", i)), fmt.Sprintf("domain: filler%d\n%s", i, filler))
	}
	if code, errs := serveExit(t, 30*time.Second, "serve did not refuse the config: it loads it", "-config", dir); code != 1 || !strings.Contains(errs, "bytes in all") {
		t.Errorf("exit %d, stderr %q; want 1 naming the config's total size", code, errs)
	}
	// sluice check says so too: a config it passes starts.
	var cout, cerr strings.Builder
	if code := check([]string{dir}, &cout, &cerr); code != 1 || !strings.Contains(cerr.String(), "bytes in all") {
		t.Errorf("sluice check: exit %d, stderr %q; want 1 naming the config's total size", code, cerr.String())
	}
}

// serveExit runs serve with args on free loopback ports, expecting it to
// exit within d, and returns its exit code and stderr; if it is still
// running at d, the test stops with what.
func serveExit(t *testing.T, d time.Duration, what string, args ...string) (code int, stderr string) {
	t.Helper()
	var out, errb testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runServe(context.Background(), append([]string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, args...), &out, &errb)
	}()
	select {
	case code := <-done:
		return code, errb.String()
	case <-time.After(d):
		t.Fatalf("after %v: %s", d, what)
		return 0, ""
	}
}
