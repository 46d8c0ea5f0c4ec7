// Package bodyrate bounds how slowly a request body may arrive, as
// Apache's mod_reqtimeout MinRate does: each read within a timeout, and the
// whole body at a least average rate past that timeout. A client sending
// one byte just within each read timeout would otherwise hold what its
// request holds (a place in flight, a share of a byte budget) for days.
// sluice proxy's streamed bodies and sluice serve's POST /json bodies both
// take their read deadlines from Deadline.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package bodyrate

import "time"

// DefaultMinRate is the least average rate of a body, in bytes per second,
// that sluice's faces apply by default: 1 KiB/s, a hundredth of a slow
// mobile uplink, so that no real client is cut, while a body of 1 MiB
// holds what it holds for at most the read timeout plus 1024 s however it
// is trickled.
const DefaultMinRate = 1 << 10

// Deadline returns when the next read of a body must end: the earlier of
// now + d (each read within d) and start + d + received/minRate (the
// whole body at minRate bytes per second on average, after a grace of d),
// where start is when the body began to arrive and received the bytes read
// since. A minRate of zero or less sets no minimum: the deadline is
// now + d. It does not allocate.
func Deadline(start, now time.Time, d time.Duration, received, minRate int64) time.Time {
	deadline := now.Add(d)
	if minRate <= 0 || received < 0 {
		return deadline
	}
	secs := received / minRate
	if secs >= 1<<32 { // beyond, no sooner than now + d anyway
		return deadline
	}
	credit := time.Duration(secs)*time.Second + time.Duration(received%minRate)*time.Second/time.Duration(minRate)
	if byRate := start.Add(d + credit); byRate.Before(deadline) {
		return byRate
	}
	return deadline
}
