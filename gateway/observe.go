package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/queue"
)

// observeShed hands a request the gateway shed itself to Config.Observer:
// metric "shed" (the upstream by was saturated) as policy "shed:by",
// anything else (a full queue) as policy metric; the key is the route.
func (st *state) observeShed(route, by, metric string) {
	o := st.cfg.Observer
	if o == nil {
		return
	}
	policy := metric
	if metric == "shed" {
		policy = "shed:" + by
	}
	o.Observe(httplimit.Decision{Policy: policy, Outcome: httplimit.Limited, Cost: 1, Key: route})
}

// routeKeyed is an Observer that gives a keyless refusal (an adaptive
// limit's shed) the route as its key, as the gateway's own sheds have.
type routeKeyed struct {
	o     httplimit.Observer
	route string
}

func (r routeKeyed) Observe(d httplimit.Decision) {
	if d.Key == "" && d.Outcome != httplimit.Allowed {
		d.Key = r.route
	}
	r.o.Observe(d)
}

// adaptiveObserver is the Observer of route's adaptive limits: nil
// without Config.Observer.
func (st *state) adaptiveObserver(route string) httplimit.Observer {
	if st.cfg.Observer == nil {
		return nil
	}
	return routeKeyed{st.cfg.Observer, route}
}

// ErrNoPolicy is Peek's error for a name that is no rate policy of the
// running config (an in-flight policy has no state to read).
var ErrNoPolicy = errors.New("gateway: no rate policy of that name")

// PolicyState is a key's state under a rate policy, as Peek reads it.
type PolicyState struct {
	// Policy and Route name the policy and the first route that has it.
	Policy, Route string
	// Limit is the policy's limit (a queued policy's, as its queue
	// decides it).
	Limit sluice.Limit
	// Key is the key the Limiter holds: the policy's key, scoped and
	// hashed as the routes decide it (httplimit.PolicyKey).
	Key string
	// Result is the key's state, read without spending (sluice.Peeker).
	Result sluice.Result
}

// Peek reads the state of key (what the policy's key function would
// return for a request, such as a client IP) under the running config's
// rate policy named policy, without spending: the Limiter must be a
// sluice.Peeker. Its error wraps ErrNoPolicy for an unknown name.
func (g *Gateway) Peek(ctx context.Context, policy, key string) (PolicyState, error) {
	cfg := &g.state.Load().cfg
	for _, rt := range cfg.Routes {
		for _, p := range rt.Policies {
			if p.Name != policy {
				continue
			}
			return peekPolicy(ctx, cfg, rt.Name, p, key)
		}
	}
	return PolicyState{}, fmt.Errorf("%w: %q", ErrNoPolicy, policy)
}

// peekPolicy reads key's state under p, a policy of route.
func peekPolicy(ctx context.Context, cfg *Config, route string, p httplimit.Policy, key string) (PolicyState, error) {
	ps := PolicyState{Policy: p.Name, Route: route, Limit: p.Limit, Key: httplimit.PolicyKey(p.Name, key, cfg.HashKeys)}
	if p.Queue != nil {
		q, err := queue.New(cfg.Limiter, *p.Queue)
		if err != nil {
			return ps, err
		}
		ps.Limit = q.Limit()
	}
	pk, ok := cfg.Limiter.(sluice.Peeker)
	if !ok {
		return ps, errors.New("gateway: the limiter cannot read a key without spending it")
	}
	var err error
	ps.Result, err = pk.Peek(ctx, ps.Key, ps.Limit)
	return ps, err
}
