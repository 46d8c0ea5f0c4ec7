package service

import (
	"runtime"

	"google.golang.org/grpc"
)

// MaxConcurrentStreams is the most calls one gRPC connection may have open
// at once on the server of GRPCServerOptions.
const MaxConcurrentStreams = 128

// GRPCServerOptions returns the options `sluice serve` builds its gRPC
// server with, for a program that registers the Service (RegisterGRPC) on
// a grpc.Server of its own: pass them to grpc.NewServer, with any options
// of its own (credentials, interceptors, keepalive).
//
// They are chosen for the CPU cost of one ShouldRateLimit call, most of
// which is gRPC's own: grpc.NumStreamWorkers with 32 workers per
// GOMAXPROCS, so that calls run on long-lived goroutines whose stacks have
// already grown, instead of on a new goroutine per call (a call that finds
// every worker busy gets its own goroutine, as without the option). This
// saved CPU per call at 16 and 64 concurrent calls (the figures: see
// BENCHMARKS.md, section "Figures moved from code comments"); far more idle
// workers than concurrent calls cost CPU instead.
//
// The server has a codec of its own, not registered for the process: it
// decodes a RateLimitRequest of the shape Envoy sends without reflection,
// in few allocations, and encodes responses with go-control-plane's
// generated vtprotobuf code when the binary is built with `-tags
// vtprotobuf` (the Dockerfile does not set it yet); everything else goes
// to gRPC's proto codec. Together 3% fewer instructions per call on a
// do-nothing server (BENCHMARKS.md, section "RLS: the floor, the server's
// codec, Redis allocations").
// Flow-control windows and buffer sizes are left at gRPC's defaults: the
// messages are small, static windows made no measurable difference, and
// shared write buffers cost instructions per call (they save memory on
// idle connections only).
//
// They also bound what one client may hold: a request message of at most
// MaxRequestBytes (ResourceExhausted past it), and at most
// MaxConcurrentStreams calls at once per connection (as NGINX's
// http2_max_concurrent_streams, 128), so that one connection cannot hold
// thousands of calls and their messages in memory.
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.NumStreamWorkers(uint32(32 * runtime.GOMAXPROCS(0))),
		grpc.MaxRecvMsgSize(MaxRequestBytes),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.ForceServerCodecV2(newRLSCodec()),
	}
}
