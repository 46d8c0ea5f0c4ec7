// Package xdstest runs a real xDS server in the test process, with
// github.com/envoyproxy/go-control-plane's server and snapshot cache, that
// serves envoyproxy/ratelimit's RateLimitConfig resources over ADS and
// records every request a client sends (ACKs and NACKs included); and it
// makes the certificates of a TLS test.
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package xdstest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cache "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resource "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	server "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// Server is an xDS server on a loopback port. Its methods are safe for
// concurrent use.
type Server struct {
	// Addr is the address it listens on.
	Addr string
	// Cache is the snapshot cache it serves from (ADS mode, keyed by node
	// id).
	Cache cache.SnapshotCache

	gs   *grpc.Server
	done chan struct{}

	mu      sync.Mutex
	reqs    []Request
	md      map[int64]metadata.MD // of each stream
	changed chan struct{}         // closed and replaced on each request
}

// Request is one DiscoveryRequest the server received, with the gRPC
// metadata of its stream.
type Request struct {
	*discovery.DiscoveryRequest
	Metadata metadata.MD
}

// Start starts a server on addr ("127.0.0.1:0" for any port; a fixed one
// to restart a stopped server where it was), with TLS when creds is not
// nil. t.Cleanup stops it.
func Start(t testing.TB, addr string, creds credentials.TransportCredentials) *Server {
	t.Helper()
	var ln net.Listener
	var err error
	// A port just freed by Stop can take a moment to be free again.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if ln, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling the port with a deadline
	}
	if err != nil {
		t.Fatalf("xdstest: listen %s: %v", addr, err)
	}
	s := &Server{Addr: ln.Addr().String(), Cache: cache.NewSnapshotCache(true, cache.IDHash{}, nil),
		done: make(chan struct{}), changed: make(chan struct{}), md: map[int64]metadata.MD{}}
	cb := server.CallbackFuncs{
		StreamOpenFunc: func(ctx context.Context, stream int64, _ string) error {
			md, _ := metadata.FromIncomingContext(ctx)
			s.mu.Lock()
			s.md[stream] = md
			s.mu.Unlock()
			return nil
		},
		StreamRequestFunc: func(stream int64, r *discovery.DiscoveryRequest) error {
			s.record(stream, Request{DiscoveryRequest: r})
			return nil
		},
	}
	var opts []grpc.ServerOption
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	s.gs = grpc.NewServer(opts...)
	discovery.RegisterAggregatedDiscoveryServiceServer(s.gs, server.NewServer(context.Background(), s.Cache, cb))
	go func() { s.gs.Serve(ln); close(s.done) }()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) record(stream int64, r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Metadata = s.md[stream]
	s.reqs = append(s.reqs, r)
	close(s.changed)
	s.changed = make(chan struct{})
}

// Stop stops the server at once, cutting its streams; it is idempotent.
func (s *Server) Stop() {
	s.gs.Stop()
	<-s.done
}

// Push serves resources as version to the node nodeID; the server sends
// them to its subscribed clients.
func (s *Server) Push(t testing.TB, nodeID, version string, resources ...*rlconf.RateLimitConfig) {
	t.Helper()
	rs := make([]cachetypes.Resource, len(resources))
	for i, r := range resources {
		rs[i] = r
	}
	snap, err := cache.NewSnapshot(version, map[resource.Type][]cachetypes.Resource{resource.RateLimitConfigType: rs})
	if err != nil {
		t.Fatalf("xdstest: snapshot: %v", err)
	}
	if err := s.Cache.SetSnapshot(context.Background(), nodeID, snap); err != nil {
		t.Fatalf("xdstest: set snapshot: %v", err)
	}
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// WaitRequest waits until a request received at or after index from (an
// index into Requests) satisfies match, and returns it with its index;
// it fails t when ctx ends first.
func (s *Server) WaitRequest(ctx context.Context, t testing.TB, from int, match func(Request) bool) (Request, int) {
	t.Helper()
	for {
		s.mu.Lock()
		reqs, changed := s.reqs, s.changed
		s.mu.Unlock()
		for i := from; i < len(reqs); i++ {
			if match(reqs[i]) {
				return reqs[i], i
			}
		}
		if from < len(reqs) {
			from = len(reqs)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("xdstest: no matching request: %v (requests: %v)", ctx.Err(), s.Requests())
			return Request{}, -1
		}
	}
}

// IsACK reports whether r acknowledges version.
func IsACK(r Request, version string) bool {
	return r.GetErrorDetail() == nil && r.GetVersionInfo() == version && r.GetResponseNonce() != ""
}

// IsNACK reports whether r refuses a response.
func IsNACK(r Request) bool { return r.GetErrorDetail() != nil }
