// Package xdsconfig takes the rate limit config from an xDS server, as
// envoyproxy/ratelimit does with CONFIG_TYPE=GRPC_XDS_SOTW: it subscribes
// over the Aggregated Discovery Service, state of the world, to the
// RateLimitConfig resources (TypeURL), compiles each response with the
// file loader's parser (Compile), hands the config to its Apply function,
// ACKs a config that applied and NACKs one that did not, with the error,
// keeping the running config. A lost stream is re-opened after a backoff,
// the running config kept meanwhile.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package xdsconfig

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/clip"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/promreg"
)

// DefaultMaxMsgSize is the largest response the client accepts when
// Config.MaxMsgSize is 0: gRPC's default, 4 MiB.
const DefaultMaxMsgSize = 4 << 20

// DefaultConnectRetry is envoyproxy/ratelimit's
// CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL.
const DefaultConnectRetry = 3 * time.Second

// Config configures a Client. Target and Apply are required.
type Config struct {
	// Target is the xDS server's address, host:port or a gRPC target.
	Target string
	// NodeID and NodeMetadata are the node the client presents.
	NodeID       string
	NodeMetadata map[string]string
	// Headers are sent as gRPC metadata on the stream.
	Headers map[string]string
	// TLS, when not nil, is the TLS of the connection; nil is plaintext.
	TLS credentials.TransportCredentials
	// ConnectRetry is the wait, varied by up to half either way, before
	// trying again when a stream cannot be opened; 0 is
	// DefaultConnectRetry.
	ConnectRetry time.Duration
	// Backoff is the wait before re-opening a stream that was lost.
	Backoff Backoff
	// MaxMsgSize bounds a response in bytes; 0 is DefaultMaxMsgSize.
	MaxMsgSize int
	// Options are how the resources combine into a config, as a config
	// directory's files do (MERGE_DOMAIN_CONFIG).
	Options config.Options
	// Apply swaps a compiled config in; an error keeps the running config
	// and NACKs the response with its text.
	Apply func(context.Context, *config.Config) error
	// Logger logs connections and NACKs; nil is slog.Default().
	Logger *slog.Logger
	// Registerer, if not nil, gets the client's metrics (see New).
	Registerer prometheus.Registerer
	// After and Rand are the clock and randomness of the waits; nil is
	// time.After and math/rand/v2's Float64.
	After func(time.Duration) <-chan time.Time
	Rand  func() float64
	// Now is the clock of the refusals' log lines (see Client); nil is
	// time.Now.
	Now func() time.Time
}

// Client is an xDS subscription to the rate limit config. Its methods are
// safe for concurrent use.
//
// A server that sends the same resources again and again (a control plane
// in a loop, a new version_info each time) costs one apply and one log
// line, not one per response: a response whose resources are those of the
// running config is ACKed without being compiled or applied again, and
// logged at Debug; one whose resources were refused before (among the
// last maxRefusals refused) is NACKed with the same error without being
// applied again. A refusal's error is logged at its first response, then
// at most once per RefusalLogEvery with the count of the responses it
// refused since its last line.
type Client struct {
	cfg      Config
	conn     *grpc.ClientConn
	node     *core.Node
	log      *slog.Logger
	ready    chan struct{}
	once     sync.Once
	mu       sync.Mutex
	acked    string // version_info of the last config ACKed
	nonce    string // nonce of the last response
	applied  digest // the resources of the running config (zero: none yet)
	refusals []*refusal
	m        metrics
}

// digest identifies a response's resources: a SHA-256 of their type URLs
// and bytes, in order.
type digest [sha256.Size]byte

// refusal is a set of resources refused, its error, and its log line's
// rate limit.
type refusal struct {
	d       digest
	msg     string    // the NACK's error text
	logged  time.Time // when a line last logged it
	repeats int       // responses refused with it since that line
}

// maxRefusals is how many distinct refused resource sets a Client
// remembers (the oldest forgotten first): a server alternating between a
// few bad configs is answered from memory too.
const maxRefusals = 8

// RefusalLogEvery is the least time between two log lines of one refusal
// (the same resources, or the same error text) repeated by the server.
const RefusalLogEvery = time.Minute

// metrics are the client's Prometheus metrics.
type metrics struct {
	acks, nacks, streams prometheus.Counter
	connected            prometheus.Gauge
}

