package rlqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/config"
)

// ClientHeader is the gRPC metadata key by which an Envoy may name itself
// (Envoy's grpc_service initial_metadata). Streams with the same name are
// the same client: a reconnected Envoy takes over its own record in the
// store instead of counting twice until the old one expires.
const ClientHeader = "sluice-rlqs-client"

// Bounds on what one stream may make the server hold.
const (
	// MaxBuckets is the most buckets one stream may subscribe to at once.
	MaxBuckets = 1000
	// MaxPairBytes bounds each key and value of a bucket id, and the
	// domain.
	MaxPairBytes = 256
	maxClientID  = 128
	// storeTimeout bounds one store call.
	storeTimeout = 2 * time.Second
)

// Config configures a Server. Rules is required; the zero value of every
// other field is a default.
type Config struct {
	// Rules returns the running config; the server reads it for each
	// new bucket, so that a reload applies to buckets subscribed after it.
	Rules func() *config.Config
	// Store divides limits across replicas; nil: a MemoryStore of the
	// server's own.
	Store Store
	// FirstMessageTimeout ends a stream whose first message does not come
	// within it (DeadlineExceeded). Default 30s.
	FirstMessageTimeout time.Duration
	// Logger logs streams that end in error; nil: slog.Default().
	Logger *slog.Logger
	// Registerer gets the per-bucket metrics; nil: none.
	Registerer prometheus.Registerer
}

// Server is the RLQS service, envoy.service.rate_limit_quota.v3. Create it
// with New; it is safe for concurrent use.
type Server struct {
	rlqspb.UnimplementedRateLimitQuotaServiceServer

	cfg       Config
	nonce     string
	streamID  atomic.Uint64
	closing   chan struct{}
	closeOne  sync.Once
	streams   sync.WaitGroup
	stats     *bucketStats
	lastWarn  atomic.Int64 // unix nanoseconds of the last store warning
	storeErrs atomic.Int64 // store failures since the last warning
}

// warnStore logs a store failure, at most once a second for the server,
// with the number of failures since the last line.
func (s *Server) warnStore(now time.Time, msg, bucket string, err error) {
	s.storeErrs.Add(1)
	last := s.lastWarn.Load()
	if now.UnixNano()-last < int64(time.Second) || !s.lastWarn.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	s.cfg.Logger.Warn(msg, "bucket", bucket, "err", err, "failures", s.storeErrs.Swap(0))
}

// New returns a Server. It registers the metrics on cfg.Registerer.
func New(cfg Config) (*Server, error) {
	if cfg.Rules == nil {
		return nil, errors.New("rlqs: Config.Rules is nil")
	}
	if cfg.Store == nil {
		cfg.Store = &MemoryStore{}
	}
	if cfg.FirstMessageTimeout <= 0 {
		cfg.FirstMessageTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	s := &Server{cfg: cfg, nonce: hex.EncodeToString(b[:]), closing: make(chan struct{}), stats: newBucketStats()}
	if cfg.Registerer != nil {
		if err := s.stats.register(cfg.Registerer); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Register registers the service on gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	rlqspb.RegisterRateLimitQuotaServiceServer(gs, s)
}

// Shutdown sends every stream's buckets an assignment that expires at once
// (so that each Envoy applies its expired_assignment_behavior), ends the
// streams with Unavailable, and waits for them until ctx ends. Streams
// that arrive later end at once the same way. The records of clients that
// named themselves (ClientHeader) stay in the store for the replica that
// takes them over.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOne.Do(func() { close(s.closing) })
	done := make(chan struct{})
	go func() { s.streams.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StreamRateLimitQuotas serves one Envoy's stream (see the package
// documentation for what each message gets).
func (s *Server) StreamRateLimitQuotas(st grpc.BidiStreamingServer[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]) error {
	s.streams.Add(1)
	defer s.streams.Done()
	select {
	case <-s.closing:
		return status.Error(codes.Unavailable, "rlqs: the server is shutting down")
	default:
	}
	c := &stream{srv: s, st: st, buckets: make(map[string]*bucket), nudge: make(chan struct{}, 1)}
	c.client, c.named = s.clientID(st.Context())
	return c.run()
}

// clientID names a stream's client: its ClientHeader, else a name unique
// to the stream.
func (s *Server) clientID(ctx context.Context) (string, bool) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(ClientHeader); len(v) > 0 && v[0] != "" && len(v[0]) <= maxClientID {
			return "n:" + v[0], true
		}
	}
	addr := "?"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	return fmt.Sprintf("s:%s/%d/%s", s.nonce, s.streamID.Add(1), addr), false
}

// bucketKey returns the store's name of a bucket: the domain, then the
// path's entries in order, each value replaced by its pattern at a level
// with share_threshold (all matching values share the limit), as the RLS
// service names counters.
func bucketKey(domain string, r *config.RateLimit, path []config.Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	for i, e := range path {
		v := e.Value
		if i < len(r.Path) && r.Path[i].ShareThreshold {
			v = r.Path[i].Value
		}
		fmt.Fprintf(&b, "|%d:%s=%s", len(e.Key), e.Key, v)
	}
	return b.String()
}

// idKey returns a canonical name of a bucket id's pairs (order-insensitive).
func idKey(pairs map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(pairs)) {
		fmt.Fprintf(&b, "%d:%s=%s|", len(k), k, pairs[k])
	}
	return b.String()
}
