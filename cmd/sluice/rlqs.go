package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/config"
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

// startRLQS makes the RLQS server; startServers registers it, and it
// ends its streams (fallback assignments) when serve is asked to stop.
func (s *serveApp) startRLQS(ctx context.Context, a *app) error {
	f := &rlqsFace{}
	f.rules.Store(s.rules)
	// nil: the server's memory store. RLQS shares usage across replicas
	// through Redis only; on PostgreSQL each replica divides on its own.
	var store rlqs.Store
	if !isMemory(s.o.store) && !isPostgres(s.o.store) {
		main, _, err := s.o.redis.storeConfigs(s.o.store)
		if err != nil {
			return err
		}
		l, err := openLazy(ctx, main, s.log.With("store", "rlqs"))
		if err != nil {
			return err
		}
		a.onClose(func() { l.Close() })
		store = lazyRLQS{l}
	}
	srv, err := rlqs.New(rlqs.Config{Rules: f.rules.Load, Store: store, Logger: s.log, Registerer: s.reg})
	if err != nil {
		return err
	}
	f.srv = srv
	a.onDrain(func() {
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

// lazyRLQS is RLQS's store on a lazyStore: until Redis answers, the
// lazyStore's error (ErrUnavailable, with the last connection error).
type lazyRLQS struct{ l *lazyStore }

// rlqs returns the connected store's RLQS records, or the error of a call
// made before Redis answered.
func (r lazyRLQS) rlqs() (*redisstore.RLQSStore, error) {
	st := r.l.store.Load()
	if st == nil {
		return nil, r.l.notConnected()
	}
	return st.RLQS(), nil
}

// Report implements rlqs.Store.
func (r lazyRLQS) Report(ctx context.Context, bucket, client string, demand float64, now time.Time, ttl time.Duration) error {
	st, err := r.rlqs()
	if err != nil {
		return err
	}
	return st.Report(ctx, bucket, client, demand, now, ttl)
}

// Demands implements rlqs.Store.
func (r lazyRLQS) Demands(ctx context.Context, bucket string, now time.Time) (map[string]float64, error) {
	st, err := r.rlqs()
	if err != nil {
		return nil, err
	}
	return st.Demands(ctx, bucket, now)
}

// Forget implements rlqs.Store.
func (r lazyRLQS) Forget(ctx context.Context, bucket, client string) error {
	st, err := r.rlqs()
	if err != nil {
		return err
	}
	return st.Forget(ctx, bucket, client)
}
