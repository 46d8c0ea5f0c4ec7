package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
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
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runServe(context.Background(), []string{"-config", dir, "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, &out, &errb)
	}()
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(errb.String(), "bytes in all") {
			t.Errorf("exit %d, stderr %q; want 1 naming the config's total size", code, errb.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not refuse the config within 5s: it loads it")
	}
	// sluice check says so too: a config it passes starts.
	var cout, cerr strings.Builder
	if code := check([]string{dir}, &cout, &cerr); code != 1 || !strings.Contains(cerr.String(), "bytes in all") {
		t.Errorf("sluice check: exit %d, stderr %q; want 1 naming the config's total size", code, cerr.String())
	}
}
