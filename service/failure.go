package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/failsafe"
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
// no rule), default failsafe.Open, Envoy's own default; Local is the store
// of rules whose failure_mode is local (the caller picks it, such as a
// memstore.Store, and closes it): nil is an error of New when Mode is
// Local, and of New and SetRules when a rule's failure_mode is local (for a
// Rules that lists its rules, as *config.Config does; a local rule that
// another Rules returns is then answered with an error while the store
// fails); Logger nil means Config.Logger; Partitions 0 means
// DefaultPartitions, so that the failures of one key (a hot key whose calls
// time out) open only its partition of the breaker and every other tenant's
// keys keep going to the store (1 restores one breaker for every key). The
// zero FailurePolicy is usable.
type FailurePolicy = failsafe.Config

// DefaultPartitions is the number of partitions of the breaker of a
// FailurePolicy whose Partitions is 0: a hot key sends a sixteenth of the
// keys to the failure mode, and a store that fails for every key opens the
// whole breaker once four partitions are open (at most 36 failed calls with
// Threshold 3).
const DefaultPartitions = 16

// fallback applies a FailurePolicy: one failsafe.Group around the store.
type fallback struct {
	group    *failsafe.Group
	def      *failsafe.Limiter // the default mode's Limiter
	hasLocal bool              // FailurePolicy.Local is set
}

func newFallback(primary sluice.Limiter, p *FailurePolicy, log *slog.Logger) (*fallback, error) {
	if _, ok := primary.(*failsafe.Limiter); ok {
		return nil, errors.New("service: with Config.Failure, Config.Limiter must be the store itself, not a failsafe.Limiter")
	}
	if p.Primary != nil {
		return nil, errors.New("service: Config.Failure.Primary must be nil: Config.Limiter is the store")
	}
	if p.Mode == failsafe.Local && p.Local == nil {
		return nil, errors.New("service: Config.Failure.Mode is local but Config.Failure.Local is nil: pass the local store (such as a memstore.Store)")
	}
	f := &fallback{hasLocal: p.Local != nil}
	cfg := *p
	cfg.Primary = primary
	cfg.Logger = cmp.Or(cfg.Logger, log)
	cfg.Partitions = cmp.Or(cfg.Partitions, DefaultPartitions)
	g, err := failsafe.NewGroup(cfg)
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	f.group, f.def = g, g.Limiter(cfg.Mode)
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
		s.m.fallback(p.ctr, p.label, l.Mode())
		if l.Mode() == failsafe.Closed && errors.Is(err, sluice.ErrUnavailable) {
			return sluice.Result{RetryAfter: res.RetryAfter}, nil
		}
	}
	return res, err
}

// listedRules is a Rules that lists its rules, as *config.Config does.
type listedRules interface {
	RateLimits() iter.Seq[*config.RateLimit]
}

// checkRules refuses rules that f cannot serve: a rule whose failure_mode
// is local when the policy has no Local store. It can only see the rules
// of a Rules that lists them.
func (f *fallback) checkRules(r Rules) error {
	lr, ok := r.(listedRules)
	if c, isConfig := r.(*config.Config); f.hasLocal || !ok || isConfig && c == nil {
		return nil
	}
	for rl := range lr.RateLimits() {
		if rl.FailureMode == failsafe.Local.String() {
			return &config.Error{File: rl.File, Line: rl.Line, Msg: fmt.Sprintf(
				"rule %s has failure_mode: local, but the failure policy has no local store (service: Config.Failure.Local is nil)", policyName(rl))}
		}
	}
	return nil
}
