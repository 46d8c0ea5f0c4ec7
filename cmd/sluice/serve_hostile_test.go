package main

// Hostile input against `sluice serve`: what a client or a file could do
// to knock the server over. Each test is bounded to a few seconds.

import (
	"bufio"
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testlog"
)

// runMainEnv, set in a child process's environment, makes the test binary
// run the sluice command line in its arguments instead of the tests (see
// TestMain), so that a test can start serve as a process of its own, under
// its own limits.
const runMainEnv = "SLUICE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	flag.Parse()
	waitingParallel()
	os.Exit(redistest.Wrap(m).Run())
}

// minParallel is how many of this package's parallel tests run at once at
// the least. They wait on processes (serve, the proxy, PostgreSQL, Redis,
// Chromium), sockets and timers far more than they compute: at go test's
// default, GOMAXPROCS (2 on a 2-core machine), the package took 167 s; at
// 4, 90 s (-race, load average 22).
const minParallel = 4

// waitingParallel raises -test.parallel to minParallel unless the command
// line set it.
func waitingParallel() {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if f := flag.Lookup("test.parallel"); !set && f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n < minParallel {
			f.Value.Set(strconv.Itoa(minParallel))
		}
	}
}

// child is the test binary running `sluice` (TestMain runs main when
// runMainEnv is set) as a child process, its stderr kept.
type child struct {
	cmd     *exec.Cmd
	stderr  testlog.Buffer
	exited  chan struct{} // closed once the process has exited
	exitErr error         // Wait's error, set before exited is closed
}

// testBinary returns the path of the running test binary.
func testBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// startChild starts name args with runMainEnv set and returns it and its
// stdout line by line, which the caller reads to the end (drain): the
// channel closes when stdout does. The process is killed when the test
// ends.
func startChild(t *testing.T, name string, args ...string) (*child, <-chan string) {
	t.Helper()
	c := &child{cmd: exec.Command(name, args...), exited: make(chan struct{})}
	// The child is this race-built (under -race) test binary: without
	// atexit_sleep_ms=0 the race runtime sleeps a second at every exit.
	c.cmd.Env = append(os.Environ(), runMainEnv+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.exitErr = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.exited
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
	}()
	return c, lines
}

// drain reads the rest of lines in the background.
func drain(lines <-chan string) {
	go func() {
		for range lines {
		}
	}()
}

// stop sends SIGTERM and fails the test unless the process exits 0 within
// d.
func (c *child) stop(t *testing.T, d time.Duration) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.exited:
		if c.exitErr != nil {
			t.Errorf("exit after SIGTERM: %v: %s", c.exitErr, c.stderr.String())
		}
	case <-time.After(d):
		t.Fatalf("still running %v after SIGTERM: %s", d, c.stderr.String())
	}
}

// process is a `sluice serve` running as a child process.
type process struct {
	*child
	httpURL, grpc string
	debug         string // the banner's debug line: the listener's URL first, or "off ..."
}

// startProcess runs `sluice args` in a child process whose shell first
// runs prelude (such as "ulimit -n 256"), waits for serve's banner (its
// addresses, the debug line last) and kills the process when the test
// ends.
func startProcess(t *testing.T, prelude string, args ...string) *process {
	t.Helper()
	c, lines := startChild(t, "sh", append([]string{"-c", prelude + `; exec "$0" "$@"`, testBinary(t)}, args...)...)
	p := &process{child: c}
	timeout := time.After(10 * time.Second)
	for p.debug == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				<-p.exited
				t.Fatalf("exited (%v) before serving: %s", p.exitErr, p.stderr.String())
			}
			if m := bannerHTTP.FindStringSubmatch(l); m != nil {
				p.httpURL = m[1]
			}
			if m := bannerGRPC.FindStringSubmatch(l); m != nil {
				p.grpc = m[1]
			}
			if m := bannerDebug.FindStringSubmatch(l + "\n"); m != nil {
				p.debug = m[1]
			}
		case <-timeout:
			t.Fatalf("printed no addresses: %s", p.stderr.String())
		}
	}
	drain(lines)
	return p
}