// New returns a client of the server cfg.Target; Run subscribes. It does
// not connect (gRPC connects lazily). With cfg.Registerer it registers:
//
//   - sluice_xds_config_updates_total{result="ack"|"nack"}: responses
//     applied, and refused (the running config kept);
//   - sluice_xds_streams_total: streams opened to the server;
//   - sluice_xds_connected: 1 while a stream is open.
func New(cfg Config) (*Client, error) {
	if cfg.Target == "" || cfg.Apply == nil {
		return nil, errors.New("xdsconfig: Config.Target and Config.Apply are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ConnectRetry <= 0 {
		cfg.ConnectRetry = DefaultConnectRetry
	}
	if cfg.MaxMsgSize <= 0 {
		cfg.MaxMsgSize = DefaultMaxMsgSize
	}
	creds := cfg.TLS
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(cfg.Target, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.MaxMsgSize)))
	if err != nil {
		return nil, fmt.Errorf("xdsconfig: %w", err)
	}
	node := &core.Node{Id: cfg.NodeID}
	if len(cfg.NodeMetadata) > 0 {
		md := make(map[string]any, len(cfg.NodeMetadata))
		for k, v := range cfg.NodeMetadata {
			md[k] = v
		}
		if node.Metadata, err = structpb.NewStruct(md); err != nil {
			conn.Close()
			return nil, fmt.Errorf("xdsconfig: node metadata: %w", err)
		}
	}
	c := &Client{cfg: cfg, conn: conn, node: node, log: cfg.Logger, ready: make(chan struct{})}
	if err := c.register(cfg.Registerer); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func (c *Client) register(reg prometheus.Registerer) error {
	updates := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_xds_config_updates_total",
		Help: "Configs received from the xDS server: applied and ACKed (result=ack), or refused and NACKed, the running config kept (result=nack).",
	}, []string{"result"})
	c.m.streams = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_xds_streams_total", Help: "Streams opened to the xDS server.",
	})
	c.m.connected = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_xds_connected", Help: "1 while a stream to the xDS server is open, else 0.",
	})
	if reg != nil {
		var err error
		if updates, err = promreg.Register(reg, updates); err != nil {
			return err
		}
		if c.m.streams, err = promreg.Register(reg, c.m.streams); err != nil {
			return err
		}
		if c.m.connected, err = promreg.Register(reg, c.m.connected); err != nil {
			return err
		}
	}
	c.m.acks, c.m.nacks = updates.WithLabelValues("ack"), updates.WithLabelValues("nack")
	return nil
}

// Ready is closed once a config from the server has been applied.
func (c *Client) Ready() <-chan struct{} { return c.ready }

// Version returns the version_info of the config last applied, "" before
// the first.
func (c *Client) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acked
}

// Run subscribes and applies the configs the server sends until ctx ends,
// re-opening a lost stream (after Config.ConnectRetry when it could not be
// opened, after Config.Backoff when it was open), and then closes the
// connection. It returns nil when ctx ends.
func (c *Client) Run(ctx context.Context) error {
	defer c.conn.Close()
	attempt := 0
	for {
		opened, got, err := c.stream(ctx)
		c.m.connected.Set(0)
		if ctx.Err() != nil {
			return nil
		}
		if got {
			attempt = 0
		}
		var wait time.Duration
		if opened {
			wait = c.cfg.Backoff.Delay(attempt, c.cfg.Rand())
			attempt++
		} else {
			wait = jittered(c.cfg.ConnectRetry, c.cfg.Rand())
		}
		c.log.Warn("xds: stream to the config server ended; the running config is kept", "server", c.cfg.Target, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-c.cfg.After(wait):
		}
	}
}

// stream runs one ADS stream until it fails: opened says whether it was
// opened, got whether a response came on it.
func (c *Client) stream(ctx context.Context) (opened, got bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(c.cfg.Headers) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, metadata.New(c.cfg.Headers))
	}
	st, err := discovery.NewAggregatedDiscoveryServiceClient(c.conn).StreamAggregatedResources(ctx)
	if err != nil {
		return false, false, err
	}
	// The first request carries the last ACKed version and the last
	// nonce, so that a server that kept its state need not resend.
	c.mu.Lock()
	first := &discovery.DiscoveryRequest{Node: c.node, TypeUrl: TypeURL, VersionInfo: c.acked, ResponseNonce: c.nonce}
	c.mu.Unlock()
	if err := st.Send(first); err != nil {
		return false, false, err
	}
	c.m.streams.Inc()
	c.m.connected.Set(1)
	c.log.Info("xds: subscribed", "server", c.cfg.Target, "node", c.node.GetId(), "type", TypeURL)
	for {
		resp, err := st.Recv()
		if err != nil {
			return true, got, err
		}
		got = true
		if err := st.Send(c.handle(ctx, resp)); err != nil {
			return true, got, err
		}
	}
}

