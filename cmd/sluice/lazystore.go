package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
)

// Reconnection back-off of retryConnect: the first retry after
// firstRetry, doubling up to maxRetry; each attempt within firstConnect.
const (
	firstConnect = 5 * time.Second
	firstRetry   = 500 * time.Millisecond
	maxRetry     = 30 * time.Second
)

// errNotConnected is wrapped by a lazyStore's errors until it has
// connected: a store failure (not bad input), so the failure mode applies.
var errNotConnected = errors.New("rate limit store not connected yet")

// lazyStore is a Redis store that serve can start without: until Redis
// has answered once, every call fails with an error wrapping
// errNotConnected and sluice.ErrUnavailable (so the service's failure
// policy answers), while a goroutine keeps connecting with back-off.
// Once connected, calls go to the redisstore.Store, which reconnects by
// itself after later outages. It is safe for concurrent use.
type lazyStore struct {
	store   atomic.Pointer[redisstore.Store]
	lastErr atomic.Pointer[error] // what a call returns while not connected: the last connection error, wrapped once (see unavailable)

	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

var (
	_ sluice.Limiter        = (*lazyStore)(nil)
	_ sluice.Refunder       = (*lazyStore)(nil)
	_ sluice.LimitValidator = (*lazyStore)(nil)
	_ sluice.Peeker         = (*lazyStore)(nil)
)

// ValidateLimit is redisstore.ValidateLimit, connected or not.
func (l *lazyStore) ValidateLimit(lim sluice.Limit) error { return redisstore.ValidateLimit(lim) }

// openLazy opens the Redis store of cfg: it tries once, for up to
// firstConnect, and if that fails logs a warning and keeps trying in the
// background until Close. A URL that does not parse is an error at once.
func openLazy(ctx context.Context, cfg redisstore.Config, log *slog.Logger) (*lazyStore, error) {
	if _, err := redisstore.ParseURL(cfg.URL); err != nil {
		return nil, err
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	l := &lazyStore{stop: stop, done: make(chan struct{})}
	cctx, cancel := context.WithTimeout(ctx, firstConnect)
	s, err := redisstore.New(cctx, cfg)
	cancel()
	if err == nil {
		l.store.Store(s)
		close(l.done)
		return l, nil
	}
	if ctx.Err() != nil {
		stop()
		return nil, err
	}
	l.lastErr.Store(unavailable(err))
	log.Warn("rate limit store unreachable: starting with the failure mode applied, reconnecting in the background", "err", err)
	go l.connect(bg, cfg, log)
	return l, nil
}

// connect retries redisstore.New with back-off until it succeeds or ctx
// ends.
func (l *lazyStore) connect(ctx context.Context, cfg redisstore.Config, log *slog.Logger) {
	defer close(l.done)
	connected := retryConnect(ctx, true, func(ctx context.Context) error {
		s, err := redisstore.New(ctx, cfg)
		if err != nil {
			l.lastErr.Store(unavailable(err))
			return err
		}
		l.store.Store(s)
		return nil
	})
	if connected {
		log.Info("rate limit store connected")
	}
}

// retryConnect calls try, each call within firstConnect, until it returns
// nil (then it returns true) or ctx ends (false). After each failed call
// it waits, firstRetry the first time, doubling up to maxRetry; with
// failedOnce (the caller has just tried) it waits before the first call
// too.
func retryConnect(ctx context.Context, failedOnce bool, try func(context.Context) error) bool {
	wait := firstRetry
	for {
		if failedOnce {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
			wait = min(2*wait, maxRetry)
		}
		cctx, cancel := context.WithTimeout(ctx, firstConnect)
		err := try(cctx)
		cancel()
		if err == nil {
			return true
		}
		failedOnce = true
	}
}

// Connected reports whether Redis has answered once.
func (l *lazyStore) Connected() bool { return l.store.Load() != nil }

// unavailable wraps a connection error as calls return it until Redis
// answers, built once per connection attempt rather than once per call.
func unavailable(err error) *error {
	e := fmt.Errorf("%w: %w: %w", sluice.ErrUnavailable, errNotConnected, err)
	return &e
}

// errNotYet is what a call returns before the first attempt has failed.
var errNotYet = fmt.Errorf("%w: %w", sluice.ErrUnavailable, errNotConnected)

// notConnected returns the error of a call made before Redis answered.
func (l *lazyStore) notConnected() error {
	if p := l.lastErr.Load(); p != nil {
		return *p
	}
	return errNotYet
}

// Allow is AllowN with cost 1.
func (l *lazyStore) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return l.AllowN(ctx, key, lim, 1)
}

// AllowN asks Redis, or fails while it has never answered.
func (l *lazyStore) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if s := l.store.Load(); s != nil {
		return s.AllowN(ctx, key, lim, cost)
	}
	return sluice.Result{}, l.notConnected()
}

// Peek reads the key on Redis, or fails while it has never answered.
func (l *lazyStore) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	if s := l.store.Load(); s != nil {
		return s.Peek(ctx, key, lim)
	}
	return sluice.Result{}, l.notConnected()
}

// RefundN refunds on Redis, or fails while it has never answered.
func (l *lazyStore) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	if s := l.store.Load(); s != nil {
		return s.RefundN(ctx, key, lim, cost)
	}
	return l.notConnected()
}

// Close stops connecting and closes the store, returning the store's
// Close error (the first call's; later calls return nil).
func (l *lazyStore) Close() error {
	var err error
	l.once.Do(func() {
		l.stop()
		<-l.done
		if s := l.store.Load(); s != nil {
			err = s.Close()
		}
	})
	return err
}
