// Package progress draws the progress of long work (a simulation, a
// migration) on a terminal, and nothing anywhere else: a log, a pipe or a
// CI job gets no bar.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// OnTerminal returns a callback that draws label and the share done (0 to
// 1) as a bar on w when w is a terminal (an *os.File on a character
// device), or nil when it is not.
func OnTerminal(w io.Writer, label string) func(float64) {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return Bar(w, label, time.Now)
}

// Bar draws, on w, label and the share done of the work as a bar, at most
// once per percent and not before half a second has passed (per now), so
// that short runs print nothing; it clears its line at 1.
func Bar(w io.Writer, label string, now func() time.Time) func(float64) {
	start := now()
	last := -1
	return func(done float64) {
		pct := int(done * 100)
		if pct == last || now().Sub(start) < 500*time.Millisecond && done < 1 {
			return
		}
		last = pct
		const width = 30
		n := pct * width / 100
		fmt.Fprintf(w, "\r%s [%s%s] %3d%%", label, strings.Repeat("#", n), strings.Repeat(".", width-n), pct)
		if done >= 1 {
			fmt.Fprint(w, "\r\033[K")
		}
	}
}

// Steps returns bar (nil: none) as the report of work done in steps: a
// share from 0 to 1. Between steps it redraws the bar every tick, so that
// a long step (waiting for another migration's lock) still shows the bar
// once Bar's half second has passed; 1 clears the bar and stops the
// redrawing, and must be reported. Safe for one caller.
func Steps(bar func(float64), tick time.Duration) func(float64) {
	if bar == nil {
		return func(float64) {}
	}
	var mu sync.Mutex
	share, stop := 0.0, make(chan struct{})
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				mu.Lock()
				if share < 1 {
					bar(share)
				}
				mu.Unlock()
			}
		}
	}()
	return func(f float64) {
		mu.Lock()
		defer mu.Unlock()
		if share >= 1 {
			return
		}
		share = f
		bar(f)
		if f >= 1 {
			close(stop)
		}
	}
}
