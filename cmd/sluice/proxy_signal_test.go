package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sluice proxy, like serve, takes SIGHUP from its start, so that one sent
// while it is still starting (as a config-reloader sidecar may right after
// a deploy) does not end it with exit 129; TestServeSurvivesSIGHUPDuringStartUp
// tells why the SIGHUPs go from when the config is opened (startHUPing). The
// proxy keeps serving through two more seconds of them.
func TestProxySurvivesSIGHUPDuringStartUp(t *testing.T) {
	t.Parallel() // waits on processes and timers; touches no process-wide state
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	// A few thousand routes: a start-up of a good fraction of a second
	// after the config is opened.
	var b strings.Builder
	const n = 4000
	b.WriteString("limits:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: l%d, key: ip, rate: %dr/m}\n", i, i+1)
	}
	b.WriteString("routes:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: r%d, match: /r%d/, limits: [l%d]}\n", i, i, i)
	}
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	writeFile(t, cfg, b.String())
	p := startHUPing(t, cfg, regexp.MustCompile(`listening  (http://\S+)`), "proxy", "-config", cfg, "-upstream", up.URL,
		"-listen", "127.0.0.1:0", "-admin-addr", "", "-watch=false")
	p.hupFor(t, 2*time.Second) // still serving through two more seconds of them
	url := p.addr
	if code := getStatus(t, url+"/r1/x"); code != 200 {
		t.Fatalf("GET: %d, want 200", code)
	}
}

// hupProcess is a `sluice` command run as a child process by startHUPing.
type hupProcess struct {
	*child
	addr string // the first submatch of the line startHUPing waited for
	sent int    // SIGHUPs sent before that line was read
}

// startHUPing runs `sluice args` in a child process and, from when the
// process opens the file at path (its config: its first step after taking
// SIGHUP), sends it SIGHUP every 20 ms until it prints a line matching
// ready on stdout (the first one as soon as the file is opened); it fails
// the test if the process exits meanwhile. The process is killed when the
// test ends.
func startHUPing(t *testing.T, path string, ready *regexp.Regexp, args ...string) *hupProcess {
	t.Helper()
	opened := openedOnce(t, path)
	c, lines := startChild(t, testBinary(t), args...)
	p := &hupProcess{child: c}
	defer drain(lines)
	select {
	case <-opened:
	case <-p.exited:
		t.Fatalf("exited before opening its config (%v): %s", p.exitErr, p.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("did not open its config in 30s: %s", p.stderr.String())
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	for p.addr == "" {
		p.hup()
		p.sent++
		select {
		case l := <-lines:
			if m := ready.FindStringSubmatch(l); m != nil {
				p.addr = m[1]
			}
		case <-p.exited:
			t.Fatalf("exited during start-up, after %d SIGHUPs (%v): %s", p.sent, p.exitErr, p.stderr.String())
		case <-tick.C:
		case <-deadline:
			t.Fatalf("not started 60s after opening its config: %s", p.stderr.String())
		}
	}
	t.Logf("%d SIGHUPs sent during start-up", p.sent)
	return p
}

// hup sends SIGHUP; an error is the process's end, which its callers see
// on exited.
func (p *hupProcess) hup() { p.cmd.Process.Signal(syscall.SIGHUP) }

// hupFor sends SIGHUP every 20 ms for d, and fails the test if the process
// exits meanwhile.
func (p *hupProcess) hupFor(t *testing.T, d time.Duration) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	end := time.After(d)
	for {
		p.hup()
		select {
		case <-p.exited:
			t.Fatalf("exited after start-up (%v): %s", p.exitErr, p.stderr.String())
		case <-tick.C:
			continue
		case <-end:
		}
		return
	}
}
