package client_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/client"
)

func ExampleBackoff() {
	r := rand.New(rand.NewPCG(1, 2)) // seeded, so the output is stable
	b := client.Backoff{Base: 100 * time.Millisecond, Cap: time.Second, Rand: r.Float64}
	for attempt := range 6 {
		window := min(b.Cap, b.Base<<attempt)
		fmt.Printf("retry %d: window %v, wait %v\n", attempt, window, b.Delay(attempt, 0).Round(time.Millisecond))
	}
	// Output:
	// retry 0: window 100ms, wait 68ms
	// retry 1: window 200ms, wait 92ms
	// retry 2: window 400ms, wait 203ms
	// retry 3: window 800ms, wait 344ms
	// retry 4: window 1s, wait 798ms
	// retry 5: window 1s, wait 388ms
}

// A Transport in front of a fake server that fails twice: the retries and
// their waits, then the server's answer. A huge Retry-After is not waited
// for: the 429 comes back at once. A POST without an Idempotency-Key is
// sent once.
func ExampleTransport() {
	n := 0
	flaky := rtFunc(func(r *http.Request) (*http.Response, error) {
		n++
		switch {
		case r.URL.Path == "/busy":
			return respond(http.StatusTooManyRequests, "Retry-After", "86400"), nil
		case n <= 2:
			return respond(http.StatusServiceUnavailable), nil
		}
		return respond(http.StatusOK), nil
	})
	tr := &client.Transport{
		Base:    flaky,
		Backoff: client.Backoff{Base: time.Millisecond, Cap: time.Millisecond, Jitter: client.NoJitter},
		OnRetry: func(e client.RetryEvent) {
			fmt.Printf("attempt %d: %d, retrying in %v\n", e.Attempt, e.Response.StatusCode, e.Wait)
		},
	}
	hc := &http.Client{Transport: tr}

	resp, err := hc.Get("http://api.test/")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("GET /:", resp.StatusCode, "after", n, "attempts")

	resp, err = hc.Get("http://api.test/busy")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("GET /busy:", resp.StatusCode, "Retry-After", resp.Header.Get("Retry-After"))

	n = 0
	resp, err = hc.Post("http://api.test/pay", "application/json", strings.NewReader(`{"amount":42}`))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("POST /pay:", resp.StatusCode, "after", n, "attempt")
	// Output:
	// attempt 1: 503, retrying in 1ms
	// attempt 2: 503, retrying in 1ms
	// GET /: 200 after 3 attempts
	// GET /busy: 429 Retry-After 86400
	// POST /pay: 503 after 1 attempt
}

// Retry runs any operation on a Backoff: here one that fails twice and then
// succeeds, one that fails for good, and one whose server asks for a wait
// longer than the Backoff's Cap, which ends the retries at once rather than
// park the caller for an hour.
func ExampleRetry() {
	ctx := context.Background()
	// Full jitter drawing 0 waits 0 between attempts: this example does
	// not sleep. Leave Rand nil in real code.
	b := client.Backoff{MaxAttempts: 5, Rand: func() float64 { return 0 }}

	attempts := 0
	err := client.Retry(ctx, b, func(ctx context.Context) error {
		attempts++
		if attempts < 3 {
			return errors.New("connection reset")
		}
		return nil
	})
	fmt.Println("flaky:", err, "after", attempts, "attempts")

	errNotFound := errors.New("not found")
	err = client.Retry(ctx, b, func(ctx context.Context) error {
		return client.Permanent(errNotFound)
	})
	fmt.Println("permanent:", err, errors.Is(err, errNotFound))

	err = client.Retry(ctx, b, func(ctx context.Context) error {
		return client.RetryAfter(errors.New("quota exceeded"), time.Hour)
	})
	fmt.Println("busy:", err)
	// Output:
	// flaky: <nil> after 3 attempts
	// permanent: client: giving up after 1 attempt: not found true
	// busy: client: giving up after 1 attempt: client: retry after 1h0m0s: quota exceeded
}

// Do returns the operation's result. An HTTP call inside it turns the
// server's Retry-After into RetryAfter, and makes its request with the
// operation's context, so that a Transport in its client does not retry
// as well.
func ExampleDo() {
	n := 0
	hc := &http.Client{Transport: &client.Transport{Base: rtFunc(func(*http.Request) (*http.Response, error) {
		n++
		if n == 1 {
			return respond(http.StatusTooManyRequests, "Retry-After", "0"), nil
		}
		return respond(http.StatusOK), nil
	})}}
	b := client.Backoff{Rand: func() float64 { return 0 }} // no waiting in this example

	status, err := client.Do(context.Background(), b, func(ctx context.Context) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
		if err != nil {
			return 0, client.Permanent(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			err := fmt.Errorf("status %d", resp.StatusCode)
			if d, ok := client.ServerWait(resp.Header, time.Now()); ok {
				return 0, client.RetryAfter(err, d)
			}
			return 0, err
		}
		return resp.StatusCode, nil
	})
	fmt.Println(status, err, "after", n, "requests")
	// Output:
	// 200 <nil> after 2 requests
}
