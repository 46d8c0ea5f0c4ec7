package daemon

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/daemontest"
)

// A socket file left by a process that died (nothing listens on it) is
// replaced: envoyproxy/ratelimit's GRPC_UDS would fail to start with
// "address already in use" until someone removed it.
func TestListenUnixReplacesAStaleSocket(t *testing.T) {
	path := filepath.Join(daemontest.ShortTempDir(t), "grpc.sock")
	old, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	old.(*net.UnixListener).SetUnlinkOnClose(false) // as a killed process leaves it
	old.Close()
	ln, err := listenUnix(path)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial the new socket: %v", err)
	}
	c.Close()
}

// A socket another process still listens on is not taken from it, and a
// path that is not a socket (a regular file, a directory) is never
// removed.
func TestListenUnixRemovesOnlyStaleSockets(t *testing.T) {
	dir := daemontest.ShortTempDir(t)
	live := filepath.Join(dir, "live.sock")
	other, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if ln, err := listenUnix(live); err == nil {
		ln.Close()
		t.Error("took the socket of a live listener")
	}
	if c, err := net.Dial("unix", live); err != nil {
		t.Errorf("the live listener's socket is gone: %v", err)
	} else {
		c.Close()
	}

	file := filepath.Join(dir, "data")
	daemontest.WriteFile(t, file, "keep me")
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, sub} {
		if ln, err := listenUnix(p); err == nil {
			ln.Close()
			t.Errorf("%s: listened over a non-socket", p)
		}
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: removed", p)
		}
	}
}

// The socket is removed when the listener closes, so that a clean stop
// leaves nothing behind.
func TestListenUnixRemovesItsSocketOnClose(t *testing.T) {
	path := filepath.Join(daemontest.ShortTempDir(t), "grpc.sock")
	ln, err := listenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Close, the socket file: %v", err)
	}
}
