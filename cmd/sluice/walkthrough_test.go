package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A walk-through is a doc's first example as a reader follows it: the
// ```sh blocks under an HTML comment <!-- walkthrough NAME: start --> (the
// servers, run in the background) and <!-- walkthrough NAME: try --> (the
// requests, run once the servers listen). Each try block must print a 429
// among its output lines, or, when its marker says what the reader sees
// instead (<!-- walkthrough NAME: try expect /REGEXP/ -->), output that
// REGEXP matches (in multi-line mode): a 503, a limit that fell, an
// assignment.
type walkthrough struct {
	name       string
	where      string // file:line of its first block
	start, try []string
	expect     []*regexp.Regexp // per try block; nil: a 429
}

// walkthroughRE is the marker of a walk-through's block.
var walkthroughRE = regexp.MustCompile(`^<!--\s*walkthrough\s+([a-z0-9-]+):\s*(start|try)(?:\s+expect\s+/(.+)/)?\s*-->$`)

// walkthroughs returns the walk-throughs of the markdown files, by name, in
// the order of their first block. A marker must be the last non-blank line
// before a ```sh block, or the test fails: a marker that marks nothing
// would let a walk-through lose its commands unnoticed.
func walkthroughs(t *testing.T, files ...string) []*walkthrough {
	t.Helper()
	var out []*walkthrough
	byName := map[string]*walkthrough{}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			m := walkthroughRE.FindStringSubmatch(strings.TrimSpace(lines[i]))
			if m == nil {
				continue
			}
			where := fmt.Sprintf("%s:%d", strings.TrimPrefix(name, "../../"), i+1)
			j := i + 1
			for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
				j++
			}
			if j == len(lines) || strings.TrimSpace(lines[j]) != "```sh" {
				t.Fatalf("%s: a walkthrough marker not followed by a ```sh block", where)
			}
			var body []string
			for j++; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
				body = append(body, lines[j])
			}
			w := byName[m[1]]
			if w == nil {
				w = &walkthrough{name: m[1], where: where}
				byName[m[1]] = w
				out = append(out, w)
			}
			block := strings.Join(body, "\n") + "\n"
			switch {
			case m[2] == "start" && m[3] != "":
				t.Fatalf("%s: expect is for a try block", where)
			case m[2] == "start":
				w.start = append(w.start, block)
			default:
				var re *regexp.Regexp
				if m[3] != "" {
					var err error
					if re, err = regexp.Compile("(?m)" + m[3]); err != nil {
						t.Fatalf("%s: expect: %v", where, err)
					}
				}
				w.try = append(w.try, block)
				w.expect = append(w.expect, re)
			}
			i = j
		}
	}
	return out
}

// goRunRE is a `go run ./PKG` of a walk-through, which the test replaces
// by a binary built once.
var goRunRE = regexp.MustCompile(`go run (\./[A-Za-z0-9_./-]+)`)

// portRE finds the local addresses a walk-through's commands name.
var portRE = regexp.MustCompile(`(?:localhost|127\.0\.0\.1):(\d+)`)

// walkthroughNetnsEnv tells the test binary that it runs in a network
// namespace of its own (see TestWalkthroughsRunAsWritten).
const walkthroughNetnsEnv = "SLUICE_TEST_WALKTHROUGH_NETNS"

// Every walk-through of README.md and docs/*.md runs as written, from the
// repository's root: its start blocks in the background, then each try
// block once the addresses the blocks name accept connections, which must
// print a 429. `go run ./cmd/sluice` is this test binary running sluice
// (built once, as the test), another `go run ./PKG` a binary built once.
// The docs' fixed ports (8080, 9000...) are free in a network namespace
// of the test's own (unshare); without one the test runs only when they
// are free, and skips loudly otherwise.
func TestWalkthroughsRunAsWritten(t *testing.T) {
	t.Parallel() // waits on processes (in a network namespace of their own when it can); touches no process-wide state
	wts := walkthroughs(t, docFiles(t)...)
	var names []string
	for _, w := range wts {
		names = append(names, w.name)
		if len(w.start) == 0 || len(w.try) == 0 {
			t.Fatalf("%s: walkthrough %s needs a start block and a try block", w.where, w.name)
		}
	}
	for _, want := range []string{"readme", "serve", "proxy", "quotas", "settle", "rlqs", "adaptive"} {
		if !slices.Contains(names, want) {
			t.Fatalf("walkthrough %q not found (found %v): a doc lost its markers, or this test its way to them", want, names)
		}
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("SKIP: no curl, which the walk-throughs use")
	}
	if os.Getenv(walkthroughNetnsEnv) == "" && inNetns(t) {
		return
	}
	if os.Getenv(walkthroughNetnsEnv) == "1" {
		if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
			t.Fatalf("ip link set lo up: %v: %s", err, out)
		}
	}
	bin := walkthroughBinaries(t, wts)
	for _, w := range wts {
		t.Run(w.name, func(t *testing.T) { runWalkthrough(t, w, bin) })
	}
}

// inNetns runs this test again in a network namespace of its own and
// reports true when it could, false when unshare cannot make one (the
// test then runs here, if the ports are free).
func inNetns(t *testing.T) bool {
	if exec.Command("unshare", "-rn", "true").Run() != nil {
		return false
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-rn", testBinary(t), "-test.run", "^TestWalkthroughsRunAsWritten$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), walkthroughNetnsEnv+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in a network namespace: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestWalkthroughsRunAsWritten")) {
		t.Fatalf("in a network namespace, the test did not pass:\n%s", out)
	}
	t.Logf("ran in a network namespace of its own:\n%s", out)
	return true
}

