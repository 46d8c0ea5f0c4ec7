package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/testlog"
)

// slowStore answers every decision after delay (on the bubble's clock),
// admitting it with Remaining 42 so that a real answer is told from the
// failure mode's; a call whose context ends first fails with its error.
type slowStore struct{ delay time.Duration }

func (s slowStore) AllowN(ctx context.Context, _ string, _ sluice.Limit, _ int) (sluice.Result, error) {
	select {
	case <-time.After(s.delay):
		return sluice.Result{Allowed: true, Remaining: 42}, nil
	case <-ctx.Done():
		return sluice.Result{}, ctx.Err()
	}
}

// answeredByStore reports whether one decision through failsafe with cfg
// (its Primary a store answering after 80 ms) got the store's answer, not
// the failure mode's, with time inside a synctest bubble.
func answeredByStore(t *testing.T, cfg failsafe.Config) bool {
	t.Helper()
	var real bool
	synctest.Test(t, func(t *testing.T) {
		cfg.Primary = slowStore{delay: 80 * time.Millisecond}
		l, err := failsafe.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := l.AllowN(context.Background(), "k", sluice.PerSecond(10), 1)
		real = r.Allowed && r.Remaining == 42
	})
	return real
}

// -store-timeout is the deadline failsafe gives each decision on serve's
// store: with a store that answers after 80 ms, Redis's default of 250 ms
// (50 ms before, which answered by the failure mode) gets the store's
// answer and -store-timeout 50ms answers by the failure mode; PostgreSQL
// keeps its 250 ms unless -store-timeout shortens it.
// Neither store needs to be up: the policy is built without a connection.
func TestServeStoreTimeoutIsTheDecisionDeadline(t *testing.T) {
	for _, tt := range []struct {
		name, store string
		timeout     time.Duration
		want        bool
	}{
		{"redis default 250ms", "redis://127.0.0.1:1", 0, true},
		{"redis -store-timeout 50ms", "redis://127.0.0.1:1", 50 * time.Millisecond, false},
		{"postgres default 250ms", "postgres://u:p@127.0.0.1:1/db", 0, true},
		{"postgres -store-timeout 50ms", "postgres://u:p@127.0.0.1:1/db", 50 * time.Millisecond, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := &serveOptions{store: tt.store, failure: "closed", remote: remoteOptions{timeout: tt.timeout}}
			st, err := openServeStore(t.Context(), o, true, quietLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if got := answeredByStore(t, *st.Failure); got != tt.want {
				t.Errorf("answered by the store: %v, want %v (failure policy's Timeout %v)", got, tt.want, st.Failure.Timeout)
			}
		})
	}
}

// The proxy's breaker takes -store-timeout as its decision deadline too
// (before the flag, its failsafe.Config had no Timeout at all), and
// Redis's default of 250 ms without it.
func TestProxyStoreTimeoutIsTheDecisionDeadline(t *testing.T) {
	for _, tt := range []struct {
		timeout time.Duration
		want    bool
	}{{0, true}, {50 * time.Millisecond, false}} {
		t.Run(tt.timeout.String(), func(t *testing.T) {
			_, failure, closeStore, err := openStore(t.Context(), "redis://127.0.0.1:1", "closed")
			if err != nil {
				t.Fatal(err)
			}
			defer closeStore()
			p := &proxyApp{o: proxyOptions{storeTimeout: tt.timeout}, log: quietLogger()}
			if got := answeredByStore(t, p.failsafeConfig(nil, failure)); got != tt.want {
				t.Errorf("-store-timeout %v: answered by the store: %v, want %v", tt.timeout, got, tt.want)
			}
		})
	}
}

// A -store-timeout out of its range (negative, over 10 s) is exit 2
// with a message naming the flag, in serve and in proxy, before anything
// is opened.
func TestStoreTimeoutOutOfRangeIsRefused(t *testing.T) {
	for _, v := range []string{"-1ms", "11s"} {
		for _, cmd := range []struct {
			name string
			run  func(ctx context.Context, args []string, stdout, stderr *testlog.Buffer) int
			args []string
		}{
			{"serve", func(ctx context.Context, a []string, o, e *testlog.Buffer) int { return runServe(ctx, a, o, e) },
				[]string{"-store", "redis://127.0.0.1:1", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}},
			{"proxy", func(ctx context.Context, a []string, o, e *testlog.Buffer) int { return runProxy(ctx, a, o, e) },
				[]string{"-upstream", "http://127.0.0.1:1", "-listen", "127.0.0.1:0", "-admin-addr", ""}},
		} {
			var out, errb testlog.Buffer
			code := cmd.run(t.Context(), append(cmd.args, "-store-timeout", v), &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), "-store-timeout ") {
				t.Errorf("%s -store-timeout %s: exit %d, stderr %q; want 2 naming the flag", cmd.name, v, code, errb.String())
			}
		}
	}
}

// With the memory store, which has no deadline, serve names -store-timeout
// in its line of settings accepted and not acted on.
func TestServeStoreTimeoutWithMemoryIsNamedMoot(t *testing.T) {
	s, code, done := parseServeFlags([]string{"-store", "memory", "-store-timeout", "1s"}, io.Discard, io.Discard)
	if done {
		t.Fatalf("flags refused: exit %d", code)
	}
	if got := mootFlags(s.fs, &s.o); !slices.Contains(got, "-store-timeout") {
		t.Errorf("moot flags %q: want -store-timeout", got)
	}
}

// An unknown -failure-mode is exit 2 naming the flag in the proxy as in
// serve, whatever the store: with the memory store it used to start.
func TestProxyRefusesAnUnknownFailureMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var out, errb testlog.Buffer
	code := runProxy(ctx, []string{"-upstream", "http://127.0.0.1:1", "-listen", "127.0.0.1:0", "-admin-addr", "", "-failure-mode", "sometimes"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "-failure-mode") {
		t.Errorf("proxy -failure-mode sometimes: exit %d, stderr %q; want 2 naming the flag", code, errb.String())
	}
}

// With the memory store, which never fails, the proxy names a
// -failure-mode and a -store-timeout it was given in its line of settings
// accepted and not acted on.
func TestProxyNamesStoreSettingsMootWithMemory(t *testing.T) {
	p := launchProxy(t, "-upstream", "http://127.0.0.1:1", "-failure-mode", "closed", "-store-timeout", "1s")
	for l := range strings.SplitSeq(p.stderr.String(), "\n") {
		if strings.Contains(l, "not acted on") && strings.Contains(l, "-failure-mode") && strings.Contains(l, "-store-timeout") {
			return
		}
	}
	t.Errorf("the start-up lines %q do not name -failure-mode and -store-timeout as not acted on", p.stderr.String())
}
