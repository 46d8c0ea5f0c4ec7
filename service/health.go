package service

import (
	"context"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthy reports what the health checks report: serving (SetServing) and,
// when Config.Healthy is set, healthy by it.
func (s *Service) healthy() bool {
	return s.serving.Load() && (s.healthFn == nil || s.healthFn())
}

// StoreAvailable reports whether the store is being asked: false while the
// circuit breaker of Config.Failure is open (the store failed and the
// rules' failure modes answer); always true without Config.Failure.
func (s *Service) StoreAvailable() bool {
	return s.fb == nil || s.fb.group.Available()
}

// StoreOpenPartitions returns how many partitions of the breaker of
// Config.Failure are open (the keys of each answered by their rules'
// failure modes, see FailurePolicy's Partitions); 0 without
// Config.Failure.
func (s *Service) StoreOpenPartitions() int {
	if s.fb == nil {
		return 0
	}
	return s.fb.group.OpenPartitions()
}

// healthServer is the gRPC health service: the standard one (SetServing
// sets its statuses, which Watch streams), with Check also consulting
// Config.Healthy at each call.
type healthServer struct {
	*health.Server
	s *Service
}

// Check answers as health.Server does for an unknown service; for a known
// one, SERVING or NOT_SERVING as SetServing and Config.Healthy are at the
// call, whether or not RecheckHealth has seen a change yet.
func (h healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	resp, err := h.Server.Check(ctx, req)
	if err != nil {
		return resp, err
	}
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if h.s.healthy() {
		st = healthpb.HealthCheckResponse_SERVING
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}
