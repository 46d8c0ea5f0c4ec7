//go:build linux

package main

import (
	"os"
	"syscall"
	"testing"
)

// openedOnce returns a channel closed when path is next opened, by any
// process (inotify's IN_OPEN), so that a test can tell when a child
// process has begun reading its config: past its first start-up steps,
// whatever the machine's load made of the time before them. The watch
// ends with the test.
func openedOnce(t *testing.T, path string) <-chan struct{} {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.InotifyAddWatch(fd, path, syscall.IN_OPEN); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: Close ends a Read
	t.Cleanup(func() { f.Close() })
	opened := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		if n, err := f.Read(buf); err == nil && n > 0 {
			close(opened)
		}
	}()
	return opened
}
