package client_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/rlheader"
)

// Retry-After is obeyed to the nanosecond, in delay-seconds and in each of
// the three HTTP-date formats, when the jitter source returns 0.
func TestRetryAfterObeyed(t *testing.T) {
	forms := map[string]func(at time.Time) string{
		"seconds":     func(time.Time) string { return "5" },
		"IMF-fixdate": func(at time.Time) string { return at.UTC().Format(http.TimeFormat) },
		"RFC 850":     func(at time.Time) string { return at.UTC().Format("Monday, 02-Jan-06 15:04:05 GMT") },
		"asctime":     func(at time.Time) string { return at.UTC().Format("Mon Jan _2 15:04:05 2006") },
	}
	for name, form := range forms {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				srv := failFirst(1, http.StatusTooManyRequests, "Retry-After", form(t0.Add(5*time.Second)))
				tr := &client.Transport{Base: srv, Backoff: client.Backoff{Rand: zeroRand}}
				resp, err := tr.RoundTrip(get(t, "http://api.test/"))
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("RoundTrip = %v, %v; want 200", resp, err)
				}
				ts := srv.times()
				if len(ts) != 2 || ts[1].Sub(ts[0]) != 5*time.Second {
					t.Fatalf("attempts at %v, want two, 5s apart", ts)
				}
			})
		})
	}
}

// With the default random source, a server-given wait gets up to 10% more,
// never less.
func TestRetryAfterJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seen := map[time.Duration]bool{}
		for range 50 {
			srv := failFirst(1, http.StatusServiceUnavailable, "Retry-After", "10")
			tr := &client.Transport{Base: srv}
			if _, err := tr.RoundTrip(get(t, "http://api.test/")); err != nil {
				t.Fatal(err)
			}
			ts := srv.times()
			d := ts[1].Sub(ts[0])
			if d < 10*time.Second || d > 11*time.Second {
				t.Fatalf("waited %v, want in [10s, 11s]", d)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("50 clients told Retry-After: 10 came back at only %d distinct instants", len(seen))
		}
	})
}

// Retry-After takes precedence over RateLimit, which takes precedence over
// the backoff.
func TestWaitPrecedence(t *testing.T) {
	cases := []struct {
		name string
		kv   []string
		want time.Duration
	}{
		{"retry-after over ratelimit", []string{"Retry-After", "3", "RateLimit", `"a";r=0;t=9`}, 3 * time.Second},
		{"ratelimit t", []string{"RateLimit", `"a";r=0;t=9`}, 9 * time.Second},
		{"longest exhausted item", []string{"RateLimit", `"a";r=0;t=4, "b";r=0;t=7, "c";r=5;t=60`}, 7 * time.Second},
		{"ratelimit with quota left: backoff", []string{"RateLimit", `"a";r=3;t=9`}, time.Second},
		{"ratelimit without t: backoff", []string{"RateLimit", `"a";r=0`}, time.Second},
		{"bad retry-after falls to ratelimit", []string{"Retry-After", "soon", "RateLimit", `"a";r=0;t=9`}, 9 * time.Second},
		{"retry-after 0: backoff", []string{"Retry-After", "0"}, time.Second},
		{"nothing: backoff", nil, time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := failFirst(1, http.StatusTooManyRequests, c.kv...)
				tr := &client.Transport{Base: srv, Backoff: client.Backoff{Base: time.Second, Jitter: client.NoJitter, Rand: zeroRand}}
				if _, err := tr.RoundTrip(get(t, "http://api.test/")); err != nil {
					t.Fatal(err)
				}
				ts := srv.times()
				if len(ts) != 2 || ts[1].Sub(ts[0]) != c.want {
					t.Fatalf("attempts at %v, want two, %v apart", ts, c.want)
				}
			})
		})
	}
}

