package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultLeaseTTL is Leases' lease time to live when LeasesConfig.TTL is 0.
const DefaultLeaseTTL = 30 * time.Second

// LeasesConfig configures Leases. The zero value is ready to use.
type LeasesConfig struct {
	// TTL is each lease's time to live; a holder renews it every TTL/3
	// while its request runs, so the slot of a holder that dies (a crashed
	// or killed proxy) comes back at most TTL after its last renewal, and
	// so at most TTL after it died. Default DefaultLeaseTTL; at least 3µs.
	TTL time.Duration
	// Timeout bounds each renewal and each release, which run apart from
	// the request's context (a release must happen after a client went
	// away). Default 1s.
	Timeout time.Duration
	// Tick makes the renewal ticker; nil uses time.NewTicker. Tests give
	// one that fires when they say.
	Tick func(d time.Duration) (c <-chan time.Time, stop func())
}

// Leases is an in-flight limit per key over the Store's leases (Acquire,
// Renew, Release), shared by every process on the same Redis. It has the
// shape of httplimit.InFlight. It is safe for concurrent use.
type Leases struct {
	store *Store
	cfg   LeasesConfig
}

// NewLeases returns the in-flight limits of s, configured by cfg.
func NewLeases(s *Store, cfg LeasesConfig) (*Leases, error) {
	if s == nil {
		return nil, errors.New("redisstore: NewLeases of a nil Store")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultLeaseTTL
	}
	if cfg.TTL < 3*time.Microsecond {
		return nil, fmt.Errorf("redisstore: lease TTL %v is under 3µs", cfg.TTL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Tick == nil {
		cfg.Tick = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	return &Leases{store: s, cfg: cfg}, nil
}

// Acquire takes one of max slots of key. When it is taken (ok), the lease
// is renewed every TTL/3 until release is called; release gives the slot
// back and may be called more than once. A release that fails leaves the
// lease to expire within TTL. err is the Store's error; then ok is false.
func (l *Leases) Acquire(ctx context.Context, key string, max int) (release func(), ok bool, err error) {
	lease, ok, _, err := l.store.Acquire(ctx, key, max, l.cfg.TTL)
	if err != nil || !ok {
		return nil, false, err
	}
	stop := make(chan struct{})
	go l.renew(lease, stop)
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.Timeout)
			defer cancel()
			_ = l.store.Release(rctx, lease) // on failure the lease expires within TTL
		})
	}, true, nil
}

// renew extends lease every TTL/3 until stop is closed or the lease is
// lost. A renewal that fails for a moment is tried again at the next tick;
// one lease is TTL long, so two more ticks remain before it expires.
func (l *Leases) renew(lease Lease, stop <-chan struct{}) {
	c, stopTick := l.cfg.Tick(l.cfg.TTL / 3)
	defer stopTick()
	for {
		select {
		case <-stop:
			return
		case <-c:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
		err := l.store.Renew(ctx, lease)
		cancel()
		if errors.Is(err, ErrLeaseLost) {
			return
		}
	}
}
