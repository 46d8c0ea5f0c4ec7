package service

import "github.com/sluicehq/sluice"

// Outcome is how a descriptor ended: sluice.Outcome, the one type the
// service's and the middleware's observers share.
type Outcome = sluice.Outcome

// The outcomes of a decision (sluice's).
const (
	Allowed = sluice.OutcomeAllowed
	Limited = sluice.OutcomeLimited
	Shadow  = sluice.OutcomeShadow
)

// Decision is one descriptor's decision, as Config.Observer receives it.
type Decision struct {
	// Domain is the request's domain.
	Domain string
	// Rule is the matched rule's full key; for a descriptor's limit
	// override, its rule's name (else the descriptor), or "_override"
	// when it matched no rule.
	Rule string
	// Outcome is allowed, limited or shadow.
	Outcome Outcome
	// Cost is the units the descriptor asked for.
	Cost uint64
	// Key is the descriptor's store key, raw: set only when Outcome is
	// Limited or Shadow, so that an allowed decision costs no key. An
	// observer that shows it should hash it (sluice.HashKey) unless the
	// operator allowed raw keys: it holds the descriptor's values.
	Key string
}

// Observer receives every spending decision of a Service: a descriptor
// matched by a limited rule (or a limit override) and decided by the
// store or a block rule. Descriptors that match no rule, unlimited rules
// and check-only or refunding descriptors (hits_addend 0, is_negative_hits
// under Config.AllowRefunds) are not observed, nor requests refused as
// malformed or failed by the store. Observe is called on the request's goroutine, so it must be fast
// and safe for concurrent use; it must not keep d.Key past the call unless
// it means to.
type Observer interface {
	Observe(d Decision)
}

// observe hands one decided descriptor to the Config.Observer, which is
// set.
func (s *Service) observe(domain string, p *plan, o outcome) {
	r := p.rule
	if r == nil || r.Unlimited || p.check {
		return
	}
	d := Decision{Domain: domain, Rule: r.FullKey, Cost: p.cost}
	if p.label == overrideLabel {
		d.Rule = overrideLabel
	}
	if o.denied {
		d.Outcome = Limited
		if p.shadow && !o.over {
			d.Outcome = Shadow
		}
		d.Key = s.keyOf(domain, p)
	}
	s.obs.Observe(d)
}

// keyOf returns p's store key: the one decide built and spent, or, for a
// plan decide did not take to the store (a block rule refused it unread),
// the one it would have built.
func (s *Service) keyOf(domain string, p *plan) string {
	if p.key != "" {
		return p.key
	}
	return s.storeKey(domain, p.entries)
}
