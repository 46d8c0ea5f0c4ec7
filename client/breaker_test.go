package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/sluicehq/sluice/client"
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
		b := client.NewBreaker(srv, gobreaker.Settings{Name: "api", Timeout: 30 * time.Second})

		// 429s are successes: the breaker stays closed.
		status = http.StatusTooManyRequests
		for range 20 {
			resp, err := b.RoundTrip(get(t, "http://api.test/"))
			if err != nil || resp.StatusCode != 429 {
				t.Fatalf("429: %v, %v", resp, err)
			}
		}
		if b.State() != gobreaker.StateClosed {
			t.Fatalf("state %v after 429s, want closed", b.State())
		}

		// Cancelled requests count as neither.
		fail = context.Canceled
		for range 10 {
			b.RoundTrip(get(t, "http://api.test/"))
		}
		if b.State() != gobreaker.StateClosed || b.Counts().ConsecutiveFailures != 0 {
			t.Fatalf("state %v, counts %+v after cancellations, want closed with no failures", b.State(), b.Counts())
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
		if b.State() != gobreaker.StateOpen {
			t.Fatalf("state %v after 6 failures, want open", b.State())
		}

		// Open: no request is sent, the body is closed, the error says why.
		before := srv.count()
		body := &closeTracker{Reader: strings.NewReader("x")}
		req, _ := http.NewRequest(http.MethodPut, "http://api.test/", body)
		_, err := b.RoundTrip(req)
		if !errors.Is(err, gobreaker.ErrOpenState) || srv.count() != before || !body.closed || !strings.HasPrefix(err.Error(), "client: ") {
			t.Fatalf("open: err %v, sent %d, body closed %v", err, srv.count()-before, body.closed)
		}

		// A Transport over an open breaker does not retry.
		_, err = (&client.Transport{Base: b}).RoundTrip(get(t, "http://api.test/"))
		if !errors.Is(err, gobreaker.ErrOpenState) || srv.count() != before {
			t.Fatalf("Transport over open breaker: %v, sent %d", err, srv.count()-before)
		}

		// After the timeout a probe that succeeds closes it.
		time.Sleep(31 * time.Second)
		fail, status = nil, http.StatusOK
		if resp, err := b.RoundTrip(get(t, "http://api.test/")); err != nil || resp.StatusCode != 200 {
			t.Fatalf("probe: %v, %v", resp, err)
		}
		if b.State() != gobreaker.StateClosed {
			t.Fatalf("state %v after a good probe, want closed", b.State())
		}
	})
}
