package main

import (
	"testing"
	"time"
)

// TestStatCPUTicksCountsFieldsAfterTheLastParenthesis: a command name with
// spaces and parentheses does not shift utime and stime.
func TestStatCPUTicksCountsFieldsAfterTheLastParenthesis(t *testing.T) {
	line := "4242 (redis (a) b) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 37 0 0 20 0 5 0 123 456 789\n"
	got, err := statCPUTicks(line)
	if err != nil {
		t.Fatal(err)
	}
	if got != 287 {
		t.Errorf("statCPUTicks = %d, want 287 (utime 250 + stime 37)", got)
	}
	if _, err := statCPUTicks("4242 (short) S 1 2"); err == nil {
		t.Error("statCPUTicks of a truncated line: no error")
	}
}

// TestTallyComparesEachWindowWithMinOfSentAndLimit: per key and window,
// the ideal is min(sent, limit); admissions past the limit are over,
// admissions short of the ideal are under, and windows do not offset each
// other.
func TestTallyComparesEachWindowWithMinOfSentAndLimit(t *testing.T) {
	start := time.Unix(1000, 0)
	w := newWindows(2, time.Second, start, start.Add(2*time.Second))
	add := func(key int, sec int64, sent, admitted int) {
		for i := range sent {
			w.add(key, time.Unix(1000+sec, 500_000_000), i < admitted)
		}
	}
	add(0, 0, 10, 5) // limit 5: exact
	add(0, 1, 10, 7) // 2 over
	add(1, 0, 3, 1)  // ideal 3: 2 under
	add(1, 1, 4, 4)  // exact
	got := w.tally(5)
	want := admission{decisions: 27, ideal: 5 + 5 + 3 + 4, admitted: 5 + 7 + 1 + 4, over: 2, under: 2}
	if got != want {
		t.Errorf("tally = %+v, want %+v", got, want)
	}
}

// TestWindowsDropDecisionsOutsideTheRun: an instant before the first
// window or past the last is not counted in another key's cell.
func TestWindowsDropDecisionsOutsideTheRun(t *testing.T) {
	start := time.Unix(1000, 0)
	w := newWindows(2, time.Second, start, start.Add(time.Second))
	w.add(1, time.Unix(999, 0), true)
	w.add(0, time.Unix(1010, 0), true)
	if got := w.tally(1); got != (admission{}) {
		t.Errorf("tally = %+v, want nothing counted", got)
	}
}

// TestScriptCallsSumsEvalAndFcallOnly: the script commands' calls are
// summed; INFO, CLUSTER and the rest are not.
func TestScriptCallsSumsEvalAndFcallOnly(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=120,usec=3000,usec_per_call=25.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_fcall_ro:calls=2,usec=10,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=9,usec=100,usec_per_call=11.1,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_cluster|slots:calls=4,usec=40,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n"
	got, err := scriptCalls(info)
	if err != nil {
		t.Fatal(err)
	}
	if got != 125 {
		t.Errorf("scriptCalls = %d, want 125 (120 + 3 + 2)", got)
	}
}
