package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/daemon"
	"google.golang.org/grpc/credentials/insecure"
)

// idleExitBound is how soon after SIGTERM an idle serve or proxy process
// must have exited: a real process, so a generous margin over the few
// milliseconds it takes, but far under any fixed wait of a second.
const idleExitBound = 500 * time.Millisecond

// noRaceExitSleep makes the child processes of t exit without the second
// that a -race build's runtime sleeps at exit by default (GORACE's
// atexit_sleep_ms): the test binary is the child, and that second is not
// serve's or proxy's.
func noRaceExitSleep(t *testing.T) {
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

// exitTime sends SIGTERM to c and returns how long it took to exit 0.
func exitTime(t *testing.T, c *child) time.Duration {
	t.Helper()
	start := time.Now()
	c.stop(t, daemon.DrainGrace+daemon.CloseGrace)
	took := time.Since(start)
	t.Logf("exited %v after SIGTERM", took)
	return took
}

// An idle serve (nothing in flight, an HTTP keep-alive connection and a
// gRPC connection open) exits promptly on SIGTERM: the drain waits for
// requests in flight, not for a fixed time.
func TestServeExitsPromptlyWhenIdle(t *testing.T) {
	noRaceExitSleep(t)
	p := startProcess(t, "true", "serve", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0")
	if code, _ := get(t, p.httpURL+"/healthcheck"); code != 200 { // leaves an idle keep-alive connection
		t.Fatalf("GET /healthcheck: %d", code)
	}
	conn := dial(t, p.grpc, insecure.NewCredentials())
	defer conn.Close()
	if err := checkHealth(conn, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := exitTime(t, p.child); took >= idleExitBound {
		t.Errorf("exited %v after SIGTERM with nothing in flight, want under %v", took, idleExitBound)
	}
}

// So does an idle proxy, with a keep-alive connection from a client and
// one to its upstream.
func TestProxyExitsPromptlyWhenIdle(t *testing.T) {
	noRaceExitSleep(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(up.Close)
	c, lines := startChild(t, testBinary(t), "proxy", "-upstream", up.URL, "-listen", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0")
	listen := regexp.MustCompile(`listening  (http://\S+)`)
	var url string
	late := time.AfterFunc(10*time.Second, func() { c.cmd.Process.Kill() }) // ends lines
	for l := range lines {
		if m := listen.FindStringSubmatch(l); m != nil {
			url = m[1]
			break
		}
	}
	late.Stop()
	if url == "" {
		<-c.exited
		t.Fatalf("exited (%v) before listening, or printed no address in 10 s: %s", c.exitErr, c.stderr.String())
	}
	drain(lines)
	if code, body := get(t, url+"/x"); code != 200 || body != "ok" {
		t.Fatalf("GET through the proxy: %d %q", code, body)
	}
	if took := exitTime(t, c); took >= idleExitBound {
		t.Errorf("exited %v after SIGTERM with nothing in flight, want under %v", took, idleExitBound)
	}
}
