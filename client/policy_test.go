package client_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
)

// sendFor sends requests to url through rt one after another for d, and
// returns how many it sent.
func sendFor(t *testing.T, rt http.RoundTripper, url string, d time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	n := 0
	for ctx.Err() == nil {
		resp, err := getWith(ctx, rt, url)
		if gaveUp(ctx, err) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		n++
	}
	return n
}

// mostIn returns the largest number of times in any span of length d.
func mostIn(ts []time.Time, d time.Duration) int {
	most := 0
	for i := range ts {
		n := 0
		for j := i; j < len(ts) && ts[j].Sub(ts[i]) < d; j++ {
			n++
		}
		most = max(most, n)
	}
	return most
}

// A server announcing "q=10;w=1" slows a pacer configured at 100/s to at
// most 10 requests in any second; without the field, or with IgnoreServer,
// the pacer sends at 100/s.
func TestPacerLearnsPolicy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header []string
		ignore bool
		adapts bool
	}{
		{"announced", []string{"RateLimit-Policy", `"default";q=10;w=1`}, false, true},
		{"none", nil, false, false},
		{"ignoring the server", []string{"RateLimit-Policy", `"default";q=10;w=1`}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := always(http.StatusOK, tc.header...)
				p := &client.Pacer{Base: srv, Limit: sluice.PerSecond(100), IgnoreServer: tc.ignore}
				n := sendFor(t, p, "http://api.test/", 10*time.Second)
				most := mostIn(srv.times(), time.Second)
				if !tc.adapts {
					// A burst of 100, then 100/s.
					if most < 100 || n < 1000 {
						t.Fatalf("%d sent in 10s, at most %d in a second; want 100/s", n, most)
					}
					return
				}
				// 9/s with a burst of 1: about 91 in 10 s.
				if most > 10 || n < 80 {
					t.Fatalf("%d sent in 10s, up to %d in one second; want at most 10 in any second, and no stall", n, most)
				}
			})
		})
	}
}

// Several clients of one pacer, all learning at once: after the first
// answers, no second sees more than 10 requests.
func TestPacerLearnsPolicyConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := always(http.StatusOK, "RateLimit-Policy", `"default";q=10;w=1`)
		p := &client.Pacer{Base: srv, Limit: sluice.PerSecond(100)}
		t0 := time.Now()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { sendFor(t, p, "http://api.test/", 10*time.Second) })
		}
		wg.Wait()
		var later []time.Time
		for _, at := range srv.times() {
			if at.Sub(t0) >= time.Second {
				later = append(later, at)
			}
		}
		if most := mostIn(later, time.Second); most > 10 || len(later) < 70 {
			t.Fatalf("%d sent after the first second, up to %d in one second; want at most 10", len(later), most)
		}
	})
}

// Malformed RateLimit-Policy fields are ignored as a whole, and valid ones
// that do not apply to a request pacer (other units, no window, at or above
// its limit) change nothing: the pacer sends exactly as it does without the
// field. A malformed field after a valid one leaves the learned limit.
func TestPacerPolicyIgnored(t *testing.T) {
	fields := map[string][]string{
		"w=0":                {`"default";q=10;w=0`},
		"token name":         {`default;q=10;w=1`},
		"negative q":         {`"default";q=-10;w=1`},
		"decimal q":          {`"default";q=1.5;w=1`},
		"string w":           {`"default";q=10;w="1"`},
		"missing q":          {`"default";w=1`},
		"upper-case key":     {`"default";Q=10;w=1`},
		"trailing comma":     {`"default";q=10;w=1,`},
		"bad pk":             {`"default";q=10;w=1;pk=abc`},
		"q too long":         {`"default";q=1234567890123456;w=1`},
		"one bad line":       {`"a";q=10;w=1`, `"b";q=`},
		"inner list":         {`("a");q=10;w=1`},
		"empty":              {``},
		"no window":          {`"default";q=10`},
		"content bytes":      {`"default";q=10;w=1;qu="content-bytes"`},
		"concurrent":         {`"default";q=10;qu="concurrent-requests"`},
		"at the limit":       {`"default";q=100;w=1`},
		"above the limit":    {`"default";q=100000;w=60`},
		"unknown unit":       {`"default";q=10;w=1;qu="tokens"`},
		"window over a year": {`"default";q=1;w=999999999999999`},
	}
	synctest.Test(t, func(t *testing.T) {
		base := always(http.StatusOK)
		want := sendFor(t, &client.Pacer{Base: base, Limit: sluice.PerSecond(100)}, "http://api.test/", 3*time.Second)
		wantMost := mostIn(base.times(), time.Second)
		for name, lines := range fields {
			var kv []string
			for _, v := range lines {
				kv = append(kv, "RateLimit-Policy", v)
			}
			srv := always(http.StatusOK, kv...)
			got := sendFor(t, &client.Pacer{Base: srv, Limit: sluice.PerSecond(100)}, "http://api.test/", 3*time.Second)
			if most := mostIn(srv.times(), time.Second); got != want || most != wantMost {
				t.Errorf("%s: %d sent, up to %d in a second; want %d and %d as without the field", name, got, most, want, wantMost)
			}
		}

		// Learned first, then malformed: the learned limit stays.
		srv := &fakeServer{script: func(n int, _ *http.Request) (*http.Response, error) {
			if n == 0 {
				return respond(http.StatusOK, "RateLimit-Policy", `"default";q=10;w=1`), nil
			}
			return respond(http.StatusOK, "RateLimit-Policy", `"default";q=100;w=0`), nil
		}}
		n := sendFor(t, &client.Pacer{Base: srv, Limit: sluice.PerSecond(100)}, "http://api.test/", 5*time.Second)
		if most := mostIn(srv.times(), time.Second); most > 10 || n < 40 {
			t.Errorf("learned then malformed: %d sent in 5s, up to %d in a second; want at most 10", n, most)
		}
	})
}

