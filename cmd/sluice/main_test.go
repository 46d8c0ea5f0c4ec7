package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// runCase is a command line and what run should make of it: the exit code
// and substrings of stdout and stderr.
type runCase struct {
	args     []string
	code     int
	inStdout string
	inStderr string
}

// check runs the command line and reports a mismatch; it returns the exit
// code and stdout.
func (tt runCase) check(t *testing.T) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(tt.args, &out, &errb)
	if code != tt.code || !strings.Contains(out.String(), tt.inStdout) || !strings.Contains(errb.String(), tt.inStderr) {
		t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, out.String(), errb.String(), tt.code, tt.inStdout, tt.inStderr)
	}
	return code, out.String()
}

func TestRun(t *testing.T) {
	tests := []runCase{
		{nil, 0, "Usage:", ""},
		{[]string{"help"}, 0, "Commands:", ""},
		{[]string{"version"}, 0, "sluice ", ""},
		{[]string{"bogus"}, 2, "", `unknown command "bogus"`},
	}
	// Every command the main usage lists has its own help.
	for _, cmd := range []string{"serve", "proxy", "check", "simulate", "migrate", "admin"} {
		tests = append(tests, runCase{[]string{"help", cmd}, 0, "Usage: sluice " + cmd, ""})
	}
	for _, tt := range tests {
		tt.check(t)
	}
}

func TestSimulate(t *testing.T) {
	t.Parallel() // simulated clocks only; touches no process-wide state
	dir := t.TempDir()
	replay := filepath.Join(dir, "in.csv")
	writeFile(t, replay, "1735689600,a\n1735689599,a\n")
	fifo := filepath.Join(dir, "in.fifo") // no writer: opening it for reading would wait for ever
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	svg, png := filepath.Join(dir, "c.svg"), filepath.Join(dir, "c.png")
	tests := []runCase{
		{[]string{"simulate", "-pattern", "boundary"}, 0, "fixed_window", ""},
		{[]string{"simulate", "-pattern", "steady", "-json", "-algorithms", "token_bucket"}, 0, `"algorithm": "token_bucket"`, ""},
		{[]string{"simulate", "-pattern", "bursts", "-chart", svg + "," + png}, 0, "sliding_log", ""},
		{[]string{"simulate", "-pattern", "boundary", "-chart", svg + ","}, 0, "fixed_window", ""}, // an empty item is skipped, as overload skips it
		{[]string{"simulate", "-pattern", "replay", "-file", replay}, 1, "", "line 2, column 1: timestamp 1735689599 is before"},
		{[]string{"simulate", "-pattern", "replay", "-file", fifo}, 1, "", "not a regular file"},
		{[]string{"simulate", "-pattern", "nope"}, 2, "", `unknown pattern "nope"`},
		// A pattern flag the pattern does not read is refused, not ignored.
		{[]string{"simulate", "-pattern", "steady", "-file", replay}, 2, "", "-file: -pattern steady does not use it"},
		{[]string{"simulate", "-pattern", "bursts", "-keys", "10"}, 2, "", "-keys: -pattern bursts does not use it"},
		{[]string{"simulate", "-pattern", "zipf", "-on", "1s"}, 2, "", "-on: -pattern zipf does not use it"},
		{[]string{"simulate", "-pattern", "boundary", "-load", "5"}, 2, "", "-load: -pattern boundary does not use it"},
		{[]string{"simulate", "-pattern", "replay", "-file", replay, "-duration", "1h"}, 2, "", "-duration: -pattern replay does not use it"},
		{[]string{"simulate", "accuracy", "-requests", "5000", "-keys", "100", "-duration", "5m"}, 0, "wrongly admitted", ""},
		{[]string{"simulate", "accuracy", "-requests", "3000", "-keys", "50", "-duration", "5m", "-population", "abusers", "-buckets", "1,4"}, 0, "shared: one history, every request counted", ""},
		{[]string{"simulate", "accuracy", "-buckets", "1,17"}, 2, "", "-buckets \"1,17\": want at most 16 counters, each k from 1 to 16 or k:d with d from 1 to 8"},
		{[]string{"simulate", "accuracy", "-buckets", "8:9"}, 2, "", "-buckets \"8:9\": want at most 16 counters"},
		{[]string{"simulate", "accuracy", "-requests", "3000", "-keys", "50", "-duration", "5m", "-buckets", "1,8:4"}, 0, "buckets 8 moments 4", ""},
		{[]string{"simulate", "accuracy", "-abusive", "0.01"}, 2, "", "-abusive: -population zipf does not use it"},
		{[]string{"help"}, 0, "simulate", ""},
	}
	for _, tt := range tests {
		tt.check(t)
	}
	for _, f := range []string{svg, png} {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("chart %s not written: %v", f, err)
		}
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	files := map[string]string{
		good: "domain: shop\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      unit: second\n      requests_per_unit: 10\n",
		bad:  "domain: shop\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: second\n      requets_per_unit: 5\n",
	}
	for name, body := range files {
		writeFile(t, name, body)
	}
	golden := filepath.Join("..", "..", "config", "testdata", "valid")
	tests := []runCase{
		{[]string{"check", good}, 0, "domain shop (" + good + ")\n  remote_address: fixed_window 10/1s\n", ""},
		{[]string{"check", golden}, 0, "domain sql_pool", ""},
		{[]string{"check", bad}, 1, "", bad + `:6:7: config: unknown key "requets_per_unit" in rate_limit`},
		{[]string{"check", dir}, 1, "", bad + ":6:7: "},
		{[]string{"check", filepath.Join(dir, "nope.yaml")}, 1, "", "nope.yaml: config: cannot read"},
		{[]string{"check"}, 2, "", "give the config's PATH"},
		{[]string{"check", good, bad}, 2, "", `unexpected argument "` + bad + `"`},
		{[]string{"check", "-h"}, 0, "Usage: sluice check", ""},
		{[]string{"help"}, 0, "check", ""},
	}
	for _, tt := range tests {
		if code, out := tt.check(t); code == 1 && out != "" {
			t.Errorf("run(%q) failed but printed to stdout: %q", tt.args, out)
		}
	}
}

