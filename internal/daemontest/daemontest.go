// Package daemontest holds the helpers that the tests of internal/daemon
// and of cmd/sluice (which runs serve and proxy) share: a gRPC client
// connection, health check and health watch, a server's TLS files, files
// written whole or by rename, a Unix socket's short directory, a silent
// logger, and polling for a condition.
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package daemontest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/testpki"
)

// Dial opens a gRPC client connection to target with creds, or fails the
// test; the caller closes it.
func Dial(t testing.TB, target string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// CheckHealth makes one gRPC health check on conn within timeout and
// returns its error.
func CheckHealth(conn *grpc.ClientConn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// WatchHealth opens a health Watch stream of service on conn, for as long
// as the test runs and at most within (twice a drain's grace, say), so
// that a stream that never ends fails the test instead of hanging it.
func WatchHealth(t testing.TB, conn *grpc.ClientConn, service string, within time.Duration) healthpb.Health_WatchClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	t.Cleanup(cancel)
	s, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// RecvStatus receives one status of s, failing the test unless it is
// want.
func RecvStatus(t testing.TB, s healthpb.Health_WatchClient, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	if r, err := s.Recv(); err != nil || r.GetStatus() != want {
		t.Fatalf("status %v, %v; want %v", r.GetStatus(), err, want)
	}
}

// TLSFiles writes a server's certificate and key, and a client CA if not
// nil, into dir, each whole by rename, and returns their paths (clientCA's
// "" when nil).
func TLSFiles(t testing.TB, dir string, server testpki.Leaf, clientCA *testpki.CA) (cert, key, ca string) {
	t.Helper()
	cert, key = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	WriteAtomic(t, cert, string(server.CertPEM))
	WriteAtomic(t, key, string(server.KeyPEM))
	if clientCA != nil {
		ca = filepath.Join(dir, "ca.crt")
		WriteAtomic(t, ca, string(clientCA.PEM))
	}
	return cert, key, ca
}

// Eventually polls cond every 10 ms until it holds, failing the test with
// what after 10 seconds.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WriteFile writes body to path (mode 0644), or fails the test.
func WriteFile(t testing.TB, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// WriteAtomic replaces path with body by a rename, as editors and
// Kubernetes do: a reader sees the old content or the new, never part.
func WriteAtomic(t testing.TB, path, body string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	WriteFile(t, tmp, body)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// ShortTempDir returns a new directory removed when the test ends, with a
// path short enough for a Unix socket (at most 104 bytes on some systems;
// t.TempDir's, which holds the test's name, may be longer).
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// QuietLogger returns a logger that writes nowhere.
func QuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
