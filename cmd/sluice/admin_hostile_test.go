//go:build unix

package main

// Hostile clients of the admin listener, against serve and the proxy as
// processes of their own under a small open-file limit.

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// startAdminChild runs `sluice args` in a child process limited to 256
// open files and returns its public URL and its admin listener's address,
// which it reads from the child's output with public and admin.
func startAdminChild(t *testing.T, public, admin *regexp.Regexp, args ...string) (publicURL, adminAddr string) {
	t.Helper()
	c, lines := startChild(t, "sh", append([]string{"-c", `ulimit -n 256; exec "$0" "$@"`, testBinary(t)}, args...)...)
	var out strings.Builder
	timeout := time.After(10 * time.Second)
	for publicURL == "" || adminAddr == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				<-c.exited
				t.Fatalf("exited (%v) before serving: %s", c.exitErr, c.stderr.String())
			}
			out.WriteString(l + "\n")
		case <-time.After(50 * time.Millisecond): // the admin address may be on stderr
		case <-timeout:
			t.Fatalf("printed no addresses: %s\n%s", out.String(), c.stderr.String())
		}
		all := out.String() + c.stderr.String()
		if m := public.FindStringSubmatch(all); m != nil {
			publicURL = m[1]
		}
		if m := admin.FindStringSubmatch(all); m != nil {
			adminAddr = m[1]
		}
	}
	drain(lines)
	return publicURL, adminAddr
}

// holdIdle opens n connections to addr, each sending one keep-alive
// request for path and then holding the connection open without a word;
// they are closed when the test ends.
func holdIdle(t *testing.T, addr, path string, n int) {
	t.Helper()
	var (
		conns []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	})
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { io.Copy(io.Discard, c) }) // reads the answer, then waits
	}
}

// Unauthenticated keep-alive connections held open on the admin port
// cannot take the descriptors of the public listener: with 300 of them
// against a process limited to 256 open files, the public port still
// answers at once (the admin listener holds at most its share,
// -admin-max-conns), for serve and for the proxy alike.
func TestAdminIdleConnectionsDoNotStarveThePublicListener(t *testing.T) {
	check := func(t *testing.T, publicURL, adminAddr string) {
		holdIdle(t, adminAddr, "/page", 300)
		client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get(publicURL + "/healthcheck")
		if err != nil {
			t.Fatalf("the public listener did not answer with 300 connections idle on the admin port: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the public listener: %d, want 200", resp.StatusCode)
		}
	}
	t.Run("serve", func(t *testing.T) {
		t.Parallel()
		tokenFile := filepath.Join(t.TempDir(), "token")
		writeFile(t, tokenFile, "a-long-enough-admin-token\n")
		pub, adm := startAdminChild(t, bannerHTTP, regexp.MustCompile(`page=http://(127\.0\.0\.1:\d+)/page`),
			"serve", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-admin-token-file", tokenFile)
		check(t, pub, adm)
	})
	t.Run("proxy", func(t *testing.T) {
		t.Parallel()
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "OK\n") }))
		t.Cleanup(up.Close)
		pub, adm := startAdminChild(t, regexp.MustCompile(`listening  (http://\S+)`), regexp.MustCompile(`admin      http://(\S+)`),
			"proxy", "-listen", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-upstream", up.URL)
		check(t, pub, adm)
	})
}

// The admin listener cuts slow and idle clients as the public listeners
// do: a client that never finishes its request headers is disconnected
// after the header timeout, and a keep-alive connection left idle after
// its answer after the idle timeout (serve's -http-read-header-timeout
// and -http-idle-timeout, the proxy's -client-header-timeout and
// -keepalive-timeout), for serve and for the proxy alike.
func TestAdminListenerCutsSlowAndIdleClients(t *testing.T) {
	const d = 300 * time.Millisecond
	check := func(t *testing.T, adminAddr string) {
		for _, c := range []struct{ name, send string }{
			{"headers never finished", "GET /page HTTP/1.1\r\nHost: x\r\nX-Slow: "},
			{"idle after an answer", "GET /page HTTP/1.1\r\nHost: x\r\n\r\n"},
		} {
			conn, err := net.Dial("tcp", adminAddr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(conn, c.send); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			conn.SetReadDeadline(start.Add(5 * time.Second))
			_, err = io.Copy(io.Discard, conn) // until the server closes
			conn.Close()
			if err != nil {
				t.Errorf("%s: the admin listener kept the connection open 5 s (timeouts %v): %v", c.name, d, err)
			}
		}
	}
	t.Run("serve", func(t *testing.T) {
		t.Parallel()
		tokenFile := filepath.Join(t.TempDir(), "token")
		writeFile(t, tokenFile, "a-long-enough-admin-token\n")
		_, adm := startAdminChild(t, bannerHTTP, regexp.MustCompile(`page=http://(127\.0\.0\.1:\d+)/page`),
			"serve", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-admin-token-file", tokenFile,
			"-http-read-header-timeout", d.String(), "-http-idle-timeout", d.String())
		check(t, adm)
	})
	t.Run("proxy", func(t *testing.T) {
		t.Parallel()
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "OK\n") }))
		t.Cleanup(up.Close)
		_, adm := startAdminChild(t, regexp.MustCompile(`listening  (http://\S+)`), regexp.MustCompile(`admin      http://(\S+)`),
			"proxy", "-listen", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-upstream", up.URL,
			"-client-header-timeout", d.String(), "-keepalive-timeout", d.String())
		check(t, adm)
	})
}
