package main

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/sluicehq/sluice/internal/daemon"
	"google.golang.org/grpc/credentials/insecure"
)

// A real SIGTERM stops a serve process that listens on a Unix socket
// (GRPC_UDS) and has a debug listener, within its grace period, although
// a 60-second CPU profile is being taken on the debug listener and a gRPC
// client holds a connection on the socket; it exits 0 and leaves no
// socket file. A profile in flight would otherwise hold the debug
// listener's drain until the grace ran out.
func TestServeStopsOnSIGTERMWithUDSAndDebugListenerBusy(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "rls.sock")
	cfg := filepath.Join(t.TempDir(), "rl.yaml")
	writeFile(t, cfg, telemetryConfig)
	t.Setenv("GRPC_UDS", sock) // the child inherits it
	p := startProcess(t, "true", "serve", "-config", cfg, "-http-addr", "127.0.0.1:0", "-debug-addr", "127.0.0.1:0")
	debug, _, _ := strings.Cut(strings.TrimPrefix(p.debug, "http://"), " ")
	if p.grpc != "unix:"+sock {
		t.Fatalf("gRPC target %q, want unix:%s", p.grpc, sock)
	}
	if code, err := shouldRateLimit(t, p.grpc, insecure.NewCredentials()); err != nil || code != pb.RateLimitResponse_OK {
		t.Fatalf("ShouldRateLimit over the socket: %v %v", code, err)
	}

	profile := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + debug + "/debug/pprof/profile?seconds=60")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		profile <- err
	}()
	conn := dial(t, p.grpc, insecure.NewCredentials())
	defer conn.Close()
	if err := checkHealth(conn, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the profile is being taken", func() bool {
		_, body := get(t, "http://"+debug+"/debug/pprof/goroutine?debug=2")
		return strings.Contains(body, "net/http/pprof.Profile(")
	})

	start := time.Now()
	p.stop(t, daemon.DrainGrace+5*time.Second)
	if took := time.Since(start); took >= daemon.DrainGrace {
		t.Errorf("stopping took %v, the whole %v grace: the profile held the drain", took, daemon.DrainGrace)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket file after the stop: %v", err)
	}
	select {
	case <-profile:
	case <-time.After(5 * time.Second):
		t.Error("the profile request did not end with the process")
	}
}
