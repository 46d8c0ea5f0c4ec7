package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// post POSTs body to /json and returns the status code.
func post(t *testing.T, url, body string) int {
	t.Helper()
	code, err := status(http.DefaultClient, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// The newcomer's first run: no flags, the built-in example, a 200 and then
// a 429 as the printed curl line promises.
func TestServeBuiltInExample(t *testing.T) {
	url := launch(t).url
	body := `{"domain":"example","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`
	var codes []int
	for range 4 {
		codes = append(codes, post(t, url, body))
	}
	if want := []int{200, 200, 200, 429}; !slices.Equal(codes, want) {
		t.Fatalf("codes %v, want %v", codes, want)
	}
	if resp, err := http.Get(url + "/healthcheck"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthcheck: %v %v", resp, err)
	}
}

// A config file, and SIGHUP reloading it; a broken config keeps the running
// one.
func TestServeReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rl.yaml")
	write := func(n int) {
		cfg := "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: " + string(rune('0'+n)) + "\n"
		writeFile(t, path, cfg)
	}
	write(1)
	s := launch(t, "-config", path)
	url, stderr := s.url, s.stderr
	req := func(v string) int {
		return post(t, url, `{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"`+v+`"}]}]}`)
	}
	if a, b := req("x"), req("x"); a != 200 || b != 429 {
		t.Fatalf("1 per hour: %d then %d", a, b)
	}
	write(5)
	reload := func(want string) {
		syscall.Kill(os.Getpid(), syscall.SIGHUP)
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(stderr.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q after SIGHUP: %s", want, stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	reload("reloaded")
	if got := req("y"); got != 200 {
		t.Fatalf("after reload to 5 per hour, a new key: %d", got)
	}
	writeFile(t, path, "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n")
	reload("keeping the running config")
	codes := []int{}
	for range 5 {
		codes = append(codes, req("z"))
	}
	if want := []int{200, 200, 200, 200, 200}; !slices.Equal(codes, want) {
		t.Fatalf("after a bad reload the 5/hour config should still run: %v", codes)
	}
}

func TestServeBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(path, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requets_per_unit: 1\n"), 0o644)
	var out, errb bytes.Buffer
	code := runServe(context.Background(), []string{"-config", path, "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "bad.yaml:5") {
		t.Fatalf("bad config: exit %d, stderr %q; want 1 and the file:line", code, errb.String())
	}
}
