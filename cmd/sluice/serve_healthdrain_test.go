package main

import (
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/daemontest"
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
// as the test runs and at most 20 s (longer than serve's grace).
func watchHealth(t *testing.T, conn *grpc.ClientConn, service string) healthpb.Health_WatchClient {
	return daemontest.WatchHealth(t, conn, service, 2*daemon.DrainGrace)
}

var recvStatus = daemontest.RecvStatus