// walkthroughBinaries builds, once, what the walk-throughs `go run`: a
// script that runs this test binary as sluice for ./cmd/sluice, a binary
// for any other package. It returns them by package.
func walkthroughBinaries(t *testing.T, wts []*walkthrough) map[string]string {
	dir := t.TempDir()
	sluice := filepath.Join(dir, "sluice")
	script := fmt.Sprintf("#!/bin/sh\n%s=1 GORACE='atexit_sleep_ms=0' exec %q \"$@\"\n", runMainEnv, testBinary(t))
	if err := os.WriteFile(sluice, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := map[string]string{"./cmd/sluice": sluice}
	for _, w := range wts {
		for _, b := range slices.Concat(w.start, w.try) {
			for _, m := range goRunRE.FindAllStringSubmatch(b, -1) {
				if bin[m[1]] != "" {
					continue
				}
				out := filepath.Join(dir, strings.ReplaceAll(strings.Trim(m[1], "./"), "/", "_"))
				cmd := exec.Command("go", "build", "-o", out, m[1])
				cmd.Dir = "../.."
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("go build %s: %v: %s", m[1], err, b)
				}
				bin[m[1]] = out
			}
		}
	}
	return bin
}

// runWalkthrough runs w as a reader would, with bin's binaries for its
// `go run`s.
func runWalkthrough(t *testing.T, w *walkthrough, bin map[string]string) {
	rewrite := func(b string) string {
		return goRunRE.ReplaceAllStringFunc(b, func(s string) string { return bin[goRunRE.FindStringSubmatch(s)[1]] })
	}
	var ports []string
	for _, b := range slices.Concat(w.start, w.try) {
		for _, m := range portRE.FindAllStringSubmatch(b, -1) {
			if !slices.Contains(ports, m[1]) {
				ports = append(ports, m[1])
			}
		}
	}
	if os.Getenv(walkthroughNetnsEnv) != "1" {
		for _, p := range ports {
			if c, err := net.DialTimeout("tcp", "127.0.0.1:"+p, time.Second); err == nil {
				c.Close()
				t.Skipf("SKIP: port %s is taken and no network namespace could be made (unshare -rn): the walk-through cannot run as written", p)
			}
		}
	}
	for _, b := range w.start {
		var out bytes.Buffer
		cmd := exec.Command("sh", "-c", rewrite(b))
		cmd.Dir = "../.."
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
			if t.Failed() {
				t.Logf("%s: the start block's output:\n%s", w.where, out.String())
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, p := range ports {
		for {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+p, time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: nothing listens on port %s a minute after the start block: %v", w.where, p, err)
			}
			time.Sleep(50 * time.Millisecond) // polling a process's port, not passing time
		}
	}
	for i, b := range w.try {
		want, wantWhat := status429RE, "a 429"
		if w.expect[i] != nil {
			want, wantWhat = w.expect[i], "output matching /"+strings.TrimPrefix(w.expect[i].String(), "(?m)")+"/"
		}
		// A fixed window of a minute (serve's example) may turn between
		// two of the calls, which then all pass: once more, and it cannot
		// turn again.
		for attempt := 1; ; attempt++ {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			out, err := exec.CommandContext(ctx, "sh", "-c", rewrite(b)).CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("%s: the try block failed: %v\n%s\n%s", w.where, err, b, out)
			}
			if want.Match(out) {
				t.Logf("%s:\n%s", w.where, out)
				break
			}
			if attempt == 2 {
				t.Fatalf("%s: no %s from the try block, twice:\n%s\n%s", w.where, wantWhat, b, out)
			}
			t.Logf("%s: no %s the first time (a window turned?); again:\n%s", w.where, wantWhat, out)
		}
	}
}

// status429RE is a 429 as curl prints it: -w '%{http_code}' or -i.
var status429RE = regexp.MustCompile(`(?m)^(HTTP/1.1 )?429\b`)

// The test's reading of markdown: markers, blocks, and a marker that marks
// no block.
func TestWalkthroughMarkers(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "a.md")
	os.WriteFile(md, []byte("x\n<!-- walkthrough w: start -->\n\n```sh\nserve &\n```\ntext\n<!-- walkthrough w: try -->\n```sh\ncurl localhost:1\n```\n```sh\nnot marked\n```\n"), 0o644)
	got := walkthroughs(t, md)
	if len(got) != 1 || got[0].name != "w" || len(got[0].start) != 1 || got[0].start[0] != "serve &\n" || len(got[0].try) != 1 || got[0].try[0] != "curl localhost:1\n" {
		t.Fatalf("walkthroughs %+v", got)
	}
	os.WriteFile(md, []byte("<!-- walkthrough e: start -->\n```sh\nserve\n```\n<!-- walkthrough e: try expect /^limit \\d+$/ -->\n```sh\ncurl\n```\n"), 0o644)
	got = walkthroughs(t, md)
	if len(got) != 1 || len(got[0].expect) != 1 || got[0].expect[0] == nil || !got[0].expect[0].MatchString("x\nlimit 4\n") || got[0].expect[0].MatchString("limit x") {
		t.Fatalf("expect: %+v", got)
	}
	if m := goRunRE.FindStringSubmatch("go run ./examples/proxy/upstream -addr x"); m == nil || m[1] != "./examples/proxy/upstream" {
		t.Fatalf("go run: %q", m)
	}
}
