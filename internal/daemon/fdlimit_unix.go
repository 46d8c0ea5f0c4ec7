//go:build unix

package daemon

import (
	"math"
	"syscall"
)

// openFileLimit returns the process's soft limit on open files
// (RLIMIT_NOFILE), or 0 when it cannot be read or is unlimited.
func openFileLimit() int64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > math.MaxInt32 {
		return 0
	}
	return int64(rl.Cur)
}