// Negative, fractional, absurd and malformed Retry-After and RateLimit values
// are ignored: the backoff's delay is used instead.
func TestBadServerWaitIgnored(t *testing.T) {
	bad := [][]string{
		{"Retry-After", "-5"},
		{"Retry-After", "1.5"},
		{"Retry-After", "+3"},
		{"Retry-After", ""},
		{"Retry-After", "0x10"},
		{"Retry-After", "5 seconds"},
		{"Retry-After", "Mon, 32 Nov 1994 08:49:37 GMT"},
		{"Retry-After", "Sun, 06 Nov 1994 08:49:37 PST"},
		{"Retry-After", "tomorrow"},
		{"Retry-After", "5", "Retry-After", "5"}, // repeated
		{"RateLimit", `"a";r=0;t=-3`},
		{"RateLimit", `"a";r=0;t=1.5`},
		{"RateLimit", `"a";r=-1;t=5`},
		{"RateLimit", `"a";r=0;t=5;t`},
		{"RateLimit", `a;r=0;t=5`},
		{"RateLimit", `"a";r=0;t=5,`},
		{"RateLimit", `"a";r=0;t=9999999999999999`},
		{"RateLimit", `"a";r=0;t="5"`},
		{"RateLimit", "\"a\";r=0;t=5\x00"},
	}
	for _, kv := range bad {
		t.Run(strings.Join(kv, ": "), func(t *testing.T) {
			if d, ok := client.ServerWait(respond(429, kv...).Header, time.Now()); ok {
				t.Fatalf("ServerWait(%q) = %v, true; want ignored", kv, d)
			}
			synctest.Test(t, func(t *testing.T) {
				srv := failFirst(1, http.StatusTooManyRequests, kv...)
				tr := &client.Transport{Base: srv, Backoff: client.Backoff{Base: 2 * time.Second, Jitter: client.NoJitter}}
				if _, err := tr.RoundTrip(get(t, "http://api.test/")); err != nil {
					t.Fatal(err)
				}
				ts := srv.times()
				if len(ts) != 2 || ts[1].Sub(ts[0]) != 2*time.Second {
					t.Fatalf("attempts at %v, want two, 2s (the backoff) apart", ts)
				}
			})
		})
	}
}

func TestServerWaitValues(t *testing.T) {
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		kv   []string
		want time.Duration
		ok   bool
	}{
		{[]string{"Retry-After", "120"}, 120 * time.Second, true},
		{[]string{"Retry-After", " 7\t"}, 7 * time.Second, true},
		{[]string{"Retry-After", "Fri, 01 Mar 2024 12:00:30 GMT"}, 30 * time.Second, true},
		{[]string{"Retry-After", "Fri, 01 Mar 2024 11:00:00 GMT"}, 0, true}, // in the past
		{[]string{"Retry-After", "99999999999999999999999"}, rlheader.MaxRetryAfter, true},
		{[]string{"RateLimit", `"a";r=0;t=30`}, 30 * time.Second, true},
		{[]string{"RateLimit", `"a";r=1;t=30`}, 0, false},
		{nil, 0, false},
	}
	for _, c := range cases {
		d, ok := client.ServerWait(respond(429, c.kv...).Header, now)
		if d != c.want || ok != c.ok {
			t.Errorf("ServerWait(%q) = %v, %v; want %v, %v", c.kv, d, ok, c.want, c.ok)
		}
	}
}

// A POST without an idempotency key is never retried; one with it is, with
// the same body bytes; so is a PUT.
func TestOnlyIdempotentRequestsRetried(t *testing.T) {
	payload := []byte(`{"amount":42}`)
	cases := []struct {
		method  string
		key     string
		retried bool
	}{
		{http.MethodPost, "", false},
		{http.MethodPatch, "", false},
		{http.MethodPost, "Idempotency-Key", true},
		{http.MethodPost, "X-Idempotency-Key", true},
		{http.MethodPut, "", true},
		{http.MethodDelete, "", true},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.key, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := always(http.StatusServiceUnavailable)
				tr := &client.Transport{Base: srv, Backoff: client.Backoff{MaxAttempts: 3}}
				req, err := http.NewRequest(c.method, "http://api.test/pay", bytes.NewReader(payload))
				if err != nil {
					t.Fatal(err)
				}
				if c.key != "" {
					req.Header.Set(c.key, "8e03978e-40d5-43e8-bc93-6894a57f9324")
				}
				resp, err := tr.RoundTrip(req)
				if err != nil || resp.StatusCode != 503 {
					t.Fatalf("RoundTrip = %v, %v; want the 503", resp, err)
				}
				want := 1
				if c.retried {
					want = 3
				}
				srv.mu.Lock()
				defer srv.mu.Unlock()
				if len(srv.attempts) != want {
					t.Fatalf("%d attempts, want %d", len(srv.attempts), want)
				}
				for i, a := range srv.attempts {
					if a.body != string(payload) || a.method != c.method {
						t.Errorf("attempt %d: %s %q, want %s %q", i, a.method, a.body, c.method, payload)
					}
				}
			})
		})
	}
}

