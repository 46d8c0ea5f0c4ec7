package config

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice"
)

// AlgorithmNames lists the algorithms a rule may name, for the messages of
// both files that name them (the rate limit config's algorithm and the
// proxy file's): "token_bucket, fixed_window, sliding_window, sliding_log
// or leaky_bucket".
var AlgorithmNames = joinNames(sluice.Algorithms(), func(sluice.Algorithm) bool { return true }, "or")

// bucketNames names the algorithms a burst applies to: "token_bucket and
// leaky_bucket".
var bucketNames = joinNames(sluice.Algorithms(), sluice.Algorithm.UsesBurst, "and")

// Burst is the one burst rule of the rate limit config and the proxy file:
// a rule of algorithm alg and rate has the burst it sets (set), else its
// rate (a bucket holds one period's worth); setting a burst is an error
// for an algorithm that is not a bucket, which would ignore it.
func Burst(alg sluice.Algorithm, rate, burst int, set bool) (int, error) {
	switch {
	case set && !alg.UsesBurst():
		return 0, fmt.Errorf("burst applies only to %s, not %v", bucketNames, alg)
	case set:
		return burst, nil
	}
	return rate, nil
}

// joinNames writes the algorithms keep keeps as "a, b <last> c".
func joinNames(algs []sluice.Algorithm, keep func(sluice.Algorithm) bool, last string) string {
	var names []string
	for _, a := range algs {
		if keep(a) {
			names = append(names, a.String())
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + last + " " + names[len(names)-1]
}

// The sliding window's default layout: DefaultSlidingWindow gives a
// sliding_window rule that sets neither buckets nor moments this many
// sub-windows and means per sub-window, where the limit allows them
// (sluice.DefaultBuckets and sluice.DefaultMoments, the one place of them).
const (
	DefaultBuckets = sluice.DefaultBuckets
	DefaultMoments = sluice.DefaultMoments
)

// DefaultSlidingWindow is the default rule of the rate limit config and
// the proxy file for a sliding_window rule that sets neither buckets nor
// moments: sluice.DefaultSlidingWindow, which tenants' plans and Envoy's
// per-request overrides apply too. lim gets Buckets DefaultBuckets and
// Moments DefaultMoments (docs/algorithms.md measures them: about ten times
// more accurate than the two-window counter, at about twice its bytes per
// key) when it is a sliding window that allows them (a rate from 1 to
// sluice.MaxMomentsRate, a period a whole number of microseconds times
// DefaultBuckets); any other lim unchanged, the two-window counter. A rule
// that sets buckets: 1 or moments: 0 keeps the counter; the caller does not
// call it then.
func DefaultSlidingWindow(lim sluice.Limit) sluice.Limit { return sluice.DefaultSlidingWindow(lim) }
