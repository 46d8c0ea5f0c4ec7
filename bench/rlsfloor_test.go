package bench

import (
	"context"
	"runtime"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/service"
)

// rlsFloor is the floor of the RLS rows: a rate limit service whose
// ShouldRateLimit answers every request with the same OK response, without
// reading it. Whatever a grpc-go RLS costs beyond this row is its own work.
type rlsFloor struct {
	pb.UnimplementedRateLimitServiceServer
}

// rlsFloorResponse is rlsFloor's answer: OK, nothing else. Shared by every
// call (marshalling only reads it).
var rlsFloorResponse = &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK}

// ShouldRateLimit answers OK.
func (rlsFloor) ShouldRateLimit(context.Context, *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	return rlsFloorResponse, nil
}

// rlsOptionsBefore are service.GRPCServerOptions as they were before the
// server had a codec of its own (gRPC's proto codec): the A/B of the codec
// within one run.
func rlsOptionsBefore() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.NumStreamWorkers(uint32(32 * runtime.GOMAXPROCS(0))),
		grpc.MaxRecvMsgSize(service.MaxRequestBytes),
		grpc.MaxConcurrentStreams(service.MaxConcurrentStreams),
	}
}

// rlsOptionsSmallBuffers are service.GRPCServerOptions with read and write
// buffers of 4 KiB per connection instead of gRPC's 32 KiB.
func rlsOptionsSmallBuffers() []grpc.ServerOption {
	return append(service.GRPCServerOptions(), grpc.ReadBufferSize(4<<10), grpc.WriteBufferSize(4<<10))
}

// BenchmarkRLSCall is one ShouldRateLimit call at a time, client and
// server in this process, on the floor and on the service with the memory
// store (rules of rlsYAML, 10,000 keys), for each set of server options:
// the instructions (bench/callgrind.sh) and allocations of one call, both
// ends together, which unlike ns/op do not depend on the machine's load.
//
//	cd bench && go test -tags vtprotobuf -c -o rls.test . &&
//	  ./callgrind.sh ./rls.test 'RLSCall/target=floor/opts=serve$' 20000 60000
func BenchmarkRLSCall(b *testing.B) {
	optSets := []struct {
		name string
		opts func() []grpc.ServerOption
	}{
		{"serve", service.GRPCServerOptions},
		{"before", rlsOptionsBefore},
		{"buffers-4k", rlsOptionsSmallBuffers},
	}
	values := rlsValues()
	for _, target := range []rlsTarget{{name: "floor", floor: true}, {name: "memstore", store: openRLSMemstore}} {
		for _, o := range optSets {
			b.Run("target="+target.name+"/opts="+o.name, func(b *testing.B) {
				t := target
				t.opts = o.opts
				decide, stop, err := startRLS(t, rlsRules(b), "")
				if err != nil {
					b.Fatal(err)
				}
				defer stop()
				ctx := context.Background()
				var v [1]string
				for i := range 1000 { // warm up: connection, windows, pools
					v[0] = values[i%len(values)]
					if _, err := decide(ctx, &v); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					v[0] = values[i%len(values)]
					i++
					if ok, err := decide(ctx, &v); err != nil || !ok {
						b.Fatalf("%v, %v", ok, err)
					}
				}
			})
		}
	}
}

// rlsRules are the service's rules of rlsYAML.
func rlsRules(b *testing.B) service.Rules { return configtest.Parse(b, rlsYAML) }