// A body that cannot be rewound is sent once; a GetBody that fails ends the
// retries with an error that says so.
func TestNonRewindableBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := always(http.StatusServiceUnavailable)
		tr := &client.Transport{Base: srv}
		req, _ := http.NewRequest(http.MethodPut, "http://api.test/x", io.NopCloser(strings.NewReader("once")))
		if req.GetBody != nil {
			t.Fatal("GetBody set for an opaque reader")
		}
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 503 || srv.count() != 1 {
			t.Fatalf("RoundTrip = %v, %v after %d attempts; want the 503 after 1", resp, err, srv.count())
		}

		srv = always(http.StatusServiceUnavailable)
		tr = &client.Transport{Base: srv}
		req, _ = http.NewRequest(http.MethodPut, "http://api.test/x", strings.NewReader("twice"))
		boom := errors.New("spool gone")
		req.GetBody = func() (io.ReadCloser, error) { return nil, boom }
		resp, err = tr.RoundTrip(req)
		var re *client.RetryError
		if resp != nil || !errors.As(err, &re) || !errors.Is(err, boom) || re.Attempts != 1 {
			t.Fatalf("RoundTrip = %v, %v; want a RetryError after 1 attempt wrapping %v", resp, err, boom)
		}
	})
}

// The caps hold: attempts, total time, and the cap on server-given waits.
func TestRetryCapsAttemptsTimeAndServerWaits(t *testing.T) {
	t.Run("attempts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := always(http.StatusBadGateway)
			tr := &client.Transport{Base: srv, Backoff: client.Backoff{MaxAttempts: 5}}
			req := get(t, "http://api.test/")
			resp, err := tr.RoundTrip(req)
			if err != nil || resp.StatusCode != 502 || srv.count() != 5 {
				t.Fatalf("RoundTrip = %v, %v after %d attempts; want the 502 after 5", resp, err, srv.count())
			}
			if resp.Request != req {
				t.Errorf("the response's Request is not the caller's")
			}
			if got := srv.closed.Load(); got != 4 {
				t.Errorf("%d discarded bodies closed, want 4", got)
			}
			resp.Body.Close()
		})
	})
	t.Run("total time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := always(http.StatusServiceUnavailable)
			// Waits of 1, 2, 4, 8 s: attempts at 0, 1, 3, 7; the next would
			// start at 15 s > 10 s.
			tr := &client.Transport{Base: srv, Backoff: client.Backoff{Base: time.Second, Jitter: client.NoJitter, MaxAttempts: 100, MaxElapsed: 10 * time.Second}}
			t0 := time.Now()
			resp, err := tr.RoundTrip(get(t, "http://api.test/"))
			if err != nil || resp.StatusCode != 503 || srv.count() != 4 {
				t.Fatalf("RoundTrip = %v, %v after %d attempts; want the 503 after 4", resp, err, srv.count())
			}
			if el := time.Since(t0); el != 7*time.Second {
				t.Errorf("took %v, want 7s", el)
			}
		})
	})
	t.Run("server wait above the cap", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := always(http.StatusTooManyRequests, "Retry-After", "86400")
			tr := &client.Transport{Base: srv}
			t0 := time.Now()
			resp, err := tr.RoundTrip(get(t, "http://api.test/"))
			if err != nil || resp.StatusCode != 429 || srv.count() != 1 || time.Since(t0) != 0 {
				t.Fatalf("RoundTrip = %v, %v after %d attempts and %v; want the 429 at once", resp, err, srv.count(), time.Since(t0))
			}
			if resp.Header.Get("Retry-After") != "86400" {
				t.Errorf("the returned response lost its header")
			}
		})
	})
	t.Run("jitter stays under the cap", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := failFirst(1, http.StatusTooManyRequests, "Retry-After", "58")
			tr := &client.Transport{Base: srv, MaxServerWait: time.Minute, Backoff: client.Backoff{Rand: func() float64 { return 0.99 }}}
			if _, err := tr.RoundTrip(get(t, "http://api.test/")); err != nil {
				t.Fatal(err)
			}
			if ts := srv.times(); ts[1].Sub(ts[0]) != time.Minute {
				t.Fatalf("waited %v, want 58s + jitter capped at 1m", ts[1].Sub(ts[0]))
			}
		})
	})
	t.Run("no cap when the caller says so", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := failFirst(1, http.StatusTooManyRequests, "Retry-After", "7200")
			tr := &client.Transport{Base: srv, MaxServerWait: -1, Backoff: client.Backoff{Rand: zeroRand}}
			if _, err := tr.RoundTrip(get(t, "http://api.test/")); err != nil {
				t.Fatal(err)
			}
			if ts := srv.times(); ts[1].Sub(ts[0]) != 2*time.Hour {
				t.Fatalf("waited %v, want 2h", ts[1].Sub(ts[0]))
			}
		})
	})
}

