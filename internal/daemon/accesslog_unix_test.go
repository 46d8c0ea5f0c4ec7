//go:build unix

package daemon

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// openSoon runs open and returns its error, or fails the test when it is
// still blocked after a deadline that only bounds a failure.
func openSoon(t *testing.T, what string, open func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- open() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: still blocked after 20 s", what)
		return nil
	}
}

// A FIFO as the access log is refused at start, as -check refuses it,
// rather than blocking the proxy in an open no one answers; and one put
// where the log was is refused by the reopen, which keeps the old file,
// rather than blocking the reopen and so App.Close.
func TestAccessLogFIFOIsRefusedNotWaitedOn(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	// Lets an open blocked on the FIFO go when the test fails.
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	err := openSoon(t, "opening a FIFO as the access log", func() error {
		_, closeLog, err := OpenAccessLog(fifo, io.Discard)
		if err == nil {
			closeLog()
		}
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO as the access log: %v, want not a regular file", err)
	}

	path := filepath.Join(dir, "access.log")
	w, closeLog, err := OpenAccessLog(path, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	if err := os.Rename(fifo, path); err != nil {
		t.Fatal(err)
	}
	fifo = path
	lf := w.(*logFile)
	if err := openSoon(t, "reopening a FIFO no one reads", lf.reopen); err == nil {
		t.Error("reopening a FIFO no one reads: no error")
	}
	reader, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	err = openSoon(t, "reopening a FIFO someone reads", lf.reopen)
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("reopening a FIFO someone reads: %v, want not a regular file", err)
	}
	if st, err := lf.f.Stat(); err != nil || !st.Mode().IsRegular() {
		t.Errorf("after a refused reopen, writing %v (%v), want the regular file opened before", st, err)
	}
}
