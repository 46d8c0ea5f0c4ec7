package redistest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds the start (or restart) of one server.
const startTimeout = 10 * time.Second

// busOffset is the distance from a cluster node's port to its cluster bus
// port, Redis's default.
const busOffset = 10000

// Server is a redis-server process on a loopback port. Its methods are safe
// for concurrent use.
type Server struct {
	// Addr is the server's address, "127.0.0.1:<Port>". It does not change,
	// even across Restart.
	Addr string
	// Port is the server's TCP port. A cluster node's bus is on Port+10000.
	Port int

	tl      tools
	dir     string
	logPath string
	args    []string
	shared  bool

	mu     sync.Mutex
	cmd    *exec.Cmd // nil when the server is not running
	closed bool
}

// StartServer starts a dedicated single-node server with no persistence
// (extraArgs, such as "--maxmemory", "1mb", are appended to its command line)
// and waits until it answers. t.Cleanup stops it. Call it from the test's
// goroutine: it skips or fails t when Redis is missing, and fails t when the
// server does not start within 10 seconds, with the server's log.
func StartServer(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	tl := need(t, false)
	dir := t.TempDir() // before Cleanup(Close): the server stops before its directory goes
	s, err := newServer(tl, dir, false, extraArgs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newServer starts a server in dir on a free port.
func newServer(tl tools, dir string, cluster bool, extra []string) (*Server, error) {
	s := &Server{tl: tl, dir: dir, logPath: filepath.Join(dir, "redis.log")}
	if err := s.startOnFreePort(cluster, func() ([]string, error) { return s.makeArgs(cluster, extra), nil }); err != nil {
		return nil, err
	}
	return s, nil
}

// startOnFreePort picks a free port for s, sets its command line to what
// args returns for that port and starts it, trying other ports when another
// process takes the one chosen before the server binds it.
func (s *Server) startOnFreePort(cluster bool, args func() ([]string, error)) error {
	var err error
	for range 8 {
		if s.Port, err = pickPort(cluster); err != nil {
			return err
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		if s.args, err = args(); err != nil {
			return err
		}
		s.mu.Lock()
		err = s.launch(true, time.Now().Add(startTimeout))
		s.mu.Unlock()
		if !errors.Is(err, errPortBusy) {
			return err
		}
	}
	return err
}

// makeArgs is the server's command line.
func (s *Server) makeArgs(cluster bool, extra []string) []string {
	args := []string{
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", "",
		// A replica's first sync starts at once, not after the default 5 s
		// wait for more replicas.
		"--repl-diskless-sync-delay", "0",
	}
	if s.tl.major >= 7 {
		// DEBUG SLEEP and friends, for tests of timeouts; loopback only.
		args = append(args, "--enable-debug-command", "local")
	}
	if cluster {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "2000")
	}
	return append(args, extra...)
}

// errPortBusy is a start that failed because the port was taken.
var errPortBusy = errors.New("redistest: port in use")

// launch starts the process and waits until it answers, until deadline. The
// log is truncated first if truncate, else appended to. s.mu is held.
func (s *Server) launch(truncate bool, deadline time.Time) error {
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if truncate {
		flags |= os.O_TRUNC
	}
	logf, err := os.OpenFile(s.logPath, flags, 0o644)
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	var logStart int64 // where this run's log begins
	if fi, err := logf.Stat(); err == nil {
		logStart = fi.Size()
	}
	cmd := exec.Command(s.tl.server, s.args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf // files: no copying goroutine
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	logf.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("redistest: starting redis-server: %w", err)
	}
	s.cmd = cmd
	if err := s.waitReady(deadline); err != nil {
		s.killLocked()
		log := s.readLog()
		err = fmt.Errorf("%w\n--- command line: %s\n--- log:\n%s", err, s.commandLine(), log)
		if int64(len(log)) >= logStart && bytes.Contains(log[logStart:], []byte("Address already in use")) {
			return fmt.Errorf("%w: %w", errPortBusy, err)
		}
		return err
	}
	return nil
}

// commandLine is the server's command line, quoted where needed, for error
// messages.
func (s *Server) commandLine() string {
	q := []string{s.tl.server}
	for _, a := range s.args {
		if a == "" || strings.ContainsAny(a, " \t\"'") {
			a = strconv.Quote(a)
		}
		q = append(q, a)
	}
	return strings.Join(q, " ")
}

// waitReady waits until the server answers PING and INFO names its process,
// not another one on the same port. s.mu is held.
func (s *Server) waitReady(deadline time.Time) error {
	pid := s.cmd.Process.Pid
	want := "process_id:" + strconv.Itoa(pid) + "\r\n"
	for delay := time.Millisecond; ; delay = min(2*delay, 20*time.Millisecond) {
		if exited(pid) {
			return fmt.Errorf("redistest: redis-server on %s exited during start-up", s.Addr)
		}
		pong, err := commandAuth(s.Addr, s.password(), 250*time.Millisecond, "PING")
		if err == nil && pong == "PONG" {
			info, err := commandAuth(s.Addr, s.password(), 250*time.Millisecond, "INFO", "server")
			if err == nil && strings.Contains(info, want) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server on %s did not answer PING within %v (last: %q, %v)",
				s.Addr, startTimeout, pong, err)
		}
		time.Sleep(delay)
	}
}

// readLog returns the server's log, or a note saying why it cannot.
func (s *Server) readLog() []byte {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return []byte(err.Error())
	}
	return b
}