// The request's context and deadline: no wait past the deadline, no retry
// once the context is done, a cancelled wait ends the request.
func TestRetryEndsWithTheRequestContext(t *testing.T) {
	t.Run("server wait past the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv := always(http.StatusTooManyRequests, "Retry-After", "20")
			req := get(t, "http://api.test/").WithContext(ctx)
			t0 := time.Now()
			resp, err := (&client.Transport{Base: srv}).RoundTrip(req)
			if err != nil || resp.StatusCode != 429 || srv.count() != 1 || time.Since(t0) != 0 {
				t.Fatalf("RoundTrip = %v, %v after %d attempts and %v; want the 429 at once", resp, err, srv.count(), time.Since(t0))
			}
		})
	})
	t.Run("backoff past the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv := always(http.StatusServiceUnavailable)
			tr := &client.Transport{Base: srv, Backoff: client.Backoff{Base: 3 * time.Second, Jitter: client.NoJitter, MaxAttempts: 10}}
			req := get(t, "http://api.test/").WithContext(ctx)
			t0 := time.Now()
			resp, err := tr.RoundTrip(req)
			// Waits 3 s, then 6 s would end at 9 s; then 12 s would end at
			// 21 s, past the deadline: 3 attempts, 9 s.
			if err != nil || resp.StatusCode != 503 || srv.count() != 3 || time.Since(t0) != 9*time.Second {
				t.Fatalf("RoundTrip = %v, %v after %d attempts and %v; want the 503 after 3 and 9s", resp, err, srv.count(), time.Since(t0))
			}
		})
	})
	t.Run("cancelled during the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			srv := always(http.StatusTooManyRequests, "Retry-After", "30")
			req := get(t, "http://api.test/").WithContext(ctx)
			time.AfterFunc(5*time.Second, cancel)
			t0 := time.Now()
			resp, err := (&client.Transport{Base: srv}).RoundTrip(req)
			var re *client.RetryError
			if resp != nil || !errors.As(err, &re) || !errors.Is(err, context.Canceled) || re.Attempts != 1 || re.LastStatus != 429 {
				t.Fatalf("RoundTrip = %v, %v; want a RetryError after 1 attempt, last status 429, wrapping context.Canceled", resp, err)
			}
			if time.Since(t0) != 5*time.Second || srv.count() != 1 || srv.closed.Load() != 1 {
				t.Fatalf("returned after %v and %d attempts, %d bodies closed; want 5s, 1, 1", time.Since(t0), srv.count(), srv.closed.Load())
			}
		})
	})
	t.Run("done context is never retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			srv := &fakeServer{script: func(int, *http.Request) (*http.Response, error) {
				cancel()
				return nil, context.Canceled
			}}
			req := get(t, "http://api.test/").WithContext(ctx)
			_, err := (&client.Transport{Base: srv}).RoundTrip(req)
			if !errors.Is(err, context.Canceled) || srv.count() != 1 {
				t.Fatalf("err %v after %d attempts; want context.Canceled after 1", err, srv.count())
			}
		})
	})
}

