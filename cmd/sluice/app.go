package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// drainGrace is how long the requests and calls in flight have to finish
// once serve or proxy is asked to stop; what is left then is cut.
const drainGrace = 10 * time.Second

// closeGrace is what the parts closed after the drain (the flush of spans
// and stats, the refund of reservations) have beyond drainGrace: a signal
// stops the process within drainGrace + closeGrace, however slow they are.
const closeGrace = time.Second

// app is the lifecycle that serve and proxy share; each command supplies
// its parts (its config, store, handlers and listeners) and the app runs
// them through the same four steps:
//
//   - open: newApp takes SIGHUP at once (see reloadSignal); the command
//     opens its parts and registers what must be closed at the end with
//     onClose, and its listeners with listen;
//   - serve: serveHTTP and serveGRPC start each server on its listener;
//   - reload: run's loop (mainLoop) reloads the config with the reloader
//     given to reloadWith, on SIGHUP and on file change (watch), until the
//     context ends or a server fails;
//   - drain: the functions given to onDrain run (serve fails its health
//     checks), then every server stops taking new work and finishes what
//     it has, all at once, within drainGrace; what is left is cut. close,
//     deferred by the command, then closes its parts in reverse order.
//
// An app is used from the command's goroutine only. The zero value is not
// usable: start with newApp.
type app struct {
	fail func(code int, a ...any) int // the command's exitWith
	log  *slog.Logger                 // nil until the command sets it

	hup     <-chan os.Signal // SIGHUP, from newApp on
	stopHUP func()

	// rl reloads the config; nil when there is nothing to reload, which
	// noReload says in the log on SIGHUP. changed signals a file change.
	rl       *reloader
	noReload string
	changed  <-chan struct{}

	errc    chan error                  // the first server that stops
	drains  []func(ctx context.Context) // one per server
	onDrn   []func()
	drained bool      // the servers have been drained
	stopBy  time.Time // set when run is asked to stop: the end of closeContext
	closers []func()
}

// newApp starts a command's lifecycle: SIGHUP is taken from here on (a
// reload once run runs, never the end of the process), and the command's
// errors are printed on stderr after prefix. The caller defers close.
func newApp(stderr io.Writer, prefix string) *app {
	a := &app{fail: exitWith(stderr, prefix), errc: make(chan error, 1)}
	a.hup, a.stopHUP = reloadSignal()
	return a
}

// onClose registers f to run when the command ends, after the drain, in
// the reverse order of registration (as defer would).
func (a *app) onClose(f func()) { a.closers = append(a.closers, f) }

// closeContext returns the context of work done while closing (a flush,
// a refund): it ends drainGrace + closeGrace after the command was asked
// to stop, or closeGrace from now when it never ran (a start-up failure).
func (a *app) closeContext() (context.Context, context.CancelFunc) {
	by := a.stopBy
	if by.IsZero() {
		by = time.Now().Add(closeGrace)
	}
	return context.WithDeadline(context.Background(), by)
}

// onDrain registers f to run when the command is asked to stop, before
// its servers drain.
func (a *app) onDrain(f func()) { a.onDrn = append(a.onDrn, f) }

// close runs the functions given to onClose, last first, and gives SIGHUP
// back. Servers started by a command that failed before run are stopped
// first, at once.
func (a *app) close() {
	if !a.drained {
		cut, cancel := context.WithCancel(context.Background())
		cancel()
		a.drain(cut)
	}
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.stopHUP()
}

// exitError is a failed step's exit status and the message that exitWith
// prints for it.
type exitError struct {
	code int
	msg  []any
}

// Error is the message, its parts spaced as fmt.Sprintln spaces them.
func (e *exitError) Error() string {
	s := fmt.Sprintln(e.msg...)
	return s[:len(s)-1]
}

// exitCode returns the error that ends the command with code and msg (as
// exitWith prints it): 2 for a setting refused, 1 for a failure.
func exitCode(code int, msg ...any) error { return &exitError{code: code, msg: msg} }

// errStoppedEarly is the error of a start-up step that was cut short by
// the end of the context (SIGTERM): a stop, not a failure.
var errStoppedEarly = errors.New("stopped during start-up")

// stoppedEarly returns errStoppedEarly if ctx has ended, else err.
func stoppedEarly(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return errStoppedEarly
	}
	return err
}

