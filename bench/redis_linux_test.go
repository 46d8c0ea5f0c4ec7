package bench

import "syscall"

// On Linux the redis-server started by startRedis is killed by the kernel
// if the benchmark process dies without running its cleanups (a -timeout
// panic, a signal), so that no server is left behind.
func init() {
	redisProcAttr = func() *syscall.SysProcAttr {
		return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
}
