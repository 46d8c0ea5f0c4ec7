//go:build linux

package memstore

import (
	"runtime"
	"syscall"
	"time"
)

// pinThread locks the coarse clock's goroutine to its thread, which then
// sleeps in nanosleep between readings: the runtime's timers serve a wait
// shorter than a millisecond at about a millisecond when the process is
// otherwise idle (the poller's timeout is in milliseconds), so a 100µs
// resolution needs the kernel's sleep. The thread exits with the goroutine.
func pinThread() { runtime.LockOSThread() }

// pause sleeps the calling thread for d.
func pause(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // woken early by a signal: one reading sooner
}