// Idle keep-alive connections cannot starve serve: with 300 of them held
// open against a server limited to 256 file descriptors, a new HTTP client
// is answered once the idle timeout has closed them, and a gRPC client is
// answered at once (each listener holds at most its share of the
// descriptors).
func TestServeIdleConnectionsDoNotStarve(t *testing.T) {
	const idle = time.Second
	p := startProcess(t, "ulimit -n 256", "serve", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0",
		"-http-idle-timeout", idle.String(), "-http-read-header-timeout", idle.String())
	addr := strings.TrimPrefix(p.httpURL, "http://")

	// 300 clients, each sending one keep-alive request and then holding
	// the connection open without a word.
	holdIdle(t, addr, "/healthcheck", 300)

	// gRPC first: its listener must not be starved even now.
	gc := dial(t, p.grpc, insecure.NewCredentials())
	defer gc.Close()
	if err := checkHealth(gc, 3*time.Second); err != nil {
		t.Errorf("gRPC health check while 300 HTTP connections idle: %v", err)
	}

	// A new HTTP client is answered within a few idle timeouts (the
	// clients ahead of it in the backlog each get an answer and then
	// their own idle timeout).
	client := &http.Client{Timeout: 8 * idle, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(p.httpURL + "/healthcheck")
	if err != nil {
		t.Fatalf("a new client was starved by 300 idle connections: %v\n%s", err, p.stderr.String())
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthcheck: %d", resp.StatusCode)
	}
}

// metricWithin polls the unlabelled metric name at url until ok accepts
// its value, for up to d; it returns the last value and whether ok did.
func metricWithin(t *testing.T, url, name string, d time.Duration, ok func(float64) bool) (float64, bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		v := metric(t, url, name)
		if ok(v) {
			return v, true
		}
		if time.Now().After(deadline) {
			return v, false
		}
		time.Sleep(20 * time.Millisecond) // polling a live process
	}
}

// badConfigFiles make path a config file that is not a regular file: a
// symlink to /dev/zero, which never ends, and a FIFO, whose open blocks
// until a writer comes.
var badConfigFiles = []struct {
	name string
	make func(path string) error
}{
	{"dev-zero", func(path string) error { return os.Symlink("/dev/zero", path) }},
	{"fifo", func(path string) error { return syscall.Mkfifo(path, 0o644) }},
}

