package xdsconfig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/xdstest"
)

// waitFor bounds every wait on the network in these tests.
const waitFor = 20 * time.Second

// applied records the configs a client applied.
type applied struct {
	mu   sync.Mutex
	last *config.Config
	n    int
	c    chan struct{} // closed and replaced on each apply
}

func newApplied() *applied { return &applied{c: make(chan struct{})} }

func (a *applied) apply(_ context.Context, c *config.Config) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last, a.n = c, a.n+1
	close(a.c)
	a.c = make(chan struct{})
	return nil
}

// waitLimit waits until the applied config gives key=value the limit n
// per minute in domain d.
func (a *applied) waitLimit(ctx context.Context, t *testing.T, d, key, value string, n uint32) {
	t.Helper()
	for {
		a.mu.Lock()
		c, ch := a.last, a.c
		a.mu.Unlock()
		if c != nil {
			if r := c.Lookup(d, []config.Entry{{Key: key, Value: value}}); r != nil && r.RequestsPerUnit == n {
				return
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("no config with %s=%s at %d/minute applied: %v", key, value, n, ctx.Err())
		}
	}
}

func userLimit(name, domain string, n uint32) *rlconf.RateLimitConfig {
	return &rlconf.RateLimitConfig{Name: name, Domain: domain, Descriptors: []*rlconf.RateLimitDescriptor{
		{Key: "user", RateLimit: limit(rlconf.RateLimitUnit_MINUTE, n)},
	}}
}

// waits records the waits a client asks for, and waits a moment each.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) after(d time.Duration) <-chan time.Time {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return time.After(10 * time.Millisecond) // the real wait is the test's, not the backoff's
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

// startClient runs a client of srv until the test ends.
func startClient(t *testing.T, srv *xdstest.Server, a *applied, w *waits) *Client {
	t.Helper()
	c, err := New(Config{Target: srv.Addr, Logger: slog.New(slog.DiscardHandler), NodeID: "node-1", NodeMetadata: map[string]string{"zone": "a"},
		Headers: map[string]string{"x-tenant": "blue"}, Apply: a.apply, After: w.after, Rand: func() float64 { return 0.5 },
		Backoff: Backoff{Initial: 7 * time.Second, Max: time.Minute, Factor: 0.5, Jitter: true}, ConnectRetry: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func TestClientACKsAGoodConfigAndNACKsABadOneKeepingTheRunningOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	srv := xdstest.Start(t, "127.0.0.1:0", nil)
	a := newApplied()
	c := startClient(t, srv, a, &waits{})

	first, _ := srv.WaitRequest(ctx, t, 0, func(r xdstest.Request) bool { return true })
	if first.GetNode().GetId() != "node-1" || first.GetNode().GetMetadata().GetFields()["zone"].GetStringValue() != "a" ||
		first.GetTypeUrl() != TypeURL || len(first.GetResourceNames()) != 0 {
		t.Errorf("first request %v: want node-1 with zone=a, the RateLimitConfig type, no names", first.DiscoveryRequest)
	}
	if got := first.Metadata.Get("x-tenant"); len(got) != 1 || got[0] != "blue" {
		t.Errorf("stream metadata x-tenant = %v, want [blue]", got)
	}

	srv.Push(t, "node-1", "v1", userLimit("a", "d", 5))
	a.waitLimit(ctx, t, "d", "user", "x", 5)
	_, i := srv.WaitRequest(ctx, t, 0, func(r xdstest.Request) bool { return xdstest.IsACK(r, "v1") })
	select {
	case <-c.Ready():
	default:
		t.Error("Ready not closed after the first config applied")
	}

	bad := &rlconf.RateLimitConfig{Name: "bad", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{{Key: "user"}, {Key: "user"}}}
	srv.Push(t, "node-1", "v2", bad)
	nack, i := srv.WaitRequest(ctx, t, i+1, xdstest.IsNACK)
	if nack.GetVersionInfo() != "v1" || !strings.Contains(nack.GetErrorDetail().GetMessage(), "xds:bad") {
		t.Errorf("NACK %v: want version v1 (the running one) and the error naming xds:bad", nack.DiscoveryRequest)
	}
	if c.Version() != "v1" {
		t.Errorf("Version() = %q after a NACK, want v1", c.Version())
	}

	srv.Push(t, "node-1", "v3", userLimit("a", "d", 9))
	a.waitLimit(ctx, t, "d", "user", "x", 9)
	srv.WaitRequest(ctx, t, i+1, func(r xdstest.Request) bool { return xdstest.IsACK(r, "v3") })
}

func TestClientResubscribesWithItsVersionAfterTheServerRestarts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	srv := xdstest.Start(t, "127.0.0.1:0", nil)
	a := newApplied()
	w := &waits{}
	startClient(t, srv, a, w)
	srv.Push(t, "node-1", "v1", userLimit("a", "d", 5))
	a.waitLimit(ctx, t, "d", "user", "x", 5)
	srv.WaitRequest(ctx, t, 0, func(r xdstest.Request) bool { return xdstest.IsACK(r, "v1") })

	srv.Stop()
	srv2 := xdstest.Start(t, srv.Addr, nil)
	// The new server's first request carries what the client runs.
	srv2.WaitRequest(ctx, t, 0, func(r xdstest.Request) bool { return r.GetVersionInfo() == "v1" })
	srv2.Push(t, "node-1", "v2", userLimit("a", "d", 6))
	a.waitLimit(ctx, t, "d", "user", "x", 6)

	// The stream that was open and lost waited the backoff (7s: a factor
	// under 1 never grows it); streams that could not be opened waited
	// the connect retry, 3s varied by half either way.
	ws := w.all()
	if len(ws) == 0 || ws[0] != 7*time.Second {
		t.Fatalf("waits %v: want the backoff, 7s, first", ws)
	}
	for _, d := range ws[1:] {
		if d != 3*time.Second && d != 7*time.Second {
			t.Errorf("waits %v: want 7s or 3s (the connect retry, rand 0.5) only", ws)
		}
	}
}

// A response over the message size cap is never read: the stream ends,
// nothing is applied, and the client re-subscribes after its backoff; a
// response within the cap then applies.
func TestClientRefusesAResponseOverItsMessageSize(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	srv := xdstest.Start(t, "127.0.0.1:0", nil)
	a := newApplied()
	w := &waits{}
	c, err := New(Config{Target: srv.Addr, Logger: slog.New(slog.DiscardHandler), NodeID: "node-1", Apply: a.apply, After: w.after, MaxMsgSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(rctx); close(done) }()
	defer func() { rcancel(); <-done }()

	huge := userLimit("a", "d", 5)
	huge.Descriptors[0].Value = strings.Repeat("v", 8192)
	srv.Push(t, "node-1", "v1", huge)
	// Re-subscribed at least twice: the response was refused each time.
	srv.WaitRequest(ctx, t, 2, func(xdstest.Request) bool { return true })
	a.mu.Lock()
	n := a.n
	a.mu.Unlock()
	if n != 0 || c.Version() != "" {
		t.Fatalf("applied %d configs (version %q) from a response over the cap", n, c.Version())
	}
	srv.Push(t, "node-1", "v2", userLimit("a", "d", 6))
	a.waitLimit(ctx, t, "d", "user", "x", 6)
}

func TestNACKErrorTextIsBounded(t *testing.T) {
	long := errors.New(strings.Repeat("é", MaxErrorDetail)) // two bytes a rune
	got := errorDetail(long)
	if len(got) > MaxErrorDetail || !utf8.ValidString(got) || !strings.Contains(got, fmt.Sprintf("%d bytes in all", 2*MaxErrorDetail)) {
		t.Errorf("errorDetail of %d bytes: %d bytes, valid UTF-8 %v, %q...", 2*MaxErrorDetail, len(got), utf8.ValidString(got), got[len(got)-40:])
	}
	if short := errors.New("short"); errorDetail(short) != "short" {
		t.Errorf("a short error is changed: %q", errorDetail(short))
	}
}
