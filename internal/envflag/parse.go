package envflag

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Float returns the environment variable name as a finite number from lo
// to hi, or def when it is unset or empty; a malformed value, NaN, an
// infinity or a number out of [lo, hi] is recorded in e as
// "NAME=\"value\": want <want>" and def returned.
func (e *Errs) Float(name string, def, lo, hi float64, want string) float64 {
	return Parse(e, name, def, want, func(v string) (float64, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err == nil && (math.IsInf(f, 0) || !(f >= lo && f <= hi)) {
			err = errors.New("out of range")
		}
		return f, err
	})
}

// ParseAge reads an age as the commands take one (sluice migrate prune's
// -older-than): a Go duration (2160h) or a whole number of days (90d, at
// most 100 years of them), positive. The error names s and the forms
// ("\"s\": want ..."), for the caller to prefix with its flag.
func ParseAge(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		if err == nil && (n < 0 || n > 100*366) {
			err = errors.New("out of range")
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a positive Go duration (2160h) or number of days (90d)", s)
	}
	return d, nil
}

// List splits a comma-separated list (-trusted-proxies) into its items,
// spaces around each trimmed and empty ones dropped; "" is none (nil).
func List(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
