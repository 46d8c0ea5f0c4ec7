// Package loggate bounds a log line that a flood of requests would
// otherwise write once each (a refusal, a failing limiter, a failing
// upstream): the first line of each interval is written, the others
// counted into the next one that is: the one gate behind httplimit's
// refusal and failing-limiter lines and the proxy's failing-upstream line.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package.
package loggate

import (
	"sync/atomic"
	"time"
)

// Gate lets one line through per Every and counts the others. It takes no
// lock: a flood of lines on many goroutines costs each an atomic load and
// add. Its zero value, Every 0, lets every line through. Every and Now are
// set before the Gate is used; a Gate is not copied once used.
type Gate struct {
	// Every is the least time between two lines let through; <= 0: no
	// bound.
	Every time.Duration
	// Now tells the time the gate goes by; nil means time.Now.
	Now func() time.Time

	next    atomic.Int64 // UnixNano before which lines are counted, not written
	last    atomic.Int64 // UnixNano of the last line let through
	skipped atomic.Int64 // lines counted since it
}

// Skipped is the count of lines not written since a line, for the next
// line that is. Its zero value is none.
type Skipped struct {
	N     int64     // lines not written
	Since time.Time // when the last line written was
}

// Allow reports whether a line may be written now, and the lines not
// written since the last one that was.
func (g *Gate) Allow() (bool, Skipped) {
	if g.Every <= 0 {
		return true, Skipped{}
	}
	now := g.now()
	next := g.next.Load()
	if now < next || !g.next.CompareAndSwap(next, now+int64(g.Every)) {
		g.skipped.Add(1)
		return false, Skipped{}
	}
	last := g.last.Swap(now)
	return true, Skipped{N: g.skipped.Swap(0), Since: time.Unix(0, last)}
}

func (g *Gate) now() int64 {
	if g.Now != nil {
		return g.Now().UnixNano()
	}
	return time.Now().UnixNano()
}

// Attrs returns args (slog's key and value pairs) with the count of lines
// not written, as not_logged and not_logged_since, when there are.
func (s Skipped) Attrs(args []any) []any {
	if s.N == 0 {
		return args
	}
	return append(args, "not_logged", s.N, "not_logged_since", s.Since)
}
