package xdsconfig

import (
	"math"
	"time"
)

// Backoff is the wait before re-subscribing after a stream to the server
// was lost, with envoyproxy/ratelimit's XDS_CLIENT_BACKOFF_* meaning: the
// n-th wait in a row (from 0) is Initial·Factor^n, drawn at random between
// Initial and that when Jitter is set, and held between Initial and Max.
//
// Factor is the growth per attempt (XDS_CLIENT_BACKOFF_RANDOM_FACTOR,
// despite its name): with envoyproxy/ratelimit's default of 0.5, below 1,
// every wait is Initial. The zero value waits 10 seconds every time.
type Backoff struct {
	Initial, Max time.Duration
	Factor       float64
	Jitter       bool
}

// DefaultBackoff is envoyproxy/ratelimit's: 10s, at most 60s, factor 0.5,
// with jitter (so, 10s every time).
var DefaultBackoff = Backoff{Initial: 10 * time.Second, Max: 60 * time.Second, Factor: 0.5, Jitter: true}

// Delay returns the wait before attempt n (from 0); rnd is a number in
// [0, 1) used for the jitter.
func (b Backoff) Delay(n int, rnd float64) time.Duration {
	lo := b.Initial
	if lo <= 0 {
		lo = DefaultBackoff.Initial
	}
	hi := max(b.Max, lo)
	d := float64(lo) * math.Pow(b.Factor, float64(n))
	if math.IsNaN(d) {
		d = float64(lo)
	}
	if b.Jitter && d > float64(lo) {
		d = float64(lo) + rnd*(d-float64(lo))
	}
	switch {
	case d >= float64(hi):
		return hi
	case d <= float64(lo):
		return lo
	}
	return time.Duration(d)
}

// jittered returns d varied by up to half of it either way, rnd in [0, 1)
// choosing where: envoyproxy/ratelimit's linear connect retry.
func jittered(d time.Duration, rnd float64) time.Duration {
	return time.Duration(float64(d) * (0.5 + rnd))
}