// handle applies one response and returns its ACK or NACK. Resources
// already running, or already refused, are answered without applying
// them again (see Client).
func (c *Client) handle(ctx context.Context, resp *discovery.DiscoveryResponse) *discovery.DiscoveryRequest {
	d := digestOf(resp)
	c.mu.Lock()
	running := c.applied == d
	prior := c.refusalOf(d)
	c.mu.Unlock()
	var err error
	switch {
	case running:
	case prior != nil:
		err = errors.New(prior.msg)
	default:
		err = c.apply(ctx, resp)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nonce = resp.GetNonce()
	req := &discovery.DiscoveryRequest{Node: c.node, TypeUrl: TypeURL, ResponseNonce: resp.GetNonce()}
	if err != nil {
		msg := errorDetail(err)
		c.m.nacks.Inc()
		c.refused(d, msg, resp.GetVersionInfo())
		req.VersionInfo = c.acked
		req.ErrorDetail = &rpcstatus.Status{Code: 3, Message: msg} // 3: INVALID_ARGUMENT
		return req
	}
	c.acked = resp.GetVersionInfo()
	req.VersionInfo = c.acked
	c.m.acks.Inc()
	if running {
		c.log.Debug("xds: config unchanged (ACK); not applied again", "version", bounded(c.acked, maxLoggedVersion), "resources", len(resp.GetResources()))
		return req
	}
	c.applied = d
	c.log.Info("xds: config applied (ACK)", "version", bounded(c.acked, maxLoggedVersion), "resources", len(resp.GetResources()))
	c.once.Do(func() { close(c.ready) })
	return req
}

// digestOf returns the digest of resp's type URL and resources.
func digestOf(resp *discovery.DiscoveryResponse) digest {
	h := sha256.New()
	var n [8]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	put([]byte(resp.GetTypeUrl()))
	for _, r := range resp.GetResources() {
		put([]byte(r.GetTypeUrl()))
		put(r.GetValue())
	}
	var d digest
	h.Sum(d[:0])
	return d
}

// refusalOf returns the refusal of the resources d, nil if they were not
// refused (or are forgotten). c.mu is held.
func (c *Client) refusalOf(d digest) *refusal {
	for _, r := range c.refusals {
		if r.d == d {
			return r
		}
	}
	return nil
}

// refused records that the resources d were refused with msg and logs it:
// at once the first time its resources or its text are seen, then at most
// once per RefusalLogEvery with the count of repeats. c.mu is held.
func (c *Client) refused(d digest, msg, version string) {
	now := c.cfg.Now()
	r := c.refusalOf(d)
	if r == nil {
		for _, o := range c.refusals { // other resources, the same error: one line
			if o.msg == msg {
				r = &refusal{d: d, msg: msg, logged: o.logged, repeats: o.repeats}
				o.repeats = 0
				break
			}
		}
		if r == nil {
			r = &refusal{d: d, msg: msg}
		}
		if len(c.refusals) == maxRefusals {
			c.refusals = c.refusals[1:]
		}
		c.refusals = append(c.refusals, r)
	}
	if !r.logged.IsZero() && now.Sub(r.logged) < RefusalLogEvery {
		r.repeats++
		return
	}
	args := []any{"version", bounded(version, maxLoggedVersion), "running_version", bounded(c.acked, maxLoggedVersion), "err", msg}
	if r.logged.IsZero() {
		c.log.Error("xds: config refused (NACK); keeping the running config", args...)
	} else {
		c.log.Error("xds: config refused again (NACK); keeping the running config", append(args, "repeats", r.repeats+1, "since", now.Sub(r.logged).Round(time.Second))...)
	}
	r.logged, r.repeats = now, 0
}

// apply compiles a response and hands it to Config.Apply.
func (c *Client) apply(ctx context.Context, resp *discovery.DiscoveryResponse) error {
	if resp.GetTypeUrl() != TypeURL {
		return fmt.Errorf("response of type %q, subscribed to %q", resp.GetTypeUrl(), TypeURL)
	}
	rules, err := Compile(c.cfg.Options, resp.GetResources())
	if err != nil {
		return err
	}
	return c.cfg.Apply(ctx, rules)
}

// MaxErrorDetail bounds the error text of a NACK (and of its log line):
// a config error quotes the values at fault, which a hostile or broken
// resource can make as long as the resource.
const MaxErrorDetail = 4096

// maxLoggedVersion bounds a version_info in a log line: the server
// chooses it, and could make it as long as a response (the ACK echoes it
// whole, as the protocol needs).
const maxLoggedVersion = 256

// errorDetail returns err's text, cut to MaxErrorDetail bytes (bounded).
func errorDetail(err error) string { return bounded(err.Error(), MaxErrorDetail) }

// bounded returns s cut to max bytes (on a rune boundary, room kept for
// a note of the full length) when it is longer.
func bounded(s string, max int) string {
	if len(s) <= max {
		return s
	}
	head, _ := clip.Cut(s, max-64) // room for the note
	return fmt.Sprintf("%s… (cut; %d bytes in all)", head, len(s))
}
