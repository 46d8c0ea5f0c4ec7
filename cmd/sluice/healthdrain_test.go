package main

import (
	"context"
	"syscall"
	"testing"
	"time"

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
	ctx, cancel := context.WithTimeout(t.Context(), drainGrace+5*time.Second)
	defer cancel()
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := stream.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first status %v, %v; want SERVING", r.GetStatus(), err)
	}

	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r, err := stream.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("status after SIGTERM %v, %v; want NOT_SERVING", r.GetStatus(), err)
	}
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