// Transport errors are retried; the final error says how many attempts were
// made and wraps the last error. Errors that will not go away are not.
func TestTransportErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		srv := &fakeServer{script: func(int, *http.Request) (*http.Response, error) {
			n++
			return nil, fmt.Errorf("dial #%d: connection refused", n)
		}}
		_, err := (&client.Transport{Base: srv, Backoff: client.Backoff{MaxAttempts: 3}}).RoundTrip(get(t, "http://api.test/"))
		var re *client.RetryError
		if !errors.As(err, &re) || re.Attempts != 3 || !strings.Contains(err.Error(), "dial #3") || !strings.Contains(err.Error(), "3 attempts") {
			t.Fatalf("err = %v; want a RetryError of 3 attempts wrapping the third error", err)
		}
	})
	for _, final := range []error{
		x509.UnknownAuthorityError{},
		fmt.Errorf("client: circuit breaker %q: %w", "api", client.ErrBreakerOpen),
		fmt.Errorf("pacing: %w", client.ErrWaitTooLong),
		context.DeadlineExceeded,
	} {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{script: func(int, *http.Request) (*http.Response, error) { return nil, final }}
			_, err := (&client.Transport{Base: srv}).RoundTrip(get(t, "http://api.test/"))
			if !errors.Is(err, final) && !errors.As(err, new(x509.UnknownAuthorityError)) || srv.count() != 1 {
				t.Errorf("%v: err %v after %d attempts; want it after 1", final, err, srv.count())
			}
		})
	}
}

// Two Transports in a stack do not multiply the attempts.
func TestNestedTransports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := always(http.StatusServiceUnavailable)
		inner := &client.Transport{Base: srv}
		outer := &client.Transport{Base: inner}
		resp, err := outer.RoundTrip(get(t, "http://api.test/"))
		if err != nil || resp.StatusCode != 503 || srv.count() != client.DefaultMaxAttempts {
			t.Fatalf("RoundTrip = %v, %v after %d attempts; want the 503 after %d", resp, err, srv.count(), client.DefaultMaxAttempts)
		}
	})
}

func TestRetryOnAndCheckRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := always(http.StatusInternalServerError)
		resp := roundTrip(t, &client.Transport{Base: srv}, "http://api.test/")
		if resp.StatusCode != 500 || srv.count() != 1 {
			t.Fatalf("500 retried %d times by default", srv.count()-1)
		}
		srv = always(http.StatusInternalServerError)
		resp = roundTrip(t, &client.Transport{Base: srv, RetryOn: []int{500}}, "http://api.test/")
		if resp.StatusCode != 500 || srv.count() != client.DefaultMaxAttempts {
			t.Fatalf("RetryOn 500: %d attempts", srv.count())
		}
		srv = always(http.StatusTooManyRequests)
		resp = roundTrip(t, &client.Transport{Base: srv, RetryOn: []int{}}, "http://api.test/")
		if resp.StatusCode != 429 || srv.count() != 1 {
			t.Fatalf("empty RetryOn: %d attempts", srv.count())
		}
		srv = always(http.StatusConflict)
		check := func(_ *http.Request, resp *http.Response, err error) bool {
			return err == nil && resp.StatusCode == 409
		}
		resp = roundTrip(t, &client.Transport{Base: srv, CheckRetry: check, Backoff: client.Backoff{MaxAttempts: 2}}, "http://api.test/")
		if resp.StatusCode != 409 || srv.count() != 2 {
			t.Fatalf("CheckRetry 409: %d attempts", srv.count())
		}
	})
}

func TestOnRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := failFirst(2, http.StatusTooManyRequests, "Retry-After", "4")
		var events []client.RetryEvent
		tr := &client.Transport{Base: srv, Backoff: client.Backoff{Rand: zeroRand}, OnRetry: func(e client.RetryEvent) { events = append(events, e) }}
		if _, err := tr.RoundTrip(get(t, "http://api.test/")); err != nil {
			t.Fatal(err)
		}
		if len(events) != 2 {
			t.Fatalf("%d events, want 2", len(events))
		}
		for i, e := range events {
			if e.Attempt != i+1 || e.Wait != 4*time.Second || !e.FromServer || e.Response.StatusCode != 429 || e.Err != nil {
				t.Errorf("event %d: %+v", i, e)
			}
		}
	})
}
