package daemon

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/daemontest"
	"github.com/sluicehq/sluice/internal/envflag"
)

// GRPC_MAX_CONNECTION_AGE and _GRACE are envoyproxy/ratelimit's, with its
// defaults (24h, 1h), in its duration form or whole seconds;
// GRPC_MAX_CONNECTION_IDLE is Sluice's (3m: envoyproxy/ratelimit leaves
// gRPC's default, never).
func TestGRPCConnectionAgeAndIdleFromEnv(t *testing.T) {
	var o ListenerOptions
	o.Flags(newTestFlagSet(), new(envflag.Errs))
	if o.grpcAge != 24*time.Hour || o.grpcAgeGrace != time.Hour || o.grpcIdle != 3*time.Minute {
		t.Errorf("defaults: age %v grace %v idle %v", o.grpcAge, o.grpcAgeGrace, o.grpcIdle)
	}
	t.Setenv("GRPC_MAX_CONNECTION_AGE", "2h")
	t.Setenv("GRPC_MAX_CONNECTION_AGE_GRACE", "30")
	t.Setenv("GRPC_MAX_CONNECTION_IDLE", "90s")
	var errs envflag.Errs
	o.Flags(newTestFlagSet(), &errs)
	if len(errs) > 0 || o.grpcAge != 2*time.Hour || o.grpcAgeGrace != 30*time.Second || o.grpcIdle != 90*time.Second {
		t.Errorf("from the environment: age %v grace %v idle %v, errors %v", o.grpcAge, o.grpcAgeGrace, o.grpcIdle, errs)
	}
}

// A connection older than the age limit, or without calls for the idle
// timeout, gets a GOAWAY: the client's channel leaves READY by itself.
func TestGRPCConnectionAgeAndIdleCloseConnections(t *testing.T) {
	for name, set := range map[string]func(o *ListenerOptions){
		"age":  func(o *ListenerOptions) { o.grpcAge, o.grpcAgeGrace = 300*time.Millisecond, 300*time.Millisecond },
		"idle": func(o *ListenerOptions) { o.grpcIdle = 300 * time.Millisecond },
	} {
		t.Run(name, func(t *testing.T) {
			var o ListenerOptions
			o.Flags(newTestFlagSet(), new(envflag.Errs))
			set(&o)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			s := grpc.NewServer(o.GRPCOptions()...)
			healthpb.RegisterHealthServer(s, health.NewServer())
			go s.Serve(ln)
			defer s.Stop()
			conn := daemontest.Dial(t, ln.Addr().String(), insecure.NewCredentials())
			defer conn.Close()
			if err := daemontest.CheckHealth(conn, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for st := conn.GetState(); st == connectivity.Ready; st = conn.GetState() {
				if !conn.WaitForStateChange(ctx, st) {
					t.Fatalf("still %v after 10s: no GOAWAY", st)
				}
			}
		})
	}
}
