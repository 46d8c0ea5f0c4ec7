package daemon

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
)

// OpenAccessLog opens the access log where names (-access-log, else the
// config's access_log): "" or "stderr" is stderr, "stdout" the process's
// stdout, "off" a nil writer, and anything else a file, created if need
// be and appended to, that ReopenAccessLogOn can reopen. A file is
// refused as CheckAccessLog refuses it (-check): it must be a regular
// file, so a FIFO or a device never blocks the start in an open. closeLog closes
// the file (for the others it does nothing); the writer is safe for
// concurrent use as far as the one it stands for is.
func OpenAccessLog(where string, stderr io.Writer) (w io.Writer, closeLog func(), err error) {
	switch where {
	case "", "stderr":
		return stderr, func() {}, nil
	case "stdout":
		return os.Stdout, func() {}, nil
	case "off":
		return nil, func() {}, nil
	}
	if err := CheckAccessLog(where); err != nil {
		return nil, nil, fmt.Errorf("access log: %s: %w", where, err)
	}
	f := &logFile{path: where}
	if err := f.reopen(); err != nil {
		return nil, nil, err
	}
	return f, f.close, nil
}

// CheckAccessLog refuses an access log that OpenAccessLog could not open
// for appending, without creating it: an existing file must be a regular
// file open for writing, a new one needs its directory. The names of
// OpenAccessLog that are not files pass.
func CheckAccessLog(where string) error {
	switch where {
	case "", "stderr", "stdout", "off":
		return nil
	}
	fi, err := os.Stat(where)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d, err := os.Stat(filepath.Dir(where))
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return fmt.Errorf("%s is not a directory", filepath.Dir(where))
		}
		return nil
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return errors.New("not a regular file")
	}
	f, err := os.OpenFile(where, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// ReopenAccessLogOn reopens the access log file w, if OpenAccessLog made
// it one, on each sig (SIGUSR1 on the proxy, as `nginx -s reopen`), so
// that logrotate can move it away and have a new one created; it logs
// each reopening, and keeps writing the old file when the new one cannot
// be opened. It stops when a closes. For any other writer it does
// nothing.
func ReopenAccessLogOn(a *App, w io.Writer, log *slog.Logger, sig os.Signal) {
	lf, ok := w.(*logFile)
	if !ok {
		return
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, sig)
	a.OnClose(func() { signal.Stop(c) })
	stop, done := make(chan struct{}), make(chan struct{})
	a.OnClose(func() { close(stop); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-c:
				if err := lf.reopen(); err != nil {
					log.Error("access log not reopened; still writing the old file", "err", err)
				} else {
					log.Info("access log reopened", "path", lf.path)
				}
			case <-stop:
				return
			}
		}
	}()
}

// logFile is an access log file that reopen swaps for the file at its
// path anew.
type logFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

// Write appends p to the file open now (reopen may swap it).
func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

// reopen opens the path afresh and closes the file written so far; on
// error the old file stays in use. It refuses what is not a regular file,
// opening without blocking: a FIFO put at the path fails at once rather
// than holding the reopen (and so App.Close) until a reader comes.
func (l *logFile) reopen() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return fmt.Errorf("access log: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = errors.New("not a regular file")
		}
		return fmt.Errorf("access log: %s: %w", l.path, err)
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

func (l *logFile) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Close()
}
