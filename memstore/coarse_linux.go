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
// resolution needs the kernel's sleep.
func pinThread() { runtime.LockOSThread() }

// unpinThread gives the thread back to the runtime before the goroutine
// returns: a goroutine that returns still locked ends its thread, and with
// it any child process another goroutine started from that thread asking to
// die with its parent (Pdeathsig), in a process that lives on.
func unpinThread() { runtime.UnlockOSThread() }

// pause sleeps the calling thread for d.
func pause(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // woken early by a signal: one reading sooner
}
