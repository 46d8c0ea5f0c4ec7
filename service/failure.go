package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/memstore"
)

// FailurePolicy puts the Service's Limiter (a remote store, such as a
// redisstore.Store, not already wrapped in package failsafe) behind one
// circuit breaker and lets each rule's failure_mode say what happens while
// the store fails. See the package documentation, "Store failures".
type FailurePolicy struct {
	// Mode is the failure mode of rules whose FailureMode is "" (and of
	// limit overrides that match no rule). Default failsafe.Open, Envoy's
	// own default.
	Mode failsafe.Mode
	// Local decides the requests of "local" rules while the store fails.
	// Nil means an in-memory store (package memstore) that the Service
	// creates on first use and Close closes.
	Local sluice.Limiter
	// Share turns a rule's limit into the one Local enforces. Default: the
	// limit divided by Nodes (failsafe.Split).
	Share func(sluice.Limit) sluice.Limit
	// Nodes is the number of servers sharing the limits, for the default
	// Share. Default 1.
	Nodes int
	// Timeout bounds each call to the store. Default 50ms.
	Timeout time.Duration
	// Threshold is how many consecutive store failures, of any rule, open
	// the breaker. Default 3.
	Threshold int
	// Backoff and MaxBackoff are the breaker's back-off, as in
	// failsafe.Config. Defaults 1s and 30s.
	Backoff, MaxBackoff time.Duration
	// LogInterval is the least time between two of the breaker's log
	// lines. Default 10s.
	LogInterval time.Duration
	// Clock tells the time for the breaker and the owned local store; nil
	// means the system clock.
	Clock sluice.Clock
}

// fallback applies a FailurePolicy: one breaker around the store, the
// local store and the share.
type fallback struct {
	breaker *failsafe.Limiter // Mode Closed: every failure surfaces as ErrUnavailable
	mode    failsafe.Mode
	share   func(sluice.Limit) sluice.Limit

	local   sluice.Limiter // set when given in the policy
	clock   sluice.Clock
	ownedMu sync.Mutex
	owned   *memstore.Store
	closed  bool
}

func newFallback(primary sluice.Limiter, p *FailurePolicy, log *slog.Logger) (*fallback, error) {
	if p.Mode > failsafe.Local {
		return nil, fmt.Errorf("service: unknown failure mode %v", p.Mode)
	}
	if _, ok := primary.(*failsafe.Limiter); ok {
		return nil, errors.New("service: with Config.Failure, Config.Limiter must be the store itself, not a failsafe.Limiter")
	}
	b, err := failsafe.New(failsafe.Config{
		Primary:     primary,
		Mode:        failsafe.Closed,
		Timeout:     p.Timeout,
		Threshold:   p.Threshold,
		Backoff:     p.Backoff,
		MaxBackoff:  p.MaxBackoff,
		Logger:      log,
		LogInterval: p.LogInterval,
		LogMode:     p.Mode.String(), // the default; rules may set their own
		Clock:       p.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	f := &fallback{breaker: b, mode: p.Mode, share: p.Share, local: p.Local, clock: p.Clock}
	if f.share == nil {
		n := max(p.Nodes, 1)
		f.share = func(l sluice.Limit) sluice.Limit { return failsafe.Split(l, n) }
	}
	return f, nil
}

// modeOf returns the failure mode of a rule (nil: a bare override).
func (f *fallback) modeOf(r *config.RateLimit) failsafe.Mode {
	if r == nil || r.FailureMode == "" {
		return f.mode
	}
	m, err := failsafe.ParseMode(r.FailureMode)
	if err != nil {
		return f.mode // package config refuses unknown modes; other Rules may not
	}
	return m
}

// localLimiter returns the local store, creating the owned one on first
// use; nil after Close.
func (f *fallback) localLimiter() sluice.Limiter {
	if f.local != nil {
		return f.local
	}
	f.ownedMu.Lock()
	defer f.ownedMu.Unlock()
	if f.owned == nil && !f.closed {
		f.owned = memstore.New(memstore.Config{Clock: f.clock})
	}
	if f.owned == nil {
		return nil
	}
	return f.owned
}

// degrade answers a decision the store could not make, as mode says. res
// is the breaker's denying Result (RetryAfter: until the next probe).
func (f *fallback) degrade(ctx context.Context, mode failsafe.Mode, key string, lim sluice.Limit, cost int, res sluice.Result) (sluice.Result, error) {
	switch mode {
	case failsafe.Closed:
		return sluice.Result{RetryAfter: res.RetryAfter}, nil
	case failsafe.Local:
		share := f.share(lim)
		if cost > share.Capacity() {
			return sluice.Result{RetryAfter: res.RetryAfter}, nil
		}
		l := f.localLimiter()
		if l == nil {
			return sluice.Result{}, errors.New("service: closed")
		}
		return l.AllowN(ctx, key, share, cost)
	default: // Open
		return sluice.Result{Allowed: true, Remaining: max(lim.Capacity()-cost, 0)}, nil
	}
}

// refund gives units back where a decision of mode spent them now: the
// store while the breaker is closed, the local store for a local rule while
// it is open, nowhere otherwise.
func (f *fallback) refund(ctx context.Context, mode failsafe.Mode, key string, lim sluice.Limit, cost int) error {
	if f.breaker.Available() {
		return f.breaker.RefundN(ctx, key, lim, cost)
	}
	if mode != failsafe.Local {
		return nil
	}
	rf, ok := f.localLimiter().(sluice.Refunder)
	if !ok {
		return nil
	}
	share := f.share(lim)
	return rf.RefundN(ctx, key, share, min(cost, share.Capacity()))
}

func (f *fallback) close() error {
	f.ownedMu.Lock()
	defer f.ownedMu.Unlock()
	f.closed = true
	if f.owned != nil {
		err := f.owned.Close()
		f.owned = nil
		return err
	}
	return nil
}
