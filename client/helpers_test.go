package client_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rtFunc is a RoundTripper made of a function: the fake server of the
// synctest tests, where real network I/O would block the bubble.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// trackedBody is a response body that records whether it was closed.
type trackedBody struct {
	io.Reader
	closed *atomic.Int32
}

func (b trackedBody) Close() error { b.closed.Add(1); return nil }

// attempt is one request a fake server received.
type attempt struct {
	at     time.Time
	method string
	body   string
	header http.Header
}

// fakeServer answers each request with the response script returns for
// attempt n (0 for the first), and records the attempts.
type fakeServer struct {
	script func(n int, r *http.Request) (*http.Response, error)

	mu       sync.Mutex
	attempts []attempt
	closed   atomic.Int32 // response bodies closed
}

func (s *fakeServer) RoundTrip(r *http.Request) (*http.Response, error) {
	var body string
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		body = string(b)
	}
	s.mu.Lock()
	n := len(s.attempts)
	s.attempts = append(s.attempts, attempt{at: time.Now(), method: r.Method, body: body, header: r.Header})
	s.mu.Unlock()
	resp, err := s.script(n, r)
	if resp != nil {
		resp.Request = r
		resp.Body = trackedBody{Reader: strings.NewReader("body"), closed: &s.closed}
	}
	return resp, err
}

func (s *fakeServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.attempts)
}

func (s *fakeServer) times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := make([]time.Time, len(s.attempts))
	for i, a := range s.attempts {
		ts[i] = a.at
	}
	return ts
}

// respond returns a response with the status and header pairs (name, value,
// name, value, …).
func respond(status int, kv ...string) *http.Response {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: h, Body: http.NoBody, ProtoMajor: 1, ProtoMinor: 1}
}

// always answers every attempt with the same status and header.
func always(status int, kv ...string) *fakeServer {
	return &fakeServer{script: func(int, *http.Request) (*http.Response, error) { return respond(status, kv...), nil }}
}

// failFirst answers the first n attempts with status and header, then 200.
func failFirst(n, status int, kv ...string) *fakeServer {
	return &fakeServer{script: func(i int, _ *http.Request) (*http.Response, error) {
		if i < n {
			return respond(status, kv...), nil
		}
		return respond(http.StatusOK), nil
	}}
}

// zeroRand is a random source that always returns 0: full jitter waits 0,
// and server-given waits get no jitter, so waits are exact.
func zeroRand() float64 { return 0 }

// roundTrip is rt's response to a GET of url; an error fails the test.
func roundTrip(t *testing.T, rt http.RoundTripper, url string) *http.Response {
	t.Helper()
	resp, err := rt.RoundTrip(get(t, url))
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp
}

func get(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
