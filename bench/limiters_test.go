package bench

import (
	"context"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/httprate"
	sethvargo "github.com/sethvargo/go-limiter/memorystore"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"
)

// The nominal limit for every limiter: 1e9 per second, with a burst of 1e9
// where there is one, so that nearly every decision is an admission. The
// exception is Sluice's own bound: sluice-slidinglog's Rate may not exceed
// sluice.MaxLogRate (2^20), so it is 1e6 per millisecond, the same 1e9 per
// second.
const (
	limitN      = 1_000_000_000
	limitPeriod = time.Second
	numKeys     = 100_000
)

// decide makes one decision on key and reports whether it was admitted.
type decide func(ctx context.Context, key string) (bool, error)

// contender is one limiter under test. open returns a fresh, empty limiter
// and a function that releases it.
type contender struct {
	name string
	open func() (decide, func())
}

func contenders() []contender {
	var cs []contender
	for _, a := range sluice.Algorithms() {
		lim := sluice.PerSecond(limitN).WithAlgorithm(a)
		switch a {
		case sluice.SlidingLog:
			lim = sluice.Limit{Algorithm: a, Rate: 1_000_000, Period: time.Millisecond}
		}
		cs = append(cs, contender{
			name: "sluice-" + strings.ReplaceAll(a.String(), "_", ""),
			open: func() (decide, func()) { return openSluice(lim, memstore.Config{}) },
		})
	}
	// The token bucket and the fixed window again on memstore's coarse
	// clock (Config.ClockResolution), refreshed every 100µs.
	for _, a := range []sluice.Algorithm{sluice.TokenBucket, sluice.FixedWindow} {
		lim := sluice.PerSecond(limitN).WithAlgorithm(a)
		cs = append(cs, contender{
			name: "sluice-" + strings.ReplaceAll(a.String(), "_", "") + "-coarse",
			open: func() (decide, func()) {
				return openSluice(lim, memstore.Config{ClockResolution: 100 * time.Microsecond})
			},
		})
	}
	return append(cs,
		contender{"x-time-rate", openXTimeRate},
		contender{"httprate", openHTTPRate},
		contender{"ulule-limiter", openUlule},
		contender{"sethvargo-limiter", openSethvargo},
	)
}

func openSluice(lim sluice.Limit, cfg memstore.Config) (decide, func()) {
	if err := lim.Validate(); err != nil {
		panic(err)
	}
	s := memstore.New(cfg)
	return func(ctx context.Context, key string) (bool, error) {
		res, err := s.AllowN(ctx, key, lim, 1)
		return res.Allowed, err
	}, func() { s.Close() }
}

// openXTimeRate is golang.org/x/time/rate as it is usually keyed: a map of
// limiters under a mutex, each created on first use, then Allow, which reads
// time.Now itself.
func openXTimeRate() (decide, func()) {
	var (
		mu sync.Mutex
		m  = make(map[string]*rate.Limiter)
	)
	return func(_ context.Context, key string) (bool, error) {
		mu.Lock()
		l, ok := m[key]
		if !ok {
			l = rate.NewLimiter(rate.Limit(float64(limitN)/limitPeriod.Seconds()), limitN)
			m[key] = l
		}
		mu.Unlock()
		return l.Allow(), nil
	}, func() {}
}

// openHTTPRate is go-chi/httprate's local sliding-window counter decided the
// way (*httprate.RateLimiter).OnLimit decides. OnLimit needs an
// http.ResponseWriter and an *http.Request and sets response headers, and
// httprate exports no decision method without them, so this does what OnLimit
// does minus the headers: under one limiter-wide mutex (OnLimit's l.mu),
// Status computes the estimate previous·(window−elapsed)/window + current
// (its calculateRate), the estimate is rounded, and if estimate+1 ≤ limit the
// counter is incremented in the current window. The counter is passed with
// WithLimitCounter so that windows are aligned to the wall clock (the default
// counter aligns them to a private offset the caller cannot see); the counter
// itself is the same NewLocalLimitCounter.
func openHTTPRate() (decide, func()) {
	counter := httprate.NewLocalLimitCounter(limitPeriod)
	rl := httprate.NewRateLimiter(limitN, limitPeriod, httprate.WithLimitCounter(counter))
	var mu sync.Mutex
	return func(_ context.Context, key string) (bool, error) {
		currentWindow := time.Now().UTC().Truncate(limitPeriod)
		mu.Lock()
		defer mu.Unlock()
		_, est, err := rl.Status(key)
		if err != nil {
			return false, err
		}
		if int(math.Round(est))+1 > limitN {
			return false, nil
		}
		if err := rl.Counter().IncrementBy(key, currentWindow, 1); err != nil {
			return false, err
		}
		return true, nil
	}, func() {}
}

