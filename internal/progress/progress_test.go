package progress

import (
	"bytes"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/testlog"
)

// On a terminal, a long step of migrate (waiting for another migration's
// lock, say) shows the bar once half a second has passed, though no step
// ends meanwhile; the end clears it and stops the redrawing (the bubble
// would report the goroutine left behind).
func TestMigrateProgressShowsALongStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w testlog.Buffer // the redrawing goroutine writes, the test reads
		done := Steps(Bar(&w, "migrating", time.Now), 250*time.Millisecond)
		done(0.25)
		synctest.Wait()
		if w.String() != "" {
			t.Fatalf("drawn before half a second: %q", w.String())
		}
		time.Sleep(2 * time.Second) // the bubble's clock: the step takes 2 s
		synctest.Wait()
		if got := w.String(); !strings.Contains(got, "\rmigrating [") || !strings.Contains(got, " 25%") {
			t.Fatalf("after 2 s in a step: %q, want the bar at 25%%", got)
		}
		done(1)
		if got := w.String(); !strings.HasSuffix(got, "\r\033[K") {
			t.Errorf("the end does not clear the bar: %q", got)
		}
		n := len(w.String())
		time.Sleep(time.Second)
		synctest.Wait()
		if len(w.String()) != n {
			t.Errorf("drawn after the end: %q", w.String()[n:])
		}
	})
}

// The progress bar: none for output that is not a terminal, none in the
// first half second, then at most a line per percent, cleared at the end.
func TestProgressBarOnlyOnATerminalAfterHalfASecond(t *testing.T) {
	if OnTerminal(&bytes.Buffer{}, "simulating") != nil {
		t.Fatal("a progress bar on a buffer")
	}
	now := time.Unix(0, 0)
	var w bytes.Buffer
	bar := Bar(&w, "simulating", func() time.Time { return now })
	bar(0.1)
	if w.Len() != 0 {
		t.Fatalf("drawn before half a second: %q", w.String())
	}
	now = now.Add(time.Second)
	bar(0.5)
	bar(0.501)
	if got := w.String(); strings.Count(got, "\r") != 1 || !strings.Contains(got, " 50%") {
		t.Fatalf("after a second: %q, want one line at 50%%", got)
	}
	bar(1)
	if !strings.HasSuffix(w.String(), "\r\033[K") {
		t.Fatalf("the end does not clear the line: %q", w.String())
	}
}