// The command line refuses what it does not understand and helps when
// asked: a stray argument is an error (and does not silently drop the
// flags after it), -h prints the flags and an example on stdout with
// status 0, and `sluice help CMD` prints that command's help.
func TestCommandLineHelpAndStrayArguments(t *testing.T) {
	tests := []runCase{
		{[]string{"serve", "CONFIG", "-http-addr", "127.0.0.1:0"}, 2, "", `unexpected argument "CONFIG"`},
		{[]string{"proxy", "-upstream", "http://127.0.0.1:1", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"simulate", "-pattern", "steady", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"serve", "-h"}, 0, "-http-addr", ""},
		{[]string{"serve", "-help"}, 0, "Example", ""},
		{[]string{"proxy", "-h"}, 0, "-upstream", ""},
		{[]string{"proxy", "--help"}, 0, "Example", ""},
		{[]string{"check", "-h"}, 0, "Usage: sluice check", ""},
		{[]string{"simulate", "-h"}, 0, "-pattern", ""},
		{[]string{"help", "serve"}, 0, "Usage: sluice serve", ""},
		{[]string{"help", "proxy"}, 0, "Usage: sluice proxy", ""},
		{[]string{"help", "check"}, 0, "Usage: sluice check", ""},
		{[]string{"help", "simulate"}, 0, "Usage: sluice simulate", ""},
		{[]string{"help", "bogus"}, 2, "", `unknown command "bogus"`},
		{[]string{"serve", "-no-such-flag"}, 2, "", "sluice serve -h"},
	}
	for _, tt := range tests {
		tt.check(t)
	}
}

// One spelling of the header mode across commands, draft-11 (the proxy's
// file says so too); serve's old draft11 still works, with a warning.
func TestServeHeadersOldSpellingWarns(t *testing.T) {
	s := launch(t, "-headers", "draft11")
	resp, err := http.Post(s.url+"/json", "application/json", strings.NewReader(`{"domain":"example","descriptors":[{"entries":[{"key":"user","value":"carol"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("RateLimit-Policy") == "" {
		t.Errorf("-headers draft11: no RateLimit-Policy header")
	}
	if !strings.Contains(s.stderr.String(), "old spelling of draft-11") {
		t.Errorf("no warning for draft11: %s", s.stderr.String())
	}
	var out, errb bytes.Buffer
	run([]string{"serve", "-h"}, &out, &errb)
	if !strings.Contains(out.String(), "off, legacy or draft-11 (default: SLUICE_HEADERS;") || !strings.Contains(out.String(), `draft-11) (default "draft-11")`) {
		t.Errorf("serve -h does not spell draft-11: %s", out.String())
	}
}

// Run under envoyproxy/ratelimit's name (the image's /bin/ratelimit, which
// Envoy Gateway's Deployment runs with no argument), the binary is `sluice
// serve`; under any other name, the arguments are the command line.
func TestInvokedAsRatelimitServes(t *testing.T) {
	for _, c := range []struct {
		argv, want []string
	}{
		{[]string{"/bin/ratelimit"}, []string{"serve"}},
		{[]string{"ratelimit", "-config", "x"}, []string{"serve", "-config", "x"}},
		{[]string{"/usr/local/bin/sluice"}, []string{}},
		{[]string{"/usr/local/bin/sluice", "serve"}, []string{"serve"}},
		{[]string{"/opt/ratelimit/sluice", "version"}, []string{"version"}},
		{nil, nil},
	} {
		if got := commandLine(c.argv); !slices.Equal(got, c.want) {
			t.Errorf("commandLine(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
}
