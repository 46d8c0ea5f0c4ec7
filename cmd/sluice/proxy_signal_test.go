package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A SIGHUP that comes while sluice proxy is still starting (a large config
// being loaded, a config-reloader sidecar signalling right after a deploy)
// must not kill it, as it does not kill serve: before, SIGHUP's default
// action ended the proxy (exit 129) until its reload handler was installed
// after the config, the store and the listeners.
func TestProxySurvivesSIGHUPDuringStartUp(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	// A few thousand routes: a start-up of a good fraction of a second.
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

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The shell's $$ is the proxy's PID once it execs: SIGHUP every 20 ms
	// for two seconds, from 300 ms after the exec. Not sooner: between the
	// exec and the first line of runProxy the runtime and the packages'
	// init run, and a SIGHUP there ends any Go program; on a loaded machine
	// under -race that took more than 50 ms.
	prelude := `(sleep 0.3; for i in $(seq 100); do kill -HUP $$ 2>/dev/null || exit 0; sleep 0.02; done) &`
	cmd := exec.Command("sh", "-c", prelude+` exec "$0" "$@"`, self, "proxy", "-config", cfg, "-upstream", up.URL,
		"-listen", "127.0.0.1:0", "-admin-addr", "", "-watch=false")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`listening  (http://\S+)`)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	var url string
	select {
	case url = <-urls:
	case <-exited:
		t.Fatalf("exited during start-up (%v): %s", waitErr, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("not listening after 10s: %s", stderr.String())
	}
	// Past the last SIGHUP, still serving.
	select {
	case <-exited:
		t.Fatalf("exited after start-up (%v): %s", waitErr, stderr.String())
	case <-time.After(2500 * time.Millisecond):
	}
	if code := getStatus(t, url+"/r1/x"); code != 200 {
		t.Fatalf("GET: %d, want 200", code)
	}
}