// openUlule is ulule/limiter with its in-memory store: a counter per key that
// resets Period after its first request.
func openUlule() (decide, func()) {
	lim := ulule.New(ululemem.NewStore(), ulule.Rate{Period: limitPeriod, Limit: limitN})
	return func(ctx context.Context, key string) (bool, error) {
		c, err := lim.Get(ctx, key)
		return !c.Reached, err
	}, func() {}
}

// openSethvargo is sethvargo/go-limiter's memorystore. Its refill computes
// Interval/Tokens tokens per elapsed interval, so with Tokens above about
// sqrt(Interval in ns) a key gets far fewer than Tokens after its first
// interval (go-limiter issue #29): here a key that has lived past one second
// gets 1 token per second. The denied/op column shows how much of the run
// that covered; a denial takes the same path as an admission (one mutex, one
// comparison).
func openSethvargo() (decide, func()) {
	s, err := sethvargo.New(&sethvargo.Config{Tokens: limitN, Interval: limitPeriod})
	if err != nil {
		panic(err)
	}
	return func(ctx context.Context, key string) (bool, error) {
		_, _, _, ok, err := s.Take(ctx, key)
		return ok, err
	}, func() { s.Close(context.Background()) }
}

// keys returns the n keys "user:0" … "user:<n-1>".
func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "user:" + strconv.Itoa(i)
	}
	return ks
}

func BenchmarkLimiters(b *testing.B) {
	b.Run("hotkey", func(b *testing.B) {
		for _, c := range contenders() {
			b.Run(c.name, func(b *testing.B) { benchHotKey(b, c) })
		}
	})
	ks := keys(numKeys)
	b.Run("keys="+strconv.Itoa(numKeys)+"/parallel", func(b *testing.B) {
		for _, c := range contenders() {
			b.Run(c.name, func(b *testing.B) { benchParallel(b, c, ks) })
		}
	})
}

// benchHotKey decides on one key, from one goroutine.
func benchHotKey(b *testing.B, c contender) {
	ctx := context.Background()
	allow, closeFn := c.open()
	defer closeFn()
	const key = "user:42"
	if _, err := allow(ctx, key); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	denied := 0
	for range b.N {
		ok, err := allow(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if !ok {
			denied++
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(denied)/float64(b.N), "denied/op")
}

// benchParallel decides on keys already held, from GOMAXPROCS goroutines,
// each walking ks from its own offset.
func benchParallel(b *testing.B, c contender, ks []string) {
	ctx := context.Background()
	allow, closeFn := c.open()
	defer closeFn()
	for _, k := range ks {
		if _, err := allow(ctx, k); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	var (
		next, denied atomic.Int64
		firstErr     atomic.Pointer[error]
	)
	// fail records the first error; it is its own function so that only the
	// error path, never the loop, allocates.
	fail := func(err error) { firstErr.CompareAndSwap(nil, &err) }
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// Spread the goroutines' starting points over the slice.
		i := int(next.Add(1)-1) * 40_503 % len(ks)
		d := int64(0)
		for pb.Next() {
			ok, err := allow(ctx, ks[i])
			if err != nil {
				fail(err)
				break
			}
			if !ok {
				d++
			}
			if i++; i == len(ks) {
				i = 0
			}
		}
		denied.Add(d)
	})
	b.StopTimer()
	if err := firstErr.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(denied.Load())/float64(b.N), "denied/op")
}

var sinkNS int64

// BenchmarkClock measures the clock reads the limiters make on every
// decision, for scale: Sluice's memstore reads the monotonic clock
// (time.Since), x/time/rate, ulule and httprate call time.Now, which reads the
// wall clock too.
func BenchmarkClock(b *testing.B) {
	b.Run("time.Now", func(b *testing.B) {
		for range b.N {
			sinkNS += time.Now().UnixNano()
		}
	})
	base := time.Now()
	b.Run("time.Since", func(b *testing.B) {
		for range b.N {
			sinkNS += int64(time.Since(base))
		}
	})
}
