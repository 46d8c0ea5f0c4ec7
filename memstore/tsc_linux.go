//go:build linux && amd64

package memstore

import (
	"bytes"
	"os"
	"sync"
)

// clocksourceFile names the clock the Linux kernel keeps time with.
const clocksourceFile = "/sys/devices/system/clocksource/clocksource0/current_clocksource"

// tscKernel reports, once per process, whether the kernel keeps time with
// the time-stamp counter: it then trusts the counter to be invariant and in
// step across CPUs, and so may the store.
var tscKernel = sync.OnceValue(func() bool {
	b, err := os.ReadFile(clocksourceFile)
	return err == nil && bytes.Equal(bytes.TrimSpace(b), []byte("tsc"))
})
