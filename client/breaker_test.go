package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// closeTracker is a request body that records Close.
type closeTracker struct {
	*strings.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

func TestBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		status := http.StatusServiceUnavailable
		var fail error
		srv := &fakeServer{script: func(int, *http.Request) (*http.Response, error) {
			if fail != nil {
				return nil, fail
			}
			return respond(status), nil
		}}
		b := client.NewBreaker(srv, client.BreakerSettings{Name: "api", Timeout: 30 * time.Second})

		// 429s are successes: the breaker stays closed.
		status = http.StatusTooManyRequests
		for range 20 {
			resp, err := b.RoundTrip(get(t, "http://api.test/"))
			if err != nil || resp.StatusCode != 429 {
				t.Fatalf("429: %v, %v", resp, err)
			}
		}
		if b.State() != client.BreakerClosed {
			t.Fatalf("state %v after 429s, want closed", b.State())
		}

		// Cancelled requests count as neither.
		fail = context.Canceled
		for range 10 {
			b.RoundTrip(get(t, "http://api.test/"))
		}
		if b.State() != client.BreakerClosed || b.ConsecutiveFailures() != 0 {
			t.Fatalf("state %v, failures %d after cancellations, want closed with no failures", b.State(), b.ConsecutiveFailures())
		}

		// Five 5xx and one transport error in a row (more than 5) trip it;
		// the 5xx responses are returned as responses.
		fail, status = nil, http.StatusServiceUnavailable
		for range 5 {
			if resp, err := b.RoundTrip(get(t, "http://api.test/")); err != nil || resp.StatusCode != 503 {
				t.Fatalf("503: %v, %v", resp, err)
			}
		}
		fail = errors.New("connection reset")
		b.RoundTrip(get(t, "http://api.test/"))
		if b.State() != client.BreakerOpen {
			t.Fatalf("state %v after 6 failures, want open", b.State())
		}

		// Open: no request is sent, the body is closed, the error says why.
		before := srv.count()
		body := &closeTracker{Reader: strings.NewReader("x")}
		req, _ := http.NewRequest(http.MethodPut, "http://api.test/", body)
		_, err := b.RoundTrip(req)
		if !errors.Is(err, client.ErrBreakerOpen) || srv.count() != before || !body.closed || !strings.HasPrefix(err.Error(), "client: ") {
			t.Fatalf("open: err %v, sent %d, body closed %v", err, srv.count()-before, body.closed)
		}

		// A Transport over an open breaker does not retry.
		_, err = (&client.Transport{Base: b}).RoundTrip(get(t, "http://api.test/"))
		if !errors.Is(err, client.ErrBreakerOpen) || srv.count() != before {
			t.Fatalf("Transport over open breaker: %v, sent %d", err, srv.count()-before)
		}

		// After the timeout a probe that succeeds closes it.
		time.Sleep(31 * time.Second)
		fail, status = nil, http.StatusOK
		if resp, err := b.RoundTrip(get(t, "http://api.test/")); err != nil || resp.StatusCode != 200 {
			t.Fatalf("probe: %v, %v", resp, err)
		}
		if b.State() != client.BreakerClosed {
			t.Fatalf("state %v after a good probe, want closed", b.State())
		}
	})
}

// TestBreakerOnInjectedClock: on a clock of its own (no synctest bubble),
// the breaker opens at Threshold, is half-open when Timeout ends, reopens
// for twice as long when the probe fails (MaxTimeout allowing), and closes
// on a good probe.
func TestBreakerOnInjectedClock(t *testing.T) {
	clock := clocktest.New()
	status := http.StatusBadGateway
	srv := &fakeServer{script: func(int, *http.Request) (*http.Response, error) { return respond(status), nil }}
	b := client.NewBreaker(srv, client.BreakerSettings{Name: "api", Threshold: 2, Timeout: 10 * time.Second, MaxTimeout: time.Minute, Clock: clock})
	for range 2 {
		b.RoundTrip(get(t, "http://api.test/"))
	}
	if b.State() != client.BreakerOpen || b.ConsecutiveFailures() != 2 {
		t.Fatalf("after 2 failures: %v, %d failures; want open", b.State(), b.ConsecutiveFailures())
	}
	clock.Advance(10 * time.Second)
	if b.State() != client.BreakerHalfOpen {
		t.Fatalf("after Timeout: %v, want half-open", b.State())
	}
	b.RoundTrip(get(t, "http://api.test/")) // a failed probe: 20 s now
	clock.Advance(19 * time.Second)
	if _, err := b.RoundTrip(get(t, "http://api.test/")); !errors.Is(err, client.ErrBreakerOpen) {
		t.Fatalf("19 s after a failed probe: %v, want ErrBreakerOpen", err)
	}
	clock.Advance(time.Second)
	status = http.StatusOK
	if resp, err := b.RoundTrip(get(t, "http://api.test/")); err != nil || resp.StatusCode != 200 || b.State() != client.BreakerClosed {
		t.Fatalf("good probe: %v, %v, state %v", resp, err, b.State())
	}
}