// exit prints err as the command's failure and returns its exit code: an
// exitError's code, 0 for errStoppedEarly (logged), 1 otherwise.
func (a *app) exit(err error) int {
	var e *exitError
	switch {
	case errors.As(err, &e):
		return a.fail(e.code, e.msg...)
	case errors.Is(err, errStoppedEarly):
		if a.log != nil {
			a.log.Info("stopped during start-up")
		}
		return 0
	}
	return a.fail(1, err)
}

// listen listens on addr (TCP); the listener is closed when the command
// ends, so that one opened before a later step fails is not left open.
func (a *app) listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	a.onClose(func() { ln.Close() })
	return ln, nil
}

// serve runs serve on a goroutine of its own; its end, with an error or
// not, ends run. drain stops it gracefully within its context's deadline
// and cuts what is left once the deadline passes.
func (a *app) serve(serve func() error, drain func(ctx context.Context)) {
	a.drains = append(a.drains, drain)
	go func() {
		err := serve()
		select {
		case a.errc <- err: // the first one only: it ends run
		default:
		}
	}()
}

// serveHTTP serves hs on ln; its drain is hs.Shutdown, then hs.Close for
// what is left at the deadline.
func (a *app) serveHTTP(hs *http.Server, ln net.Listener) {
	a.serve(func() error { return hs.Serve(ln) }, func(ctx context.Context) {
		if err := hs.Shutdown(ctx); err != nil {
			hs.Close()
		}
	})
}

// serveGRPC serves gs on ln; its drain is gs.GracefulStop, then gs.Stop
// for the calls left at the deadline.
func (a *app) serveGRPC(gs *grpc.Server, ln net.Listener) {
	a.serve(func() error { return gs.Serve(ln) }, func(ctx context.Context) {
		stopped := make(chan struct{})
		go func() { gs.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			gs.Stop()
			<-stopped
		}
	})
}

// reloadWith makes rl the reloader of SIGHUP and of file changes; nil
// means there is nothing to reload, which noReload says in the log.
func (a *app) reloadWith(rl *reloader, noReload string) {
	a.rl, a.noReload = rl, noReload
}

// watch reloads the config at path (and on changes in the directories
// extra) when its files change, if there is a reloader; what names the
// config in the warning logged when the files cannot be watched (SIGHUP
// still reloads then).
func (a *app) watch(ctx context.Context, path string, extra []string, what string) {
	if a.rl == nil {
		return
	}
	cw, err := watchConfig(ctx, path, extra, a.log)
	if err != nil {
		a.log.Warn("not watching the "+what+"; reload with SIGHUP", "config", path, "err", err)
		return
	}
	a.onClose(func() { cw.Close() })
	a.changed = cw.C
}

// run serves and reloads until ctx ends or a server fails, then drains:
// the onDrain functions run, then every server drains at once, all within
// drainGrace. It returns the exit code: 0, or 1 if a server failed.
func (a *app) run(ctx context.Context) int {
	code := mainLoop(ctx, a.log, a.rl, a.hup, a.changed, a.errc, a.noReload, a.fail)
	start := time.Now()
	a.stopBy = start.Add(drainGrace + closeGrace)
	for _, f := range a.onDrn {
		f()
	}
	shutdown, cancel := context.WithTimeout(context.Background(), drainGrace)
	defer cancel()
	a.drain(shutdown)
	a.logStopped(ctx, code, time.Since(start), shutdown.Err() != nil)
	return code
}

// logStopped logs the one line of a command's end: why it stopped (the
// signal, as the context's cause names it, or a server's failure, logged
// before), how long the drain took, and whether drainGrace cut what was
// still in flight.
func (a *app) logStopped(ctx context.Context, code int, drain time.Duration, cut bool) {
	if a.log == nil {
		return
	}
	reason := "a server stopped"
	if code != 0 {
		reason = "a server failed"
	}
	if ctx.Err() != nil {
		reason = context.Cause(ctx).Error()
	}
	a.log.Info("stopped", "reason", reason, "drain", drain.Round(time.Microsecond).String(), "cut", cut, "exit", code)
}

// drain drains every server at once within ctx.
func (a *app) drain(ctx context.Context) {
	a.drained = true
	var wg sync.WaitGroup
	for _, drain := range a.drains {
		wg.Go(func() { drain(ctx) })
	}
	wg.Wait()
}
