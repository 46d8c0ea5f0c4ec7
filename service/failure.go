package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/memstore"
)

// FailurePolicy is the failure policy of package failsafe (a failsafe.Config)
// as Config.Failure takes it: the Service puts its Limiter (a remote store,
// such as a redisstore.Store, not already wrapped in package failsafe)
// behind one failsafe.Group, one circuit breaker, and each rule's
// failure_mode picks that Group's Limiter of its mode. See the package
// documentation, "Store failures".
//
// The fields mean what failsafe.Config says, with these differences:
// Primary must be nil (the store is Config.Limiter); Mode is the failure
// mode of rules whose FailureMode is "" (and of limit overrides that match
// no rule), default failsafe.Open, Envoy's own default; Local nil means an
// in-memory store (package memstore) that the Service creates on first use
// and Close closes; Logger nil means Config.Logger; Clock also drives the
// owned local store. The zero FailurePolicy is usable.
type FailurePolicy = failsafe.Config

// fallback applies a FailurePolicy: one failsafe.Group around the store,
// and the local store the Service may own.
type fallback struct {
	group   *failsafe.Group
	breaker *failsafe.Breaker // the Group's, for the health checks
	def     *failsafe.Limiter // the default mode's Limiter

	clock   sluice.Clock
	ownedMu sync.Mutex
	owned   *memstore.Store
	closed  bool
}

func newFallback(primary sluice.Limiter, p *FailurePolicy, log *slog.Logger) (*fallback, error) {
	if _, ok := primary.(*failsafe.Limiter); ok {
		return nil, errors.New("service: with Config.Failure, Config.Limiter must be the store itself, not a failsafe.Limiter")
	}
	if p.Primary != nil {
		return nil, errors.New("service: Config.Failure.Primary must be nil: Config.Limiter is the store")
	}
	f := &fallback{clock: p.Clock}
	cfg := *p
	cfg.Primary = primary
	cfg.Logger = cmp.Or(cfg.Logger, log)
	if cfg.Local == nil {
		cfg.Local = ownedLocal{f}
	}
	g, err := failsafe.NewGroup(cfg)
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	f.group, f.breaker, f.def = g, g.Breaker(), g.Limiter(cfg.Mode)
	return f, nil
}

// limiterFor returns the Limiter of a rule's failure mode (nil: a bare
// override). Package config refuses unknown modes; a Rules of another
// origin that names one gets the default. A rule's ruleInfo holds the
// answer, so it is worked out once per rule, not per decision.
func (f *fallback) limiterFor(r *config.RateLimit) *failsafe.Limiter {
	if r == nil || r.FailureMode == "" {
		return f.def
	}
	m, err := failsafe.ParseMode(r.FailureMode)
	if err != nil {
		return f.def
	}
	return f.group.Limiter(m)
}

// limiterOf returns the Limiter of a plan's rule: its ruleInfo's, else
// (a limit override, a rule past the cache) looked up.
func (f *fallback) limiterOf(p *plan) *failsafe.Limiter {
	if p.info != nil && p.info.fail != nil {
		return p.info.fail
	}
	return f.limiterFor(p.rule)
}

// allowFailsafe decides a plan on its rule's failure mode's Limiter. A
// decision made without the store counts as a store error of the rule (the
// Group logs them); a Closed rule's refusal is a denial, not an error.
func (s *Service) allowFailsafe(ctx context.Context, p *plan, key string) (sluice.Result, error) {
	l := s.fb.limiterOf(p)
	res, fellBack, err := l.Decide(ctx, key, p.lim, int(p.cost))
	if fellBack {
		s.m.storeError(p.ctr, p.label)
		if l.Mode() == failsafe.Closed && errors.Is(err, sluice.ErrUnavailable) {
			return sluice.Result{RetryAfter: res.RetryAfter}, nil
		}
	}
	return res, err
}

// ownedLocal is the local store of a FailurePolicy without one: a memstore
// the Service creates on first use and Close closes.
type ownedLocal struct{ f *fallback }

var (
	_ sluice.Limiter  = ownedLocal{}
	_ sluice.Refunder = ownedLocal{}
)

func (o ownedLocal) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return o.AllowN(ctx, key, lim, 1)
}

func (o ownedLocal) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	l := o.f.localLimiter()
	if l == nil {
		return sluice.Result{}, errors.New("service: closed")
	}
	return l.AllowN(ctx, key, lim, cost)
}

func (o ownedLocal) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	l := o.f.localLimiter()
	if l == nil {
		return nil
	}
	return l.RefundN(ctx, key, lim, cost)
}

// localLimiter returns the owned local store, creating it on first use;
// nil after Close.
func (f *fallback) localLimiter() *memstore.Store {
	f.ownedMu.Lock()
	defer f.ownedMu.Unlock()
	if f.owned == nil && !f.closed {
		f.owned = memstore.New(memstore.Config{Clock: f.clock})
	}
	return f.owned
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
