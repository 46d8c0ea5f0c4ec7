package httplimit

import (
	"sync/atomic"
	"time"
)

// logGate lets one line through per every nanoseconds and counts the
// others (Config.RefusalLogEvery). It takes no lock: a flood of refused
// requests on many goroutines costs each an atomic load and add. Its zero
// value, every 0, lets every line through.
type logGate struct {
	every   int64
	next    atomic.Int64 // UnixNano before which lines are counted, not written
	last    atomic.Int64 // UnixNano of the last line let through
	skipped atomic.Int64 // lines counted since it
}

// skipped is the count of lines not written since a line, for the next
// line that is.
type skipped struct {
	n     int64
	since time.Time
}

// allow reports whether a line may be written now, and the lines not
// written since the last one that was.
func (g *logGate) allow() (bool, skipped) {
	if g.every <= 0 {
		return true, skipped{}
	}
	now := time.Now().UnixNano()
	next := g.next.Load()
	if now < next || !g.next.CompareAndSwap(next, now+g.every) {
		g.skipped.Add(1)
		return false, skipped{}
	}
	last := g.last.Swap(now)
	return true, skipped{n: g.skipped.Swap(0), since: time.Unix(0, last)}
}

// attrs returns args with the count of lines not written, when there are.
func (s skipped) attrs(args []any) []any {
	if s.n == 0 {
		return args
	}
	return append(args, "not_logged", s.n, "not_logged_since", s.since)
}
