package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// accuracyLine is one counter of simulate accuracy's JSON, as a script
// reads it.
type accuracyLine struct {
	Buckets   int    `json:"buckets"`
	Moments   int    `json:"moments"`
	Limit     string `json:"limit"`
	Shared    errs   `json:"shared"`
	Diverging errs   `json:"diverging"`
}

type errs struct {
	WronglyAdmitted int64 `json:"wrongly_admitted"`
	WronglyRejected int64 `json:"wrongly_rejected"`
}

// The line named the default is what a sliding_window rule of the
// simulated limit gets when it sets neither buckets nor moments: at 100 a
// minute 16 sub-windows with 2 means, the figures of -buckets 16:2; at
// 20,000 a minute, above what moments count, the two-window counter, the
// figures of -buckets 1. The two-window counter is its own line, the
// baseline, at either limit.
func TestSimulateAccuracyDefaultIsWhatASlidingWindowRuleGets(t *testing.T) {
	for _, c := range []struct {
		name    string
		args    []string
		buckets string
		want    [2]int // the default's buckets and moments
	}{
		{"100 a minute", []string{"-rate", "100", "-requests", "20000", "-keys", "50", "-duration", "10m"}, "16:2", [2]int{16, 2}},
		{"20,000 a minute", []string{"-rate", "20000", "-requests", "217000", "-keys", "5", "-duration", "5m"}, "1", [2]int{1, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"simulate", "accuracy", "-json", "-buckets", c.buckets}, c.args...)
			if code := run(args, &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			var a struct {
				Default, Baseline accuracyLine
				Counters          []accuracyLine
			}
			if err := json.Unmarshal(out.Bytes(), &a); err != nil || len(a.Counters) != 1 {
				t.Fatalf("%v, %d counters in %s", err, len(a.Counters), out.String())
			}
			same := a.Counters[0]
			if same.Shared.WronglyAdmitted+same.Shared.WronglyRejected+same.Diverging.WronglyAdmitted+same.Diverging.WronglyRejected == 0 {
				t.Fatalf("-buckets %s erred on no request: the population tells no counter from another", c.buckets)
			}
			if got := [2]int{a.Default.Buckets, a.Default.Moments}; got != c.want {
				t.Errorf("the default's layout: buckets %d moments %d, want %d and %d", got[0], got[1], c.want[0], c.want[1])
			}
			if a.Default != same {
				t.Errorf("the default's figures %+v, want those of -buckets %s, %+v", a.Default, c.buckets, same)
			}
			if a.Baseline.Buckets != 1 || a.Baseline.Moments != 0 {
				t.Errorf("the baseline: buckets %d moments %d, want the two-window counter", a.Baseline.Buckets, a.Baseline.Moments)
			}
			t.Logf("default %+v\nbaseline %+v", a.Default, a.Baseline)
		})
	}
}
