package bench

import (
	"syscall"
	"time"
)

// On Linux a process started with redisProcAttr (startProcess: sluice,
// nginx, envoyproxy/ratelimit) is killed by the kernel if the benchmark
// process dies without running its cleanups (a -timeout panic, a signal),
// so that no server is left behind.
func init() {
	redisProcAttr = func() *syscall.SysProcAttr {
		return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	processCPU = func() time.Duration {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
}
