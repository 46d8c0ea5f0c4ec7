package client_test

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/client"
)

func TestBackoffNoJitterGrowsToCap(t *testing.T) {
	b := client.Backoff{Base: 100 * time.Millisecond, Cap: time.Second, Jitter: client.NoJitter}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := b.Delay(i, 0); got != w*time.Millisecond {
			t.Errorf("step %d: Delay(%d) = %v, want %v", i, i, got, w*time.Millisecond)
		}
	}
}

func TestBackoffDefaults(t *testing.T) {
	b := client.Backoff{Jitter: client.NoJitter}
	if got := b.Delay(0, 0); got != client.DefaultBase {
		t.Errorf("Delay(0) = %v, want %v", got, client.DefaultBase)
	}
	if got := b.Delay(100, 0); got != client.DefaultCap {
		t.Errorf("Delay(100) = %v, want %v", got, client.DefaultCap)
	}
	if got := b.Delay(-3, 0); got != client.DefaultBase {
		t.Errorf("Delay(-3) = %v, want %v", got, client.DefaultBase)
	}
}

// Large attempts and huge durations saturate at Cap instead of overflowing.
func TestBackoffOverflow(t *testing.T) {
	caps := []time.Duration{time.Second, math.MaxInt64, math.MaxInt64 / 3, math.MaxInt64/3 + 1}
	bases := []time.Duration{1, time.Millisecond, math.MaxInt64 / 2, math.MaxInt64}
	rands := []float64{0, 0.5, math.Nextafter(1, 0), 1, 7, -1, math.NaN()}
	for _, j := range []client.Jitter{client.FullJitter, client.EqualJitter, client.DecorrelatedJitter, client.NoJitter} {
		for _, c := range caps {
			for _, base := range bases {
				for _, r := range rands {
					b := client.Backoff{Base: base, Cap: c, Jitter: j, Rand: func() float64 { return r }}
					for _, n := range []int{0, 1, 30, 62, 63, 64, 1000, math.MaxInt} {
						for _, prev := range []time.Duration{0, base, c, math.MaxInt64} {
							if d := b.Delay(n, prev); d < 0 || d > c {
								t.Fatalf("%v base %v cap %v rand %v: Delay(%d, %v) = %v, want in [0, %v]", j, base, c, r, n, prev, d, c)
							}
						}
					}
				}
			}
		}
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base, limit := 100*time.Millisecond, 5*time.Second
	for _, j := range []client.Jitter{client.FullJitter, client.EqualJitter, client.DecorrelatedJitter} {
		b := client.Backoff{Base: base, Cap: limit, Jitter: j, Rand: r.Float64}
		prev := time.Duration(0)
		for n := range 2000 {
			attempt := n % 10
			w := min(limit, base<<attempt)
			d := b.Delay(attempt, prev)
			var lo, hi time.Duration
			switch j {
			case client.FullJitter:
				lo, hi = 0, w
			case client.EqualJitter:
				lo, hi = w/2, w
			case client.DecorrelatedJitter:
				lo, hi = base, min(limit, 3*max(prev, base))
			}
			if d < lo || d > hi {
				t.Fatalf("%v: step %d: Delay(%d, %v) = %v, want in [%v, %v]", j, n, attempt, prev, d, lo, hi)
			}
			prev = d
		}
	}
}

// checkSpread fails unless the offsets, all in [0, window], are spread over
// the window like a uniform distribution: no tenth of the window holds more
// than three times its share, and the standard deviation is within 15% of
// the uniform distribution's (window/√12). Both bounds are many standard
// errors wide for 1,000 samples: they fail only for a schedule that bunches.
func checkSpread(t *testing.T, offsets []time.Duration, window time.Duration) {
	t.Helper()
	var buckets [10]int
	var sum, sumSq float64
	for _, o := range offsets {
		if o < 0 || o > window {
			t.Fatalf("offset %v outside [0, %v]", o, window)
		}
		i := min(int(10*o/window), 9)
		buckets[i]++
		x := float64(o) / float64(window)
		sum += x
		sumSq += x * x
	}
	n := float64(len(offsets))
	share := len(offsets) / 10
	for i, c := range buckets {
		if c > 3*share {
			t.Errorf("tenth %d of the window holds %d of %d retries (share %d): %v", i, c, len(offsets), share, buckets)
		}
	}
	mean := sum / n
	sd := math.Sqrt(sumSq/n - mean*mean)
	if uniform := 1 / math.Sqrt(12); math.Abs(sd-uniform) > 0.15*uniform {
		t.Errorf("standard deviation %.3f of the window, want %.3f ± 15%% (uniform); buckets %v", sd, uniform, buckets)
	}
}

// Full jitter spreads 1,000 clients that got the same 429 over the window.
func TestFullJitterSpreadsClients(t *testing.T) {
	const clients = 1000
	b := client.Backoff{Base: 100 * time.Millisecond, Cap: 10 * time.Second, Rand: rand.New(rand.NewPCG(7, 7)).Float64}
	for attempt := range 4 {
		window := b.Base << attempt
		offsets := make([]time.Duration, clients)
		for i := range offsets {
			offsets[i] = b.Delay(attempt, 0)
		}
		checkSpread(t, offsets, window)
	}
}

// The same through the Transport on synctest's clock: 1,000 clients get a 429
// without Retry-After at the same instant and retry spread over the first
// window, [0, Base]; with NoJitter they would all retry in one instant.
func TestFullJitterSpreadsTransportClients(t *testing.T) {
	for _, j := range []client.Jitter{client.FullJitter, client.NoJitter} {
		t.Run(j.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const clients = 1000
				base := 2 * time.Second
				var mu sync.Mutex
				first := map[string]bool{}
				var retries []time.Duration
				t0 := time.Now()
				srv := rtFunc(func(r *http.Request) (*http.Response, error) {
					mu.Lock()
					defer mu.Unlock()
					id := r.Header.Get("Client")
					if !first[id] {
						first[id] = true
						return respond(http.StatusTooManyRequests), nil
					}
					retries = append(retries, time.Since(t0))
					return respond(http.StatusOK), nil
				})
				tr := &client.Transport{Base: srv, Backoff: client.Backoff{Base: base, Jitter: j}}
				var wg sync.WaitGroup
				for i := range clients {
					wg.Go(func() {
						req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.test/", nil)
						req.Header.Set("Client", string(rune(0x4e00+i)))
						resp, err := tr.RoundTrip(req)
						if err != nil || resp.StatusCode != 200 {
							t.Errorf("client %d: %v, %v", i, resp, err)
						}
					})
				}
				wg.Wait()
				if len(retries) != clients {
					t.Fatalf("%d retries, want %d", len(retries), clients)
				}
				if j == client.NoJitter {
					for _, r := range retries {
						if r != base {
							t.Fatalf("no jitter: retry at %v, want all at %v", r, base)
						}
					}
					return
				}
				checkSpread(t, retries, base)
			})
		})
	}
}
