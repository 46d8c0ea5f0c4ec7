//go:build !linux

package memstore

import "time"

// pinThread does nothing: away from Linux the coarse clock sleeps on the
// runtime's timers, whose waits under a millisecond may take about a
// millisecond (MinClockResolution's doc says so).
func pinThread() {}

// unpinThread does nothing, as pinThread.
func unpinThread() {}

// pause sleeps for d.
func pause(d time.Duration) { time.Sleep(d) }
