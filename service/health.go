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

// Check answers as health.Server does, except NOT_SERVING for a known
// service while Config.Healthy reports false.
func (h healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	resp, err := h.Server.Check(ctx, req)
	if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING && !h.s.healthy() {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return resp, err
}
