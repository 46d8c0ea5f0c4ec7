package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/daemon"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"
)

// A gRPC health Watch stream does not hold serve's drain: on SIGTERM the
// watcher is told NOT_SERVING (so it learns to leave), then its stream
// ends, and the process exits well within the 10-second grace. Before, the
// stream stayed open until the grace ran out, since GracefulStop waits for
// every stream and a Watch never ends by itself.
func TestServeDrainEndsHealthWatchStreams(t *testing.T) {
	p := startProcess(t, "true", "serve", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0")
	conn := dial(t, p.grpc, insecure.NewCredentials())
	defer conn.Close()
	stream := watchHealth(t, conn, "")
	recvStatus(t, stream, healthpb.HealthCheckResponse_SERVING)

	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	recvStatus(t, stream, healthpb.HealthCheckResponse_NOT_SERVING)
	if r, err := stream.Recv(); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("after NOT_SERVING: %v, %v; want the stream ended with Unavailable", r.GetStatus(), err)
	}
	// A bound, far under the grace: what is measured is whether the
	// stream held the drain, not how fast serve stops.
	const bound = 5 * time.Second
	select {
	case <-p.exited:
		t.Logf("exited %v after SIGTERM", time.Since(start))
		if p.exitErr != nil {
			t.Errorf("exit after SIGTERM: %v: %s", p.exitErr, p.stderr.String())
		}
	case <-time.After(bound - time.Since(start)):
		t.Fatalf("still running %v after SIGTERM: the Watch stream held the drain: %s", bound, p.stderr.String())
	}
}

// watchHealth opens a health Watch stream of service on conn, for as long
// as the test runs and at most 20 s (longer than serve's grace), so that a
// stream that never ends fails the test instead of hanging it.
func watchHealth(t *testing.T, conn *grpc.ClientConn, service string) healthpb.Health_WatchClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*daemon.DrainGrace)
	t.Cleanup(cancel)
	s, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// recvStatus receives one status of s, failing the test unless it is
// want.
func recvStatus(t *testing.T, s healthpb.Health_WatchClient, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	if r, err := s.Recv(); err != nil || r.GetStatus() != want {
		t.Fatalf("status %v, %v; want %v", r.GetStatus(), err, want)
	}
}