// Pid returns the process id of the running server, or 0 when it is not
// running: for faults Kill does not cover, such as SIGSTOP.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Kill stops the server with SIGKILL, as a crash would, and waits until it is
// gone; a later Restart starts it again. Killing a server that is not running
// does nothing. Kill panics on a shared server (Single, SharedCluster), which
// other tests use.
func (s *Server) Kill() {
	if s.shared {
		panic("redistest: Kill on a shared server; start one with StartServer or StartCluster for fault tests")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

// killLocked kills the server's process group and reaps the server. s.mu is
// held.
func (s *Server) killLocked() {
	if s.cmd == nil {
		return
	}
	killGroup(s.cmd.Process)
	s.cmd.Wait() // the exit status of a killed process says nothing
	s.cmd = nil
}

// Restart starts the server again, on the same port with the same command
// line and directory (so a cluster node keeps its nodes.conf and rejoins its
// cluster), killing it first if it is running, and waits until it answers
// PING. It fails t if the server does not come back within 10 seconds, or if
// the server is closed or shared. Call it from the test's goroutine.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.shared {
		t.Fatal("redistest: Restart on a shared server; start one with StartServer or StartCluster for fault tests")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		t.Fatalf("redistest: Restart of %s after Close", s.Addr)
	}
	s.killLocked()
	deadline := time.Now().Add(startTimeout)
	for {
		// The port can be held for a moment by a forked child of the
		// killed server; keep trying until the deadline.
		err := s.launch(false, deadline)
		if err == nil {
			return
		}
		if !errors.Is(err, errPortBusy) || time.Now().After(deadline) {
			t.Fatalf("redistest: restarting %s: %v", s.Addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Close stops the server for good and waits until it is gone. It may be
// called more than once. On a shared server it does nothing: Main stops
// those.
func (s *Server) Close() {
	if s.shared {
		return
	}
	s.stop()
}

// stop is Close, shared or not.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.killLocked()
}

// Do sends one command to the server and returns its reply as text (see
// Exec), failing t on an error reply or when the server cannot be reached.
// Call it from the test's goroutine.
func (s *Server) Do(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.Exec(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Exec sends one command to the server on a connection of its own and
// returns its reply as text, as `redis-cli --raw` prints it: a status or a
// bulk string as is ("OK", "PONG", CLUSTER INFO's lines), an integer in
// decimal ("0" for EXISTS of a missing key), a nil reply as "", and the
// elements of an array, nested ones flattened, one per line. An error reply
// (such as "MOVED 3999 127.0.0.1:7001") and a failure to reach the server
// within 5 seconds are errors. It may be called from any goroutine.
func (s *Server) Exec(args ...string) (string, error) {
	return commandAuth(s.Addr, s.password(), 5*time.Second, args...)
}

// password returns the server's --requirepass, if it was started with one.
func (s *Server) password() string {
	for i, a := range s.args {
		if a == "--requirepass" && i+1 < len(s.args) {
			return s.args[i+1]
		}
	}
	return ""
}

// ports are the ports handed out in this test binary (cluster bus ports
// included), never handed out twice.
var ports struct {
	sync.Mutex
	used map[int]bool
}

// The range pickPort draws from: below Linux's default ephemeral range
// (32768–60999) even for a cluster bus port (port+10000), so that no
// outgoing connection of this machine takes a server's port between a Kill
// and a Restart.
const portLo, portHi = 15000, 22000

// pickPort returns a port that is free now on 127.0.0.1 and, for a cluster
// node, whose bus port is free too. It is a variable so that a test can
// hand out a port that is taken, as another process may take it between the
// pick and the server's bind.
var pickPort = freePort

// freePort is pickPort's implementation.
func freePort(cluster bool) (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.used == nil {
		ports.used = make(map[int]bool)
	}
	for range 1000 {
		p := portLo + rand.IntN(portHi-portLo)
		if ports.used[p] || ports.used[p+busOffset] || !portFree(p) || cluster && !portFree(p+busOffset) {
			continue
		}
		ports.used[p] = true
		if cluster {
			ports.used[p+busOffset] = true
		}
		return p, nil
	}
	return 0, fmt.Errorf("redistest: no free port on 127.0.0.1 in %d–%d", portLo, portHi)
}

// portFree reports whether a listener can bind 127.0.0.1:p now.
func portFree(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
