//go:build !unix

package redistest

import (
	"errors"
	"os"
	"syscall"
)

// supported reports why the package cannot run servers here.
func supported() error { return errors.New("redistest runs redis-server on Unix only") }

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(p *os.Process) { p.Kill() }

func exited(pid int) bool { return false }
