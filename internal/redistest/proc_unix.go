//go:build unix && !linux

package redistest

import (
	"os"
	"syscall"
)

// supported reports why the package cannot run servers here: it can.
func supported() error { return nil }

// sysProcAttr puts the server in a process group of its own, so that killing
// the group also kills any child it forked.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to p's process group, and to p itself in case it
// has not yet made its group.
func killGroup(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL)
	p.Kill()
}

// exited reports whether the child pid has exited. Without /proc it cannot
// tell a zombie from a live process without reaping it, so it reports false
// and a server that dies at start-up is noticed at the start timeout.
func exited(pid int) bool { return false }
