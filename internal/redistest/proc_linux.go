package redistest

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// supported reports why the package cannot run servers here: it can.
func supported() error { return nil }

// sysProcAttr puts the server in a process group of its own, so that killing
// the group also kills any child it forked, and asks the kernel to kill it
// when the thread that started it exits. A Go program ends its threads only
// when it exits, or when a goroutine locked to its thread returns still
// locked: then the servers started from that thread earlier, by whatever
// goroutine ran there, die with it. No code of this module lets a locked
// goroutine return so (memstore's coarse clock unlocks first, and its test
// holds it to that), so a server lives as long as the test binary and does
// not outlive an interrupted or crashed one.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup sends SIGKILL to p's process group, and to p itself in case it
// has not yet made its group.
func killGroup(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL)
	p.Kill()
}

// exited reports whether the child pid has exited (a zombie not yet reaped
// counts), without reaping it.
func exited(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	switch b[i+2] {
	case 'Z', 'X', 'x':
		return true
	}
	return false
}
