package daemon

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/daemontest"
	"github.com/sluicehq/sluice/internal/testlog"
)

// A server that fails ends the command with exit status 1, its error on
// stderr; the drain still runs, after the OnDrain functions, and the parts
// are closed after it, last opened first.
func TestAppServerFailureEndsRunAndDrains(t *testing.T) {
	var stderr testlog.Buffer
	a := NewApp(&stderr, "sluice test:")
	var order []string
	a.OnClose(func() { order = append(order, "close first opened") })
	a.OnClose(func() { order = append(order, "close last opened") })
	a.OnDrain(func() { order = append(order, "onDrain") })
	a.Serve(func() error { return errors.New("listener broke") }, func(ctx context.Context) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("drain without a deadline")
		}
		order = append(order, "drain")
	})
	code := a.Run(context.Background())
	a.Close()
	if code != 1 || !strings.Contains(stderr.String(), "sluice test: listener broke") {
		t.Errorf("exit %d, stderr %q; want 1 naming the error", code, stderr.String())
	}
	want := []string{"onDrain", "drain", "close last opened", "close first opened"}
	if !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
}

// The end of the context ends run with exit status 0, after the servers
// drained.
func TestAppContextEndIsACleanStop(t *testing.T) {
	var stderr testlog.Buffer
	a := NewApp(&stderr, "sluice test:")
	defer a.Close()
	a.Log = daemontest.QuietLogger()
	stop := make(chan struct{})
	drained := false
	a.Serve(func() error { <-stop; return http.ErrServerClosed }, func(context.Context) { drained = true; close(stop) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := a.Run(ctx); code != 0 || !drained {
		t.Errorf("exit %d, drained %v; want 0 and drained (stderr %q)", code, drained, stderr.String())
	}
}

// A step that fails after a server started (an admin listener that cannot
// listen, say) leaves nothing behind: close stops the started server and
// closes its listener, as the command returns its exit status.
func TestAppCloseStopsServersStartedBeforeAFailure(t *testing.T) {
	var stderr testlog.Buffer
	a := NewApp(&stderr, "sluice test:")
	ln, err := a.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	a.ServeHTTP(hs, ln)
	if code := a.Exit(ExitCode(1, "admin:", errors.New("address in use"))); code != 1 || stderr.String() != "sluice test: admin: address in use\n" {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	a.Close()
	select {
	case err := <-a.errc:
		if !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server still serves after close")
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Error("the listener still accepts after close")
	}
}

// A start-up step cut short by the end of the context (SIGTERM) is a
// stop, exit status 0 and logged, not a failure.
func TestAppStoppedDuringStartUp(t *testing.T) {
	var stderr testlog.Buffer
	a := NewApp(&stderr, "sluice test:")
	defer a.Close()
	a.Log = daemontest.QuietLogger()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := a.Exit(StoppedEarly(ctx, errors.New("reading the config: context canceled"))); code != 0 || stderr.String() != "" {
		t.Errorf("exit %d, stderr %q; want 0 and nothing printed", code, stderr.String())
	}
	if code := a.Exit(StoppedEarly(context.Background(), errors.New("bad config"))); code != 1 {
		t.Errorf("a failure with the context alive: exit %d, want 1", code)
	}
}

// What is closed after the drain (a flush of spans, a refund of
// reservations) shares one deadline: DrainGrace + CloseGrace after the stop
// was asked, however long the drain took, so that a slow or unreachable
// collector or store cannot hold the process past its grace period.
func TestAppClosingWorkEndsWithinTheGracePeriod(t *testing.T) {
	var stderr testlog.Buffer
	a := NewApp(&stderr, "sluice test:")
	a.Log = daemontest.QuietLogger()
	if ctx, cancel := a.CloseContext(); true {
		dl, ok := ctx.Deadline()
		cancel()
		if !ok || time.Until(dl) > CloseGrace {
			t.Errorf("before run: closeContext deadline %v (set %v), want within %v", time.Until(dl), ok, CloseGrace)
		}
	}
	var within time.Duration
	stop := make(chan struct{})
	a.Serve(func() error { <-stop; return http.ErrServerClosed }, func(context.Context) { close(stop) })
	a.OnClose(func() {
		ctx, cancel := a.CloseContext()
		defer cancel()
		dl, _ := ctx.Deadline()
		within = dl.Sub(a.stopBy.Add(-DrainGrace - CloseGrace))
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	asked := time.Now()
	if code := a.Run(ctx); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	a.Close()
	if within != DrainGrace+CloseGrace {
		t.Errorf("a closer's deadline is %v after the stop, want drainGrace+closeGrace = %v", within, DrainGrace+CloseGrace)
	}
	if a.stopBy.Sub(asked) > DrainGrace+CloseGrace+time.Second {
		t.Errorf("stopBy %v after the stop was asked, want at most %v", a.stopBy.Sub(asked), DrainGrace+CloseGrace)
	}
}
