//go:build linux

package memstore

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// The coarse clock's goroutine gives its thread back when it stops: a
// goroutine that returns while locked to its thread takes the thread down
// with it, and a child process that asked to die with its parent thread
// (Pdeathsig, as test helpers and supervisors do) dies too, though its
// parent process lives on. The child here is started on the very thread
// the clock then runs on.
func TestCoarseClockStopLeavesItsThreadAlive(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep(1):", err)
	}
	child := exec.Command("sleep", "60")
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	finished := make(chan struct{})
	offMainThread(t, func() {
		defer close(finished)
		// locked by offMainThread: the child's parent thread is this one, and so is the clock's
		if err := child.Start(); err != nil {
			started <- err
			runtime.UnlockOSThread()
			return
		}
		started <- nil
		c := newCoarseClock(func() int64 { return time.Now().UnixNano() })
		stop, done := make(chan struct{}), make(chan struct{})
		close(stop)
		c.run(time.Millisecond, stop, done)
		runtime.UnlockOSThread()
	})
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }() // the one Wait
	<-finished
	select {
	case err := <-exited:
		t.Fatalf("the child died with the clock's thread: %v", err)
	case <-time.After(500 * time.Millisecond): // a killed child is reaped at once; one alive this long was spared
	}
	child.Process.Kill()
	<-exited
}

// offMainThread runs f on a goroutine locked to a thread other than the
// process's main one, which the runtime never ends (a goroutine locked to
// it that returns wedges it instead). A goroutine that lands on the main
// thread holds it until the test ends, so the next one cannot.
func offMainThread(t *testing.T, f func()) {
	go func() {
		runtime.LockOSThread()
		if syscall.Gettid() != syscall.Getpid() {
			f()
			return
		}
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		offMainThread(t, f)
		<-release
		runtime.UnlockOSThread()
	}()
}
