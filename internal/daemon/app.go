package daemon

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

// DrainGrace is how long the requests and calls in flight have to finish
// once serve or proxy is asked to stop; what is left then is cut.
const DrainGrace = 10 * time.Second

// CloseGrace is what the parts closed after the drain (the flush of spans
// and stats, the refund of reservations) have beyond DrainGrace: a signal
// stops the process within DrainGrace + CloseGrace, however slow they are.
const CloseGrace = time.Second

// App is the lifecycle that serve and proxy share; each command supplies
// its parts (its config, store, handlers and listeners) and the app runs
// them through the same four steps:
//
//   - open: NewApp takes SIGHUP at once (see reloadSignal); the command
//     opens its parts and registers what must be closed at the end with
//     OnClose, and its listeners with Listen;
//   - serve: ServeHTTP and ServeGRPC start each server on its listener;
//   - reload: Run's loop (mainLoop) reloads the config with the reloader
//     given to ReloadWith, on SIGHUP and on file change (Watch), until the
//     context ends or a server fails;
//   - drain: the functions given to OnDrain run (serve fails its health
//     checks), then every server stops taking new work and finishes what
//     it has, all at once, within DrainGrace; what is left is cut. Close,
//     deferred by the command, then closes its parts in reverse order.
//
// An app is used from the command's goroutine only. The zero value is not
// usable: start with NewApp.
type App struct {
	fail func(code int, a ...any) int // the command's ExitWith
	Log  *slog.Logger                 // nil until the command sets it

	hup     <-chan os.Signal // SIGHUP, from NewApp on
	stopHUP func()

	// rl reloads the config; nil when there is nothing to reload, which
	// noReload says in the log on SIGHUP. changed signals a file change.
	rl       *Reloader
	noReload string
	changed  <-chan struct{}

	errc    chan error                  // the first server that stops
	drains  []func(ctx context.Context) // one per server
	onDrn   []func()
	drained bool      // the servers have been drained
	stopBy  time.Time // set when Run is asked to stop: the end of CloseContext
	closers []func()
}

// NewApp starts a command's lifecycle: SIGHUP is taken from here on (a
// reload once Run runs, never the end of the process), and the command's
// errors are printed on stderr after prefix. The caller defers Close.
func NewApp(stderr io.Writer, prefix string) *App {
	a := &App{fail: ExitWith(stderr, prefix), errc: make(chan error, 1)}
	a.hup, a.stopHUP = reloadSignal()
	return a
}

// OnClose registers f to run when the command ends, after the drain, in
// the reverse order of registration (as defer would).
func (a *App) OnClose(f func()) { a.closers = append(a.closers, f) }

// CloseContext returns the context of work done while closing (a flush,
// a refund): it ends DrainGrace + CloseGrace after the command was asked
// to stop, or CloseGrace from now when it never ran (a start-up failure).
func (a *App) CloseContext() (context.Context, context.CancelFunc) {
	by := a.stopBy
	if by.IsZero() {
		by = time.Now().Add(CloseGrace)
	}
	return context.WithDeadline(context.Background(), by)
}

// OnDrain registers f to run when the command is asked to stop, before
// its servers drain.
func (a *App) OnDrain(f func()) { a.onDrn = append(a.onDrn, f) }

// Close runs the functions given to OnClose, last first, and gives SIGHUP
// back. Servers started by a command that failed before Run are stopped
// first, at once.
func (a *App) Close() {
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

// exitError is a failed step's exit status and the message that ExitWith
// prints for it; ExitCode makes one. Its zero value is exit status 0 with
// no message.
type exitError struct {
	code int
	msg  []any
}

// Error is the message, its parts spaced as fmt.Sprintln spaces them.
func (e *exitError) Error() string {
	s := fmt.Sprintln(e.msg...)
	return s[:len(s)-1]
}

// ExitCode returns the error that ends the command with code and msg (as
// ExitWith prints it): 2 for a setting refused, 1 for a failure.
func ExitCode(code int, msg ...any) error { return &exitError{code: code, msg: msg} }

// ErrStoppedEarly is the error of a start-up step that was cut short by
// the end of the context (SIGTERM): a stop, not a failure.
var ErrStoppedEarly = errors.New("stopped during start-up")

// StoppedEarly returns ErrStoppedEarly if ctx has ended, else err.
func StoppedEarly(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ErrStoppedEarly
	}
	return err
}

