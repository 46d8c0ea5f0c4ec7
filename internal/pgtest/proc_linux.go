package pgtest

import "syscall"

// setDeathSignal asks the kernel to kill the child when the thread that
// started it exits, which a Go program's threads do only when it exits: a
// server does not outlive an interrupted or crashed test binary.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
