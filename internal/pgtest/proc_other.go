//go:build unix && !linux

package pgtest

import "syscall"

// setDeathSignal does nothing: only Linux kills a child when its parent
// dies. A server left behind by a killed test binary must be stopped by hand.
func setDeathSignal(*syscall.SysProcAttr) {}
