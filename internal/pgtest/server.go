//go:build unix

package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// startTimeout bounds initdb, and each start of a server.
const startTimeout = 60 * time.Second

// stopTimeout bounds a stop; then the server is killed.
const stopTimeout = 15 * time.Second

// Server is a PostgreSQL server on a loopback port. Its methods are safe for
// concurrent use.
type Server struct {
	// Port is the server's TCP port on 127.0.0.1. It does not change, even
	// across Stop and Start.
	Port int

	tl       tools
	dir      string // the server's own directory: data/, the socket, the log
	data     string
	log      string
	settings []string // extra -c settings

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil when the server is not running
	exited chan struct{} // closed when cmd's process has exited
	closed bool
}

// StartServer starts a dedicated server, which the test may stop and start
// again, and waits until it answers. Each of settings, such as "fsync=on",
// is passed as a -c option after the package's own, so it may override
// them. t.Cleanup stops the server and removes its directory. Call it from the test's goroutine: it skips or fails t when
// PostgreSQL is missing, and fails t when the server does not start, with
// its log.
func StartServer(t testing.TB, settings ...string) *Server {
	t.Helper()
	s, err := newServer(need(t), settings...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newServer makes a directory, runs initdb in it and starts the server on
// a free port.
func newServer(tl tools, settings ...string) (*Server, error) {
	// Not t.TempDir: its parent is private to this user, and the server
	// may run as another.
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{tl: tl, dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "postgres.log"), settings: settings}
	if err := s.initdb(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for range 8 {
		if s.Port, err = freePort(); err != nil {
			break
		}
		if err = s.Start(); !errors.Is(err, errPortBusy) {
			break
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// initdb makes the data directory, as the server's user.
func (s *Server) initdb() error {
	if s.tl.cred != nil {
		if err := os.Chown(s.dir, int(s.tl.cred.Uid), int(s.tl.cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: giving %s to the user postgres: %w", s.dir, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.tl.initdb, "-D", s.data, "-A", "trust", "-U", "postgres",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	cmd.Dir = s.dir
	cmd.SysProcAttr = s.sysProcAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: %s: %w\n%s", cmd, err, out)
	}
	return nil
}

// sysProcAttr runs a child as the server's user, in a process group of its
// own (and on Linux killed by the kernel if the test binary dies).
func (s *Server) sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Credential: s.tl.cred}
	setDeathSignal(a)
	return a
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Addr is the server's address, "127.0.0.1:<Port>".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// URL is a connection URL for the database postgres as the user postgres,
// without TLS.
func (s *Server) URL() string {
	return "postgres://postgres@" + s.Addr() + "/postgres?sslmode=disable&connect_timeout=5"
}

// errPortBusy is a start that failed because the port was taken.
var errPortBusy = errors.New("pgtest: port in use")

// Start starts the server if it is not running, on its port and data
// directory, and waits until it answers. It is an error after Close.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("pgtest: Start after Close")
	}
	if s.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o666)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	args := []string{"-D", s.data, "-p", strconv.Itoa(s.Port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=300",
		"-c", "shared_buffers=32MB"}
	for _, set := range s.settings {
		args = append(args, "-c", set)
	}
	cmd := exec.Command(s.tl.postgres, args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = s.sysProcAttr()
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { cmd.Wait(); close(exited) }(s.exited)
	if err := s.waitReady(s.exited); err != nil {
		s.kill()
		log, _ := os.ReadFile(s.log)
		err = fmt.Errorf("%w\n--- command line: %s\n--- log:\n%s", err, cmd, log)
		if bytes.Contains(log, []byte("Address already in use")) {
			return fmt.Errorf("%w: %w", errPortBusy, err)
		}
		return err
	}
	return nil
}

// waitReady waits until the server accepts a connection and runs a query.
func (s *Server) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		select {
		case <-exited:
			return fmt.Errorf("pgtest: postgres on %s exited during start-up", s.Addr())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL())
		if err == nil {
			var one int
			err = conn.QueryRow(ctx, "SELECT 1").Scan(&one)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres on %s did not answer within %v: %w", s.Addr(), startTimeout, err)
		}
		time.Sleep(delay)
	}
}

// Stop shuts the server down as an operator would (a fast shutdown: open
// sessions are ended, a checkpoint is written) and waits until it has
// exited. Start starts it again. Stop of a stopped server does nothing.
func (s *Server) Stop() error { return s.stop(syscall.SIGINT) }

// Crash stops the server as a crash would (an immediate shutdown: no
// checkpoint; the next Start recovers from the write-ahead log) and waits
// until it has exited.
func (s *Server) Crash() error { return s.stop(syscall.SIGQUIT) }

func (s *Server) stop(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
		s.cmd = nil
		return nil
	case <-time.After(stopTimeout):
		s.kill()
		return fmt.Errorf("pgtest: postgres on %s did not stop within %v; killed", s.Addr(), stopTimeout)
	}
}

// kill kills the server's process group and waits for it. s.mu is held.
func (s *Server) kill() {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Close stops the server and removes its directory. Further calls do
// nothing.
func (s *Server) Close() {
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		os.RemoveAll(s.dir)
	}
}
