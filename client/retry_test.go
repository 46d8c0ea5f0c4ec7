package client_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/client"
)

// script returns an operation that returns errs[i] on call i (nil after the
// last), and records when each call began.
func script(errs ...error) (op func(context.Context) error, calls *[]time.Time) {
	calls = new([]time.Time)
	op = func(context.Context) error {
		i := len(*calls)
		*calls = append(*calls, time.Now())
		if i < len(errs) {
			return errs[i]
		}
		return nil
	}
	return op, calls
}

// gaps returns the time between consecutive calls.
func gaps(ts []time.Time) []time.Duration {
	var ds []time.Duration
	for i := 1; i < len(ts); i++ {
		ds = append(ds, ts[i].Sub(ts[i-1]))
	}
	return ds
}

var (
	errFlaky = errors.New("connection reset")
	errBad   = errors.New("invalid argument")
)

// noJitter waits exactly Base·2^n: 1s, 2s, 4s, …
var noJitter = client.Backoff{Base: time.Second, Cap: time.Minute, Jitter: client.NoJitter, MaxAttempts: 5}

func TestRetrySucceedsAfterBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		op, calls := script(errFlaky, errFlaky, errFlaky)
		if err := client.Retry(context.Background(), noJitter, op); err != nil {
			t.Fatalf("Retry = %v, want nil", err)
		}
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
		if got := gaps(*calls); !slices.Equal(got, want) {
			t.Fatalf("waits %v, want %v", got, want)
		}
	})
}

// After MaxAttempts the error reports the attempts and wraps the last error.
func TestRetryGivesUpAfterMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		last := errors.New("still down")
		op, calls := script(errFlaky, errFlaky, last, errFlaky)
		b := noJitter
		b.MaxAttempts = 3
		err := client.Retry(context.Background(), b, op)
		var re *client.RetryError
		if !errors.As(err, &re) || re.Attempts != 3 || !errors.Is(err, last) || errors.Is(err, errFlaky) || len(*calls) != 3 {
			t.Fatalf("Retry = %v after %d calls; want a RetryError of 3 attempts wrapping the last error", err, len(*calls))
		}
		if want := "client: giving up after 3 attempts: still down"; err.Error() != want {
			t.Fatalf("message %q, want %q", err, want)
		}
	})
}

func TestRetryPermanent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		op, calls := script(errFlaky, fmtWrap(client.Permanent(errBad)))
		t0 := time.Now()
		err := client.Retry(context.Background(), noJitter, op)
		var perm *client.PermanentError
		var re *client.RetryError
		if !errors.Is(err, errBad) || !errors.As(err, &perm) || !errors.As(err, &re) || re.Attempts != 2 || len(*calls) != 2 {
			t.Fatalf("Retry = %v after %d calls; want errBad, permanent, after 2 attempts", err, len(*calls))
		}
		if time.Since(t0) != time.Second {
			t.Fatalf("took %v, want only the first wait (1s)", time.Since(t0))
		}
		if client.Permanent(nil) != nil {
			t.Fatal("Permanent(nil) != nil")
		}
		if (&client.PermanentError{}).Error() == "" {
			t.Fatal("empty message")
		}
	})
}

// fmtWrap wraps err as an operation might, to show that Retry looks through
// wrapping.
func fmtWrap(err error) error { return errors.Join(errors.New("op"), err) }

// A server-given wait replaces the Backoff's delay: exactly, with a random
// source of 0; up to 10% more otherwise, never past Cap. Zero is no advice.
func TestRetryAfterWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := noJitter
		b.Rand = zeroRand
		op, calls := script(client.RetryAfter(errFlaky, 7*time.Second), fmtWrap(client.RetryAfter(nil, 0)), errFlaky)
		if err := client.Retry(context.Background(), b, op); err != nil {
			t.Fatal(err)
		}
		// 7s as asked, then the Backoff's 2s (attempt 2) and 4s.
		want := []time.Duration{7 * time.Second, 2 * time.Second, 4 * time.Second}
		if got := gaps(*calls); !slices.Equal(got, want) {
			t.Fatalf("waits %v, want %v", got, want)
		}

		b.Rand = func() float64 { return 0.999 }
		b.Cap = 10 * time.Second
		for _, asked := range []time.Duration{5 * time.Second, 10 * time.Second} {
			op, calls = script(client.RetryAfter(errFlaky, asked))
			if err := client.Retry(context.Background(), b, op); err != nil {
				t.Fatal(err)
			}
			got := gaps(*calls)[0]
			if got < asked || got > asked+asked/10 || got > b.Cap {
				t.Fatalf("asked %v: waited %v, want in [asked, asked+10%%] and at most Cap %v", asked, got, b.Cap)
			}
		}
	})
}

// A server-given wait above the Backoff's Cap ends the retries at once.
func TestRetryAfterAboveCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		op, calls := script(client.RetryAfter(errFlaky, time.Hour))
		t0 := time.Now()
		err := client.Retry(context.Background(), noJitter, op)
		var ra *client.RetryAfterError
		if !errors.As(err, &ra) || ra.Wait != time.Hour || !errors.Is(err, errFlaky) || len(*calls) != 1 || time.Since(t0) != 0 {
			t.Fatalf("Retry = %v after %d calls and %v; want the RetryAfterError at once", err, len(*calls), time.Since(t0))
		}
		if !strings.Contains(err.Error(), "retry after 1h0m0s: connection reset") {
			t.Fatalf("message %q", err)
		}
	})
}

