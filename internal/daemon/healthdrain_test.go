package daemon

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/daemontest"
)

// watchers starts a gRPC server with the health service h behind w's
// interceptor and returns a Watch stream on it for each service name.
func watchers(t *testing.T, h *health.Server, w *WatchDrain, services ...string) []healthpb.Health_WatchClient {
	t.Helper()
	conn := healthConn(t, h, w)
	var out []healthpb.Health_WatchClient
	for _, name := range services {
		out = append(out, watchHealth(t, conn, name))
	}
	return out
}

// watchHealth opens a health Watch stream of service on conn, for as long
// as the test runs and at most 20 s (longer than serve's grace).
func watchHealth(t *testing.T, conn *grpc.ClientConn, service string) healthpb.Health_WatchClient {
	return daemontest.WatchHealth(t, conn, service, 2*DrainGrace)
}

var recvStatus = daemontest.RecvStatus

// The drain ends a Watch stream only once its watcher has been told a
// status other than SERVING, whatever comes first: a watcher already told
// NOT_SERVING or SERVICE_UNKNOWN is let go as the drain starts; one told
// SERVING is let go right after it is told NOT_SERVING, never before (it
// would otherwise never learn to leave). Each ends with Unavailable.
func TestWatchDrainEndsEachStreamAfterANotServingStatus(t *testing.T) {
	h := health.NewServer()
	h.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	w := &WatchDrain{}
	s := watchers(t, h, w, "", "down", "unknown")
	recvStatus(t, s[0], healthpb.HealthCheckResponse_SERVING)
	recvStatus(t, s[1], healthpb.HealthCheckResponse_NOT_SERVING)
	recvStatus(t, s[2], healthpb.HealthCheckResponse_SERVICE_UNKNOWN)

	w.Drain()
	for i, name := range []string{"down", "unknown"} {
		if _, err := s[i+1].Recv(); grpcstatus.Code(err) != codes.Unavailable {
			t.Errorf("watcher of %q after the drain began: %v; want the stream ended with Unavailable", name, err)
		}
	}
	h.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	recvStatus(t, s[0], healthpb.HealthCheckResponse_NOT_SERVING)
	if _, err := s[0].Recv(); grpcstatus.Code(err) != codes.Unavailable {
		t.Errorf("watcher of \"\" after NOT_SERVING: %v; want the stream ended with Unavailable", err)
	}
}

// A Watch that begins once the drain has begun is told the status of the
// drain (NOT_SERVING, or SERVICE_UNKNOWN for a name the server does not
// know), then its stream ends with Unavailable: it neither holds the drain
// nor is ended before its watcher learns to leave.
func TestWatchDrainEndsAWatchBegunAfterTheDrain(t *testing.T) {
	h := health.NewServer()
	w := &WatchDrain{}
	h.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	w.Drain()
	s := watchers(t, h, w, "", "unknown")
	recvStatus(t, s[0], healthpb.HealthCheckResponse_NOT_SERVING)
	recvStatus(t, s[1], healthpb.HealthCheckResponse_SERVICE_UNKNOWN)
	for i, name := range []string{"", "unknown"} {
		if _, err := s[i].Recv(); grpcstatus.Code(err) != codes.Unavailable {
			t.Errorf("watcher of %q begun after the drain: %v; want the stream ended with Unavailable", name, err)
		}
	}
}

// Watches that begin while the drain begins, in serve's order (NOT_SERVING
// set, then the drain), each end with Unavailable, and only after their
// watcher was last told a status other than SERVING, whichever side of
// the drain each began on.
func TestWatchDrainRacingNewWatchesEachEndAfterNotServing(t *testing.T) {
	h := health.NewServer()
	w := &WatchDrain{}
	conn := healthConn(t, h, w)
	ctx, cancel := context.WithTimeout(t.Context(), 2*DrainGrace)
	defer cancel()

	const watches = 40
	var wg sync.WaitGroup
	for i := range watches {
		wg.Go(func() {
			s, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Errorf("watch %d: %v", i, err)
				return
			}
			last := healthpb.HealthCheckResponse_UNKNOWN
			for {
				r, err := s.Recv()
				if err != nil {
					if grpcstatus.Code(err) != codes.Unavailable || last != healthpb.HealthCheckResponse_NOT_SERVING {
						t.Errorf("watch %d ended with %v after it was told %v; want Unavailable after NOT_SERVING", i, err, last)
					}
					return
				}
				last = r.GetStatus()
			}
		})
		if i == watches/2 {
			h.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
			w.Drain()
		}
	}
	wg.Wait()
}

// healthConn starts a gRPC server with the health service h behind w's
// interceptor and returns a connection to it; both end with the test.
func healthConn(t *testing.T, h *health.Server, w *WatchDrain) *grpc.ClientConn {
	t.Helper()
	gs := grpc.NewServer(grpc.ChainStreamInterceptor(w.Intercept))
	healthpb.RegisterHealthServer(gs, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn := daemontest.Dial(t, ln.Addr().String(), insecure.NewCredentials())
	t.Cleanup(func() { conn.Close() })
	return conn
}
