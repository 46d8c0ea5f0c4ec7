//go:build unix

package daemon

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicehq/sluice/internal/daemontest"
)

// The signal given reopens the file until the app closes; any other
// writer is left alone.
func TestReopenAccessLogOnTheSignal(t *testing.T) {
	path, w := tempAccessLog(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	a := NewApp(io.Discard, "test:")
	ReopenAccessLogOn(a, w, log, syscall.SIGUSR1)
	ReopenAccessLogOn(a, io.Discard, log, syscall.SIGUSR1) // not a file: nothing to do
	rotate(t, path)
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	daemontest.Eventually(t, "the signal reopens the file", func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
	a.Close() // waits for the goroutine: logs is read alone below
	if !strings.Contains(logs.String(), "access log reopened") {
		t.Errorf("no line says the log was reopened: %s", logs.String())
	}
}
