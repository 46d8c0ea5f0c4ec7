package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/backoff"
)

// ErrNotConnected is wrapped, with sluice.ErrUnavailable, by a Lazy
// store's errors until Redis has answered once: a store failure (not bad
// input), so that a failure mode applies.
var ErrNotConnected = errors.New("rate limit store not connected yet")

// Lazy is a Redis store that a server can start without: until Redis has
// answered once, every call fails with an error wrapping ErrNotConnected
// and sluice.ErrUnavailable (so that the caller's failure policy
// answers), while a goroutine keeps connecting with back-off (0.5 s
// doubling to 30 s, for ever). Bad input is refused meanwhile as a
// connected Store refuses it (sluice.Check, ValidateLimit), not as a
// store failure. Once connected, calls go to the Store, which reconnects by itself after
// later outages. It is safe for concurrent use; its zero value is not
// usable: open one with OpenLazy.
type Lazy struct {
	store   atomic.Pointer[Store]
	lastErr atomic.Pointer[error] // what a call returns while not connected: the last connection error, wrapped once (see unavailable)

	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

var (
	_ sluice.Limiter        = (*Lazy)(nil)
	_ sluice.Refunder       = (*Lazy)(nil)
	_ sluice.LimitValidator = (*Lazy)(nil)
	_ sluice.Peeker         = (*Lazy)(nil)
	_ sluice.Charger        = (*Lazy)(nil)
)

// OpenLazy opens the Redis store of cfg: it tries once, for up to 5 s,
// and if that fails logs a warning on log (nil: slog.Default()) and keeps
// trying in the background until Close. A URL that does not parse is an
// error at once, as is a ctx that ends during the first attempt.
func OpenLazy(ctx context.Context, cfg Config, log *slog.Logger) (*Lazy, error) {
	return openLazy(ctx, cfg, log, New)
}

// openLazy is OpenLazy whose stores newStore opens (New, or a test's
// store on a clock of its own).
func openLazy(ctx context.Context, cfg Config, log *slog.Logger, newStore func(context.Context, Config) (*Store, error)) (*Lazy, error) {
	if log == nil {
		log = slog.Default()
	}
	if cfg.Client == nil {
		if _, err := ParseURL(cfg.URL); err != nil {
			return nil, err
		}
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	l := &Lazy{stop: stop, done: make(chan struct{})}
	cctx, cancel := context.WithTimeout(ctx, backoff.Attempt)
	s, err := newStore(cctx, cfg)
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
	go l.connect(bg, cfg, log, newStore)
	return l, nil
}

// connect retries newStore with back-off until it succeeds or ctx ends.
func (l *Lazy) connect(ctx context.Context, cfg Config, log *slog.Logger, newStore func(context.Context, Config) (*Store, error)) {
	defer close(l.done)
	connected := backoff.Retry(ctx, true, func(ctx context.Context) error {
		s, err := newStore(ctx, cfg)
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

// Connected reports whether Redis has answered once.
func (l *Lazy) Connected() bool { return l.store.Load() != nil }

// Store returns the connected Store, or, before Redis has answered once,
// the error every call returns meanwhile (ErrUnavailable and
// ErrNotConnected, with the last connection error).
func (l *Lazy) Store() (*Store, error) {
	if s := l.store.Load(); s != nil {
		return s, nil
	}
	return nil, l.notConnected()
}

// unavailable wraps a connection error as calls return it until Redis
// answers, built once per connection attempt rather than once per call.
func unavailable(err error) *error {
	e := fmt.Errorf("%w: %w: %w", sluice.ErrUnavailable, ErrNotConnected, err)
	return &e
}

// errNotYet is what a call returns before the first attempt has failed.
var errNotYet = fmt.Errorf("%w: %w", sluice.ErrUnavailable, ErrNotConnected)

// notConnected returns the error of a call made before Redis answered.
func (l *Lazy) notConnected() error {
	if p := l.lastErr.Load(); p != nil {
		return *p
	}
	return errNotYet
}

// refuse returns the error of a call made before Redis answered: check's
// (the call's input) or ValidateLimit's (a limit Redis cannot serve) for
// bad input, as a connected store refuses it, else notConnected's.
func (l *Lazy) refuse(check error, lim sluice.Limit) error {
	if check != nil {
		return check
	}
	if err := ValidateLimit(lim); err != nil {
		return err
	}
	return l.notConnected()
}

// ValidateLimit is the package's ValidateLimit, connected or not.
func (l *Lazy) ValidateLimit(lim sluice.Limit) error { return ValidateLimit(lim) }

// Allow is AllowN with cost 1.
func (l *Lazy) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return l.AllowN(ctx, key, lim, 1)
}

// AllowN asks Redis, or fails while it has never answered.
func (l *Lazy) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if s := l.store.Load(); s != nil {
		return s.AllowN(ctx, key, lim, cost)
	}
	return sluice.Result{}, l.refuse(sluice.Check(key, lim, cost), lim)
}

// Peek reads the key on Redis, or fails while it has never answered.
func (l *Lazy) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	if s := l.store.Load(); s != nil {
		return s.Peek(ctx, key, lim)
	}
	return sluice.Result{}, l.refuse(sluice.CheckPeek(key, lim), lim)
}

// RefundN refunds on Redis, or fails while it has never answered.
func (l *Lazy) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	if s := l.store.Load(); s != nil {
		return s.RefundN(ctx, key, lim, cost)
	}
	return l.refuse(sluice.Check(key, lim, cost), lim)
}

// ChargeN charges on Redis, or fails while it has never answered.
func (l *Lazy) ChargeN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if s := l.store.Load(); s != nil {
		return s.ChargeN(ctx, key, lim, cost)
	}
	return sluice.Result{}, l.refuse(sluice.CheckCharge(key, lim, cost), lim)
}

// Close stops connecting and closes the store, returning the store's
// Close error (the first call's; later calls return nil).
func (l *Lazy) Close() error {
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

// RLQS returns the RLQS records of the store once connected: until Redis
// answers, each call fails with the Lazy store's error (ErrUnavailable,
// with the last connection error), so that RLQS's warning says why.
func (l *Lazy) RLQS() LazyRLQS { return LazyRLQS{l} }

// LazyRLQS is a Lazy store's RLQS records (see Lazy.RLQS). Its zero value
// is not usable.
type LazyRLQS struct{ l *Lazy }

// rlqs returns the connected store's RLQS records, or the error of a call
// made before Redis answered.
func (r LazyRLQS) rlqs() (*RLQSStore, error) {
	st, err := r.l.Store()
	if err != nil {
		return nil, err
	}
	return st.RLQS(), nil
}

// Report is RLQSStore.Report once connected.
func (r LazyRLQS) Report(ctx context.Context, bucket, client, writer string, demand float64, now time.Time, ttl time.Duration) error {
	st, err := r.rlqs()
	if err != nil {
		return err
	}
	return st.Report(ctx, bucket, client, writer, demand, now, ttl)
}

// Demands is RLQSStore.Demands once connected.
func (r LazyRLQS) Demands(ctx context.Context, bucket string, now time.Time) (map[string]float64, error) {
	st, err := r.rlqs()
	if err != nil {
		return nil, err
	}
	return st.Demands(ctx, bucket, now)
}

// Forget is RLQSStore.Forget once connected.
func (r LazyRLQS) Forget(ctx context.Context, bucket, client, writer string) error {
	st, err := r.rlqs()
	if err != nil {
		return err
	}
	return st.Forget(ctx, bucket, client, writer)
}