// Exit prints err as the command's failure and returns its exit code: an
// exitError's code, 0 for ErrStoppedEarly (logged), 1 otherwise.
func (a *App) Exit(err error) int {
	var e *exitError
	switch {
	case errors.As(err, &e):
		return a.fail(e.code, e.msg...)
	case errors.Is(err, ErrStoppedEarly):
		if a.Log != nil {
			a.Log.Info("stopped during start-up")
		}
		return 0
	}
	return a.fail(1, err)
}

// Listen listens on addr (TCP); the listener is closed when the command
// ends, so that one opened before a later step fails is not left open.
func (a *App) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	a.OnClose(func() { ln.Close() })
	return ln, nil
}

// Serve runs serve on a goroutine of its own; its end, with an error or
// not, ends Run. drain stops it gracefully within its context's deadline
// and cuts what is left once the deadline passes.
func (a *App) Serve(serve func() error, drain func(ctx context.Context)) {
	a.drains = append(a.drains, drain)
	go func() {
		err := serve()
		select {
		case a.errc <- err: // the first one only: it ends Run
		default:
		}
	}()
}

// ServeHTTP serves hs on ln; its drain is hs.Shutdown, then hs.Close for
// what is left at the deadline.
func (a *App) ServeHTTP(hs *http.Server, ln net.Listener) {
	a.Serve(func() error { return hs.Serve(ln) }, func(ctx context.Context) {
		if err := hs.Shutdown(ctx); err != nil {
			hs.Close()
		}
	})
}

// ServeGRPC serves gs on ln; its drain is gs.GracefulStop, then gs.Stop
// for the calls left at the deadline.
func (a *App) ServeGRPC(gs *grpc.Server, ln net.Listener) {
	a.Serve(func() error { return gs.Serve(ln) }, func(ctx context.Context) {
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

// ReloadWith makes rl the reloader of SIGHUP and of file changes; nil
// means there is nothing to reload, which noReload says in the log.
func (a *App) ReloadWith(rl *Reloader, noReload string) {
	a.rl, a.noReload = rl, noReload
}

// Watch reloads the config at path (and on changes in the directories
// extra) when its files change, if there is a reloader; what names the
// config in the warning logged when the files cannot be watched (SIGHUP
// still reloads then).
func (a *App) Watch(ctx context.Context, path string, extra []string, what string) {
	if a.rl == nil {
		return
	}
	cw, err := watchConfig(ctx, path, extra, a.Log)
	if err != nil {
		a.Log.Warn("not watching the "+what+"; reload with SIGHUP", "config", path, "err", err)
		return
	}
	a.OnClose(func() { cw.Close() })
	a.changed = cw.C
}

// Run serves and reloads until ctx ends or a server fails, then drains:
// the OnDrain functions run, then every server drains at once, all within
// DrainGrace. It returns the exit code: 0, or 1 if a server failed.
func (a *App) Run(ctx context.Context) int {
	code := mainLoop(ctx, a.Log, a.rl, a.hup, a.changed, a.errc, a.noReload, a.fail)
	start := time.Now()
	a.stopBy = start.Add(DrainGrace + CloseGrace)
	for _, f := range a.onDrn {
		f()
	}
	shutdown, cancel := context.WithTimeout(context.Background(), DrainGrace)
	defer cancel()
	a.drain(shutdown)
	a.logStopped(ctx, code, time.Since(start), shutdown.Err() != nil)
	return code
}

// logStopped logs the one line of a command's end: why it stopped (the
// signal, as the context's cause names it, or a server's failure, logged
// before), how long the drain took, and whether DrainGrace cut what was
// still in flight.
func (a *App) logStopped(ctx context.Context, code int, drain time.Duration, cut bool) {
	if a.Log == nil {
		return
	}
	reason := "a server stopped"
	if code != 0 {
		reason = "a server failed"
	}
	if ctx.Err() != nil {
		reason = context.Cause(ctx).Error()
	}
	a.Log.Info("stopped", "reason", reason, "drain", drain.Round(time.Microsecond).String(), "cut", cut, "exit", code)
}

// drain drains every server at once within ctx.
func (a *App) drain(ctx context.Context) {
	a.drained = true
	var wg sync.WaitGroup
	for _, drain := range a.drains {
		wg.Go(func() { drain(ctx) })
	}
	wg.Wait()
}

// ExitWith returns the error exit of a command: a function that prints its
// arguments on stderr after prefix, as fmt.Fprintln spaces them, and
// returns code, the exit code.
func ExitWith(stderr io.Writer, prefix string) func(code int, a ...any) int {
	return func(code int, a ...any) int {
		fmt.Fprintln(stderr, append([]any{prefix}, a...)...)
		return code
	}
}