// MaxElapsed and the context's deadline: a wait that would end too late is
// not taken.
func TestRetryTimeBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := noJitter
		b.MaxElapsed = 5 * time.Second // 1s + 2s fit, 4s more do not
		op, calls := script(errFlaky, errFlaky, errFlaky, errFlaky)
		t0 := time.Now()
		err := client.Retry(context.Background(), b, op)
		var re *client.RetryError
		if !errors.As(err, &re) || re.Attempts != 3 || len(*calls) != 3 || time.Since(t0) != 3*time.Second {
			t.Fatalf("MaxElapsed: %v after %d calls and %v; want 3 attempts in 3s", err, len(*calls), time.Since(t0))
		}

		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		defer cancel()
		op, calls = script(errFlaky, errFlaky, errFlaky, errFlaky)
		t0 = time.Now()
		err = client.Retry(ctx, noJitter, op)
		if !errors.As(err, &re) || re.Attempts != 2 || !errors.Is(err, errFlaky) || time.Since(t0) != time.Second {
			t.Fatalf("deadline: %v after %d calls and %v; want 2 attempts in 1s", err, len(*calls), time.Since(t0))
		}
	})
}

// A context cancelled during a wait ends Retry with an error wrapping both
// the cause and the last error; a context done before the first attempt
// means no attempt.
func TestRetryContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(1500*time.Millisecond, cancel)
		op, calls := script(errFlaky, errFlaky, errFlaky)
		err := client.Retry(ctx, noJitter, op)
		var re *client.RetryError
		if !errors.As(err, &re) || re.Attempts != 2 || !errors.Is(err, context.Canceled) || !errors.Is(err, errFlaky) || len(*calls) != 2 {
			t.Fatalf("cancelled: %v after %d calls; want 2 attempts, Canceled and the last error", err, len(*calls))
		}

		op, calls = script()
		err = client.Retry(ctx, noJitter, op)
		if !errors.As(err, &re) || re.Attempts != 0 || !errors.Is(err, context.Canceled) || len(*calls) != 0 {
			t.Fatalf("done before: %v after %d calls; want 0 attempts", err, len(*calls))
		}

		// The operation's own context error is retried while ctx is live.
		op, calls = script(context.DeadlineExceeded)
		if err := client.Retry(context.Background(), noJitter, op); err != nil || len(*calls) != 2 {
			t.Fatalf("per-attempt timeout: %v after %d calls; want success on the second", err, len(*calls))
		}
	})
}

func TestDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		v, err := client.Do(context.Background(), noJitter, func(context.Context) (int, error) {
			n++
			if n < 3 {
				return -1, errFlaky
			}
			return 42, nil
		})
		if v != 42 || err != nil || n != 3 {
			t.Fatalf("Do = %v, %v after %d calls; want 42", v, err, n)
		}
		v, err = client.Do(context.Background(), noJitter, func(context.Context) (int, error) {
			return 7, client.Permanent(errBad)
		})
		if v != 0 || !errors.Is(err, errBad) {
			t.Fatalf("Do = %v, %v; want 0 and errBad", v, err)
		}
	})
}

// Retry layers do not multiply: a Retry, or a Transport, reached with the
// context Retry passes its operation makes one attempt, and the outer Retry
// still sees what the inner attempt returned.
func TestRetryOneLayer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := 0
		outer := 0
		exact := noJitter
		exact.Rand = zeroRand // no jitter on the server's wait either
		t0 := time.Now()
		err := client.Retry(context.Background(), exact, func(ctx context.Context) error {
			outer++
			return client.Retry(ctx, noJitter, func(context.Context) error {
				inner++
				if inner == 1 {
					return client.RetryAfter(errFlaky, 3*time.Second)
				}
				return errFlaky
			})
		})
		if !errors.Is(err, errFlaky) || outer != 5 || inner != 5 {
			t.Fatalf("nested Retry: %v, %d outer and %d inner calls; want 5 and 5", err, outer, inner)
		}
		// The inner attempt's RetryAfter reaches the outer loop: 3s, then
		// the Backoff's 2s, 4s and 8s.
		if el := time.Since(t0); el != 17*time.Second {
			t.Fatalf("nested Retry took %v, want 17s", el)
		}

		srv := always(http.StatusServiceUnavailable)
		tr := &client.Transport{Base: srv, Backoff: noJitter}
		b := noJitter
		b.MaxAttempts = 3
		err = client.Retry(context.Background(), b, func(ctx context.Context) error {
			req := get(t, "http://api.test/").WithContext(ctx)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			return errors.New(resp.Status)
		})
		if err == nil || srv.count() != 3 {
			t.Fatalf("Transport inside Retry: %v, %d requests; want 3", err, srv.count())
		}

		// And Retry inside a Transport's attempt makes one attempt.
		calls := 0
		tr = &client.Transport{Backoff: noJitter, Base: rtFunc(func(r *http.Request) (*http.Response, error) {
			var resp *http.Response
			err := client.Retry(r.Context(), noJitter, func(context.Context) error {
				calls++
				resp = respond(http.StatusServiceUnavailable)
				return nil
			})
			return resp, err
		})}
		if resp, err := tr.RoundTrip(get(t, "http://api.test/")); err != nil || resp.StatusCode != 503 || calls != 5 {
			t.Fatalf("Retry inside Transport: %v, %v, %d calls; want 503 after 5", resp, err, calls)
		}
	})
}