// A later field with a higher quota moves the key back up, but never above
// the configured limit; Fraction sets the share of a quota used.
func TestPacerPolicyChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		policy := `"default";q=10;w=1`
		srv := &fakeServer{script: func(int, *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			return respond(http.StatusOK, "RateLimit-Policy", policy), nil
		}}
		p := &client.Pacer{Base: srv, Limit: sluice.PerSecond(20).WithBurst(1), Fraction: 0.5}
		if n := sendFor(t, p, "http://api.test/", 10*time.Second); n > 51 || n < 45 {
			t.Fatalf("Fraction 0.5 of q=10;w=1: %d sent in 10s, want about 50", n)
		}
		// The first request goes out before anything is learned.
		if most := mostIn(srv.times()[1:], time.Second); most > 5 {
			t.Fatalf("Fraction 0.5 of q=10;w=1: up to %d in a second, want at most 5", most)
		}
		mu.Lock()
		policy = `"default";q=1000;w=1`
		mu.Unlock()
		before := srv.count()
		n := sendFor(t, p, "http://api.test/", 10*time.Second)
		// One more request at 5/s teaches the new policy; then 20/s, the
		// configured limit, not the 500/s that half of q=1000 would give.
		if n < 190 || n > 201 {
			t.Fatalf("after q=1000;w=1: %d sent in 10s, want about 200 (20/s)", n)
		}
		if most := mostIn(srv.times()[before:], time.Second); most > 21 {
			t.Fatalf("after q=1000;w=1: up to %d in a second, want at most 21", most)
		}
	})
}

// With several policies the tightest applies: 90 per minute under
// "q=100;w=60" although "q=5;w=1" alone would allow 4/s.
func TestPacerSeveralPolicies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := always(http.StatusOK, "RateLimit-Policy", `"perminute";q=100;w=60, "persecond";q=5;w=1`)
		p := &client.Pacer{Base: srv, Limit: sluice.PerSecond(100)}
		n := sendFor(t, p, "http://api.test/", 3*time.Minute)
		ts := srv.times()
		if most := mostIn(ts, time.Minute); most > 100 || n < 250 {
			t.Fatalf("%d sent in 3 min, up to %d in a minute; want at most 100 a minute, about 270 in all", n, most)
		}
		if most := mostIn(ts, time.Second); most > 5 {
			t.Fatalf("up to %d in a second, want at most 5", most)
		}
	})
}

// A policy belongs to its key: another host is not slowed. A key idle for
// longer than its policy's window (at least a minute) forgets it.
func TestPacerPolicyPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var quiet atomic.Bool
		srv := rtFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Host == "slow.test" && !quiet.Load() {
				return respond(http.StatusOK, "RateLimit-Policy", `"default";q=10;w=1`), nil
			}
			return respond(http.StatusOK), nil
		})
		p := &client.Pacer{Base: srv, Limit: sluice.PerSecond(100)}
		var slow, fast int
		var wg sync.WaitGroup
		wg.Go(func() { slow = sendFor(t, p, "http://slow.test/", 10*time.Second) })
		wg.Go(func() { fast = sendFor(t, p, "http://fast.test/", 10*time.Second) })
		wg.Wait()
		if slow > 100 || fast < 1000 {
			t.Fatalf("slow.test %d, fast.test %d in 10s; want at most 100 and 100/s", slow, fast)
		}

		// From now on the server stops sending the field.
		remembered := &client.Pacer{Base: srv, Limit: sluice.PerSecond(100)}
		sendFor(t, remembered, "http://slow.test/", 2*time.Second)
		quiet.Store(true)
		time.Sleep(30 * time.Second)
		if n := sendFor(t, remembered, "http://slow.test/", time.Second); n > 10 {
			t.Fatalf("after 30s idle: %d sent in a second, want the learned limit (at most 10)", n)
		}
		time.Sleep(2 * time.Minute)
		if n := sendFor(t, remembered, "http://slow.test/", time.Second); n < 100 {
			t.Fatalf("after 2 min idle: %d sent in a second, want the configured 100/s", n)
		}
	})
}

// The policy in force is that of the latest request answered, not of the
// latest answer: an older response's field is ignored.
func TestPacerIgnoresStalePolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gates := map[string]chan string{"old": make(chan string), "new": make(chan string)}
		srv := rtFunc(func(r *http.Request) (*http.Response, error) {
			if g, ok := gates[r.Header.Get("Id")]; ok {
				return respond(http.StatusOK, "RateLimit-Policy", <-g), nil
			}
			return respond(http.StatusOK), nil
		})
		p := &client.Pacer{Base: srv, Limit: sluice.PerSecond(100)}
		var wg sync.WaitGroup
		for _, id := range []string{"old", "new"} {
			req := get(t, "http://api.test/")
			req.Header.Set("Id", id)
			wg.Go(func() {
				p.RoundTrip(req)
			})
			synctest.Wait()
		}
		gates["new"] <- `"default";q=10;w=1`
		synctest.Wait()
		gates["old"] <- `"default";q=1000;w=1`
		wg.Wait()
		if n := sendFor(t, p, "http://api.test/", 5*time.Second); n > 50 {
			t.Fatalf("%d sent in 5s; want the newer policy's 9/s", n)
		}
	})
}
