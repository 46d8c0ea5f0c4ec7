package service_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/service"
)

// Config.Healthy turns both health checks, GET /healthcheck and gRPC's
// Check, to NOT_SERVING while it reports false, and back.
func TestHealthFollowsConfigHealthy(t *testing.T) {
	var ok atomic.Bool
	h := start(t, t0, service.Config{Rules: mongo(5, 0), Healthy: ok.Load})
	check := func() (int, healthpb.HealthCheckResponse_ServingStatus) {
		resp, err := http.Get(h.http.URL + "/healthcheck")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		g, err := healthpb.NewHealthClient(h.conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: service.HealthServiceName})
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, g.GetStatus()
	}
	if code, st := check(); code != 503 || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("unhealthy: %d %v", code, st)
	}
	ok.Store(true)
	if code, st := check(); code != 200 || st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("healthy: %d %v", code, st)
	}
}

// The gRPC health service's Watch follows Config.Healthy through New and
// RecheckHealth, under "" and the "ratelimit" name: NOT_SERVING from the
// start while it reports false, SERVING once it reports true and
// RecheckHealth is called, NOT_SERVING again after. Before, Watch
// streamed SERVING from New on whatever Config.Healthy said.
func TestHealthWatchFollowsRecheckHealth(t *testing.T) {
	var ok atomic.Bool
	h := start(t, t0, service.Config{Rules: mongo(5, 0), Healthy: ok.Load})
	var watches []healthpb.Health_WatchClient
	for _, name := range []string{"", service.LegacyHealthServiceName} {
		w, err := healthpb.NewHealthClient(h.conn).Watch(t.Context(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			t.Fatal(err)
		}
		watches = append(watches, w)
	}
	expect := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		for _, w := range watches {
			if r, err := w.Recv(); err != nil || r.GetStatus() != want {
				t.Fatalf("Watch: %v, %v; want %v", r.GetStatus(), err, want)
			}
		}
	}
	expect(healthpb.HealthCheckResponse_NOT_SERVING)
	ok.Store(true)
	h.svc.RecheckHealth()
	expect(healthpb.HealthCheckResponse_SERVING)
	ok.Store(false)
	h.svc.RecheckHealth()
	expect(healthpb.HealthCheckResponse_NOT_SERVING)
}
