package httplimit

import "github.com/sluicehq/sluice"

// Outcome is how a policy's decision of a request ended: sluice.Outcome,
// the one type the service's and the middleware's observers share.
type Outcome = sluice.Outcome

// The outcomes of a decision (sluice's).
const (
	Allowed = sluice.OutcomeAllowed
	Limited = sluice.OutcomeLimited
	Shadow  = sluice.OutcomeShadow
)

// Decision is one policy's decision of one request, as Config.Observer
// receives it.
type Decision struct {
	// Policy is the name of the policy that decided.
	Policy string
	// Outcome is allowed, limited or shadow.
	Outcome Outcome
	// Cost is the units the request asked of the policy (1 for an
	// in-flight or adaptive policy).
	Cost int
	// Key is the policy's final key (scoped to the policy, and hashed when
	// Config.HashKeys says so), set only when Outcome is not Allowed, so
	// that an admitted request costs no key; empty for an adaptive
	// policy, which has none. It may hold a client's IP or API key: an
	// observer that shows it should hash it unless told it may not.
	Key string
}

// Observer receives every decision of a Middleware's policies: each rate
// policy that spent or refused a request, each in-flight or adaptive
// policy that refused one. Requests answered with an error (no key, an
// impossible cost, a failing limiter) are not observed. Observe is called
// on the request's goroutine, so it must be fast and safe for concurrent
// use; it must not keep d.Key past the call unless it means to.
type Observer interface {
	Observe(d Decision)
}

// observe hands a decision to Config.Observer, if any; key is dropped
// from an allowed decision.
func (m *Middleware) observe(policy string, o Outcome, cost int, key string) {
	if m.cfg.Observer == nil {
		return
	}
	if o == Allowed {
		key = ""
	}
	m.cfg.Observer.Observe(Decision{Policy: policy, Outcome: o, Cost: cost, Key: key})
}