// A config file that is not a regular file cannot wedge serve: at
// start-up it is refused at once; added to a running server's directory,
// the reload fails and says so in its metrics, later edits and SIGHUP
// still reload, and SIGTERM still stops the process within 5 seconds.
func TestServeRefusesConfigFilesThatAreNotRegular(t *testing.T) {
	t.Parallel() // waits on processes and timers; touches no process-wide state
	for _, bad := range badConfigFiles {
		t.Run(bad.name, func(t *testing.T) {
			t.Run("start-up", func(t *testing.T) {
				dir := t.TempDir()
				writeFile(t, filepath.Join(dir, "a.yaml"), cfgBlocked)
				if err := bad.make(filepath.Join(dir, "z.yaml")); err != nil {
					t.Fatal(err)
				}
				code, errs := serveExit(t, 5*time.Second, "serve still starting with "+bad.name+" as a config file", "-config", dir)
				if code != 1 || !strings.Contains(errs, "z.yaml") || !strings.Contains(errs, "not a regular file") {
					t.Errorf("exit %d, stderr %q; want 1 naming z.yaml as not a regular file", code, errs)
				}
			})
			t.Run("reload", func(t *testing.T) {
				dir := t.TempDir()
				writeFile(t, filepath.Join(dir, "a.yaml"), cfgBlocked)
				p := startProcess(t, "true", "serve", "-config", dir, "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0")
				if err := bad.make(filepath.Join(dir, "z.yaml")); err != nil {
					t.Fatal(err)
				}
				p.cmd.Process.Signal(syscall.SIGHUP)
				if v, ok := metricWithin(t, p.httpURL, "sluice_config_reload_failures_total", 5*time.Second, func(v float64) bool { return v >= 1 }); !ok {
					t.Errorf("sluice_config_reload_failures_total = %v after a reload with %s; want at least 1", v, bad.name)
				}
				if v := metric(t, p.httpURL, "sluice_config_last_reload_successful"); v != 0 {
					t.Errorf("sluice_config_last_reload_successful = %v after a failed reload", v)
				}

				// Later edits and SIGHUP still reload.
				if err := os.Remove(filepath.Join(dir, "z.yaml")); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, "a.yaml"), cfgUnlimited)
				p.cmd.Process.Signal(syscall.SIGHUP)
				if _, ok := metricWithin(t, p.httpURL, "sluice_config_last_reload_successful", 5*time.Second, func(v float64) bool { return v == 1 }); !ok {
					t.Errorf("no successful reload after the bad file was removed: %s", p.stderr.String())
				} else if code := post(t, p.httpURL, reqK); code != 200 {
					t.Errorf("after the reload to the unlimited config: %d", code)
				}

				// With the bad file back and a reload on it, SIGTERM stops
				// the process.
				if err := bad.make(filepath.Join(dir, "z.yaml")); err != nil {
					t.Fatal(err)
				}
				p.cmd.Process.Signal(syscall.SIGHUP)
				time.Sleep(200 * time.Millisecond) // let the reload start: SIGTERM must interrupt it
				p.stop(t, 5*time.Second)
			})
		})
	}
}

// Writes to files that are not config files do not reload: with serve's
// log in the config directory and a config file that cannot be read (a
// dangling symlink), each failed reload's log line must not trigger the
// next reload.
func TestServeLogInConfigDirDoesNotReloadInALoop(t *testing.T) {
	t.Parallel() // waits on processes and timers; touches no process-wide state
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), cfgBlocked)
	logFile, err := os.Create(filepath.Join(dir, "sluice.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	url := launchRun(t, func(ctx context.Context, args []string, stdout, _ io.Writer) int {
		return runServe(ctx, args, stdout, logFile)
	}, "-config", dir).url
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, ok := metricWithin(t, url, "sluice_config_reload_failures_total", 5*time.Second, func(v float64) bool { return v >= 1 }); !ok {
		t.Fatal("the dangling config file did not fail a reload")
	}
	time.Sleep(1500 * time.Millisecond) // long enough for several debounced reloads
	if v := metric(t, url, "sluice_config_reload_failures_total"); v > 1 {
		b, _ := os.ReadFile(logFile.Name())
		t.Fatalf("%v failed reloads from one change: the log file reloads the config\n%s", v, b)
	}
}

// Slow clients are cut off: an HTTP client that never finishes its
// request headers (slowloris) is disconnected after the read-header
// timeout, and a gRPC client that never sends the HTTP/2 preface after the
// handshake timeout.
func TestServeCutsSlowClients(t *testing.T) {
	const d = 300 * time.Millisecond
	s := launch(t, "-http-read-header-timeout", d.String(), "-grpc-handshake-timeout", d.String())
	httpAddr, grpcAddr := strings.TrimPrefix(s.url, "http://"), s.grpc
	for _, c := range []struct{ name, addr, send string }{
		{"HTTP, headers never finished", httpAddr, "GET /healthcheck HTTP/1.1\r\nHost: x\r\nX-Slow: "},
		{"gRPC, no preface", grpcAddr, ""},
	} {
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		if c.send != "" {
			io.WriteString(conn, c.send)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.Copy(io.Discard, conn) // until the server closes
		conn.Close()
		if err != nil {
			t.Errorf("%s: still open 5 s after connecting (timeout %v): %v", c.name, d, err)
		}
	}
}
