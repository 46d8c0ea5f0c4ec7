package main

// Hostile input against `sluice serve`: what a client or a file could do
// to knock the server over. Each test is bounded to a few seconds.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
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
	os.Exit(m.Run())
}

// process is a `sluice` command running as a child process.
type process struct {
	cmd           *exec.Cmd
	httpURL, grpc string
	stderr        *syncBuffer
	exited        chan struct{}
	exitErr       error
}

// startProcess runs `sluice args` in a child process whose shell first
// runs prelude (such as "ulimit -n 256"), waits for serve's addresses and
// kills the process when the test ends.
func startProcess(t *testing.T, prelude string, args ...string) *process {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", append([]string{"-c", prelude + `; exec "$0" "$@"`, self}, args...)...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exitErr = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	httpRe, grpcRe := regexp.MustCompile(`HTTP  (http://\S+)`), regexp.MustCompile(`gRPC  (\S+)`)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
	}()
	timeout := time.After(10 * time.Second)
	for p.httpURL == "" || p.grpc == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				<-p.exited
				t.Fatalf("exited (%v) before serving: %s", p.exitErr, p.stderr.String())
			}
			if m := httpRe.FindStringSubmatch(l); m != nil {
				p.httpURL = m[1]
			}
			if m := grpcRe.FindStringSubmatch(l); m != nil {
				p.grpc = m[1]
			}
		case <-timeout:
			t.Fatalf("printed no addresses: %s", p.stderr.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
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
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for range 300 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		if _, err := io.WriteString(c, "GET /healthcheck HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { io.Copy(io.Discard, c) }) // reads the answer, then waits
	}

	// gRPC first: its listener must not be starved even now.
	gc, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(gc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("gRPC health check while 300 HTTP connections idle: %v", err)
	}

	// A new HTTP client is answered within a few idle timeouts (the
	// clients ahead of it in the backlog each get an answer and then
	// their own idle timeout).
	client := &http.Client{Timeout: 6 * idle, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(p.httpURL + "/healthcheck")
	if err != nil {
		t.Fatalf("a new client was starved by 300 idle connections: %v\n%s", err, p.stderr.String())
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthcheck: %d", resp.StatusCode)
	}
}

var _ = fmt.Sprint
var _ = syscall.SIGTERM
