package main

import (
	"context"
	"flag"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/rlqs"
)

// rlqsDrain bounds the shutdown of the RLQS streams, before the gRPC
// server drains.
const rlqsDrain = 5 * time.Second

// rlqsFace is serve's rate limit quota service: Envoy's RLQS on the gRPC
// port, on the running config (swapped by apply) and the store of -store
// (the memory store, or its own connection to the Redis at -store).
type rlqsFace struct {
	srv   *rlqs.Server
	rules atomic.Pointer[config.Config]
}

// rlqsOptions are RLQS's bounds and trust settings (docs/rlqs.md), flags
// whose defaults come from RLQS_* environment variables.
type rlqsOptions struct {
	idle                      time.Duration
	maxBytes                  int64
	maxStreams, maxStreamsOn  int
	clientNames, divideByPeer bool
}

// flags defines the RLQS flags on fs, their defaults from the environment
// (malformed values go to errs).
func (o *rlqsOptions) flags(fs *flag.FlagSet, errs *envflag.Errs) {
	errs.Bools("RLQS_CLIENT_NAMES", "RLQS_DIVIDE_BY_PEER")
	fs.DurationVar(&o.idle, "rlqs-idle-timeout", errs.Duration("RLQS_IDLE_TIMEOUT", 30*time.Second),
		"RLQS: a stream that sends no usage report for this long, the first one included, ends (DEADLINE_EXCEEDED); -grpc-request-timeout does not apply to RLQS streams")
	errs.SizeVar(fs, &o.maxBytes, "rlqs-max-bytes", "RLQS_MAX_BYTES", rlqs.DefaultMaxBytes,
		"RLQS: the memory budget of all streams and buckets in bytes, or k, m or g (such as 64m); past it a new stream is refused (RESOURCE_EXHAUSTED) and a new bucket gets no assignment")
	fs.IntVar(&o.maxStreams, "rlqs-max-streams", errs.Int("RLQS_MAX_STREAMS", rlqs.DefaultMaxStreams),
		"RLQS: streams open at once at most; more are refused (RESOURCE_EXHAUSTED)")
	fs.IntVar(&o.maxStreamsOn, "rlqs-max-streams-per-conn", errs.Int("RLQS_MAX_STREAMS_PER_CONNECTION", rlqs.DefaultMaxStreamsPerConn),
		"RLQS: streams open at once on one gRPC connection at most; more are refused (RESOURCE_EXHAUSTED)")
	fs.BoolVar(&o.clientNames, "rlqs-client-names", envflag.Bool("RLQS_CLIENT_NAMES", true),
		"RLQS: read the sluice-rlqs-client name of a stream (a name is its peer's only: its client certificate, else its IP address); false: each stream is a client of its own")
	fs.BoolVar(&o.divideByPeer, "rlqs-divide-by-peer", envflag.Bool("RLQS_DIVIDE_BY_PEER", true),
		"RLQS: divide each limit among peers (client certificates, else IP addresses) first, then among each peer's streams; false: among streams alone")
}

// check refuses bounds that would turn RLQS's bounds off by accident.
func (o *rlqsOptions) check() error {
	switch {
	case o.idle <= 0:
		return fmt.Errorf("-rlqs-idle-timeout %v: want a positive duration", o.idle)
	case o.maxBytes <= 0:
		return fmt.Errorf("-rlqs-max-bytes %d: want a positive size", o.maxBytes)
	case o.maxStreams <= 0 || o.maxStreamsOn <= 0:
		return fmt.Errorf("-rlqs-max-streams %d, -rlqs-max-streams-per-conn %d: want positive numbers", o.maxStreams, o.maxStreamsOn)
	}
	return nil
}

// startRLQS makes the RLQS server; startServers registers it, and it
// ends its streams (fallback assignments) when serve is asked to stop.
func (s *serveApp) startRLQS(ctx context.Context, a *daemon.App) error {
	f := &rlqsFace{}
	f.rules.Store(s.rules)
	// nil: the server's memory store. RLQS shares usage across replicas
	// through Redis only; on PostgreSQL each replica divides on its own.
	var store rlqs.Store
	if stores.Is(s.o.store, stores.Redis) {
		main, _, err := s.o.redis.Configs(s.o.store)
		if err != nil {
			return err
		}
		l, err := redisstore.OpenLazy(ctx, main, s.log.With("store", "rlqs"))
		if err != nil {
			return err
		}
		a.OnClose(func() { l.Close() })
		store = l.RLQS()
	}
	o := s.o.rlqs
	srv, err := rlqs.New(rlqs.Config{Rules: f.rules.Load, Store: store, Logger: s.log, Registerer: s.reg,
		IdleTimeout: o.idle, MaxBytes: o.maxBytes, MaxStreams: o.maxStreams, MaxStreamsPerConn: o.maxStreamsOn,
		IgnoreClientNames: !o.clientNames, DivideByStream: !o.divideByPeer})
	if err != nil {
		return err
	}
	f.srv = srv
	a.OnDrain(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rlqsDrain)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	s.rlqs = f
	return nil
}

// setRules makes c the config of buckets subscribed from now on.
func (f *rlqsFace) setRules(c *config.Config) {
	if f != nil {
		f.rules.Store(c)
	}
}
