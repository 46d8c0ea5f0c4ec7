package rlqs

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
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
// (Envoy's grpc_service initial_metadata). Streams with the same name from
// the same peer (the same verified client certificate, else the same IP
// address) are the same client: a reconnected Envoy takes over its own
// record in the store instead of counting twice until the old one expires.
// The same name from another peer is another client. Without mTLS, any
// process of the peer's host can claim a name: a name is to be trusted
// only as far as the network is (Config.IgnoreClientNames turns names
// off).
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
	// IdleTimeout ends a stream that sends no message for it, the first
	// one included (DeadlineExceeded). Default 30s.
	IdleTimeout time.Duration
	// MaxBytes bounds the memory of all streams and their buckets
	// together, as accounted by the server (see docs/rlqs.md); at it, a new
	// stream is refused with ResourceExhausted and a new bucket gets no
	// assignment, while the existing ones keep theirs. Default
	// DefaultMaxBytes.
	MaxBytes int64
	// MaxStreams bounds the streams open at once; more are refused with
	// ResourceExhausted. Default DefaultMaxStreams.
	MaxStreams int
	// MaxStreamsPerConn bounds the streams of one gRPC connection (a TCP
	// peer address; streams without a TCP peer, such as over a Unix
	// socket, are not counted); more are refused with ResourceExhausted.
	// Default DefaultMaxStreamsPerConn.
	MaxStreamsPerConn int
	// IgnoreClientNames turns named records off: the ClientHeader is not
	// read, and each stream is a client of its own. Zero value: names are
	// read, scoped by the peer (see ClientHeader).
	IgnoreClientNames bool
	// DivideByStream divides each limit among streams alone, as if every
	// stream came from a peer of its own. Zero value: the limit is first
	// divided among peers (verified client certificates, else IP
	// addresses), then among each peer's streams.
	DivideByStream bool
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
	mem       *budget
	lastWarn  atomic.Int64 // unix nanoseconds of the last store warning
	storeErrs atomic.Int64 // store failures since the last warning
	lastFull  atomic.Int64 // unix nanoseconds of the last budget warning

	ownMu  sync.Mutex
	owners map[string]owner // named client → its newest stream here
}

// owner is a named client's newest stream on this server, and how many of
// its streams are open.
type owner struct {
	stream uint64
	open   int
}

// claim records a stream of a named client, the newest one.
func (s *Server) claim(client string, stream uint64) {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	o := s.owners[client]
	s.owners[client] = owner{stream: stream, open: o.open + 1}
}

// release records the end of a named client's stream, and reports
// whether it was the client's newest on this server: an older stream
// (its connection gone half-open while the client reconnected) leaves
// the records to the newer one.
func (s *Server) release(client string, stream uint64) bool {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	o := s.owners[client]
	if o.open--; o.open <= 0 {
		delete(s.owners, client)
	} else {
		s.owners[client] = o
	}
	return o.stream == stream
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
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBytes < 0 || cfg.MaxStreams < 0 || cfg.MaxStreamsPerConn < 0 {
		return nil, fmt.Errorf("rlqs: MaxBytes %d, MaxStreams %d, MaxStreamsPerConn %d: want 0 (the default) or more", cfg.MaxBytes, cfg.MaxStreams, cfg.MaxStreamsPerConn)
	}
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, DefaultMaxBytes)
	cfg.MaxStreams = cmp.Or(cfg.MaxStreams, DefaultMaxStreams)
	cfg.MaxStreamsPerConn = cmp.Or(cfg.MaxStreamsPerConn, DefaultMaxStreamsPerConn)
	var b [6]byte
	_, _ = rand.Read(b[:])
	mem := newBudget(cfg.MaxBytes, cfg.MaxStreams, cfg.MaxStreamsPerConn)
	s := &Server{cfg: cfg, nonce: hex.EncodeToString(b[:]), closing: make(chan struct{}), stats: newBucketStats(mem), mem: mem, owners: make(map[string]owner)}
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
	conn := connKey(st.Context())
	if err := s.mem.openStream(conn); err != nil {
		return err
	}
	defer s.mem.closeStream(conn)
	c := &stream{srv: s, st: st, buckets: make(map[string]*bucket), nudge: make(chan struct{}, 1)}
	c.client, c.named = s.clientID(st.Context())
	if c.named {
		c.id = s.streamID.Add(1)
		c.writer = s.nonce + "/" + strconv.FormatUint(c.id, 10)
		s.claim(c.client, c.id)
	}
	return c.run()
}

// clientID names a stream's client in the store: its peer (peerName: the
// verified client certificate, else the IP address), then its
// ClientHeader (unless Config.IgnoreClientNames), else a name unique to
// the stream. So a name is the client's only on its peer: another peer
// that claims it is another client, and cannot take over or end the
// first one's records.
func (s *Server) clientID(ctx context.Context) (string, bool) {
	p := peerName(ctx)
	if md, ok := metadata.FromIncomingContext(ctx); ok && !s.cfg.IgnoreClientNames {
		if v := md.Get(ClientHeader); len(v) > 0 && v[0] != "" && len(v[0]) <= maxClientID {
			return withPeer(p, "n:"+v[0]), true
		}
	}
	addr := "?"
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		addr = pr.Addr.String()
	}
	return withPeer(p, fmt.Sprintf("s:%s/%d/%s", s.nonce, s.streamID.Add(1), addr)), false
}

// warnFull logs a bucket refused at the memory budget, at most once a
// second for the server.
func (s *Server) warnFull(now time.Time, domain string) {
	last := s.lastFull.Load()
	if now.UnixNano()-last < int64(time.Second) || !s.lastFull.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	s.cfg.Logger.Warn("rlqs: the memory budget is in use; new buckets get no assignment until streams or buckets end",
		"domain", truncate(domain), "max_bytes", s.cfg.MaxBytes, "refused_buckets", s.mem.refusedBuckets.Load())
}

// bucketKey returns the store's name of a bucket: the domain, then the
// path's entries in order, each value replaced by its pattern at a level
// with share_threshold (all matching values share the limit), as the RLS
// service names counters.
func bucketKey(domain string, r *config.RateLimit, path []config.Entry) string {
	vals := make([]string, len(path))
	n := len(domain)
	for i, e := range path {
		vals[i] = e.Value
		if i < len(r.Path) && r.Path[i].ShareThreshold {
			vals[i] = r.Path[i].Value
		}
		n += len(e.Key) + len(vals[i]) + 24
	}
	var b strings.Builder
	b.Grow(n) // the exact size, near enough: no doubling left in the string
	b.WriteString(domain)
	for i, e := range path {
		b.WriteByte('|')
		b.WriteString(strconv.Itoa(len(e.Key)))
		b.WriteByte(':')
		b.WriteString(e.Key)
		b.WriteByte('=')
		b.WriteString(vals[i])
	}
	return b.String()
}

// idKey returns a canonical name of a bucket id's pairs (order-insensitive).
func idKey(pairs map[string]string) string {
	keys := slices.Sorted(maps.Keys(pairs))
	n := 0
	for _, k := range keys {
		n += len(k) + len(pairs[k]) + 24
	}
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(pairs[k])
		b.WriteByte('|')
	}
	return b.String()
}
