package main

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
		done := steps(progressBar(&w, "migrating", time.Now), 250*time.Millisecond)
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

// Not on a terminal (a pipe, a file, a log), migrate and migrate prune
// write no bar: stderr holds the error alone.
func TestMigrateWritesNoProgressOffATerminal(t *testing.T) {
	for _, args := range [][]string{
		{"migrate", "-timeout", "5s", "postgres://sluice@127.0.0.1:1/sluice"},
		{"migrate", "prune", "-older-than", "90d", "-timeout", "5s", "postgres://sluice@127.0.0.1:1/sluice"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 1 {
			t.Errorf("%v: exit %d, want 1", args, code)
		}
		if s := out.String() + errb.String(); strings.ContainsAny(s, "\r\033") || strings.Contains(s, "[") && strings.Contains(s, "%") {
			t.Errorf("%v wrote a bar off a terminal: %q", args, s)
		}
	}
}
