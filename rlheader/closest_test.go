package rlheader_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/rlheader"
)

func TestCloserPrefersRefusalThenLongerWaitThenFewerRemaining(t *testing.T) {
	type st = rlheader.Standing
	for _, c := range []struct {
		name string
		a, b st
		want bool
	}{
		{"refusing beats admitting", st{Over: true, Wait: time.Second}, st{Remaining: 0, Wait: time.Hour}, true},
		{"admitting loses to refusing", st{Remaining: 0}, st{Over: true}, false},
		{"longer wait of two refusals", st{Over: true, Wait: 2 * time.Second}, st{Over: true, Wait: time.Second}, true},
		{"shorter wait of two refusals", st{Over: true, Wait: time.Second}, st{Over: true, Wait: 2 * time.Second}, false},
		{"fewer remaining, whatever the quota", st{Remaining: 9, Wait: time.Minute}, st{Remaining: 100, Wait: time.Hour}, true},
		{"more remaining", st{Remaining: 100}, st{Remaining: 9}, false},
		{"a tie keeps the first", st{Remaining: 5, Wait: time.Hour}, st{Remaining: 5, Wait: time.Second}, false},
		{"a tie of refusals keeps the first", st{Over: true, Wait: time.Second}, st{Over: true, Wait: time.Second}, false},
	} {
		if got := rlheader.Closer(c.a, c.b); got != c.want {
			t.Errorf("%s: Closer(%+v, %+v) = %v, want %v", c.name, c.a, c.b, got, c.want)
		}
	}
}
