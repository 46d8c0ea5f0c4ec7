package gateway

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/rlheader"
)

// Adaptive is an adaptive in-flight limit (max_in_flight: adaptive): the
// most requests forwarded at once follows the upstream's latency (package
// adaptive), so that an upstream slowing down past its capacity gets
// fewer, and the excess is shed with 503 and Retry-After, the lowest
// priority first.
type Adaptive struct {
	// Limiter configures the limiter: algorithm, initial limit, floor,
	// ceiling, window. Its zero value is adaptive's defaults.
	Limiter adaptive.Config
	// PriorityHeader, when not empty, is a request header that sets the
	// request's priority ("sheddable", "default" or "critical"): from a
	// trusted proxy (Config.TrustedProxies) to any priority, from any
	// other client only below its route's, so that a client can mark its
	// own work sheddable but never raise it. New refuses one that is no
	// header name.
	PriorityHeader string
}

// adaptiveLimiter is a limiter and the Adaptive it was made from, kept
// across Update while its Adaptive stays the same.
type adaptiveLimiter struct {
	spec Adaptive
	lim  *adaptive.Limiter
}

// GlobalAdaptiveName names Config.Adaptive's limit in the reason header,
// logs and httplimit's metrics; an upstream's is UpstreamAdaptiveName.
const GlobalAdaptiveName = "max_in_flight"

// UpstreamAdaptiveName names upstream's adaptive limit in the reason
// header, logs and httplimit's metrics: "max_in_flight:" and its name.
func UpstreamAdaptiveName(upstream string) string { return GlobalAdaptiveName + ":" + upstream }

// adaptiveFor returns the limiter of a (by name: "" for the global one),
// the one made before if a is unchanged, else a new one.
func (g *Gateway) adaptiveFor(name string, a *Adaptive) (*adaptive.Limiter, error) {
	if a == nil {
		return nil, nil
	}
	if a.PriorityHeader != "" {
		if err := keyHeader(a.PriorityHeader); err != nil {
			return nil, fmt.Errorf("priority header: %w", err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.adaptives == nil {
		g.adaptives = map[string]*adaptiveLimiter{}
	}
	if have := g.adaptives[name]; have != nil && have.spec == *a {
		return have.lim, nil
	}
	lim, err := adaptive.New(a.Limiter)
	if err != nil {
		return nil, err
	}
	g.adaptives[name] = &adaptiveLimiter{spec: *a, lim: lim}
	return lim, nil
}

// compileAdaptive makes the limiters of cfg's adaptive limits, global and
// per upstream, onto st; a route with a priority needs one of them.
func (g *Gateway) compileAdaptive(st *state, cfg *Config) error {
	var err error
	if st.global, err = g.adaptiveFor("", cfg.Adaptive); err != nil {
		return fmt.Errorf("gateway: max in flight: %w", err)
	}
	st.perUpstream = map[string]*adaptive.Limiter{}
	for _, u := range cfg.Upstreams {
		if u.Adaptive != nil && u.MaxInFlight > 0 {
			return fmt.Errorf("gateway: upstream %q: both a fixed and an adaptive max in flight", u.Name)
		}
		lim, err := g.adaptiveFor("upstream:"+u.Name, u.Adaptive)
		if err != nil {
			return fmt.Errorf("gateway: upstream %q: max in flight: %w", u.Name, err)
		}
		if lim != nil {
			st.perUpstream[u.Name] = lim
		}
	}
	st.priorities = map[string]adaptive.Priority{}
	for _, rt := range cfg.Routes {
		if rt.Priority == adaptive.Default {
			continue
		}
		up := cmp.Or(rt.Upstream, cfg.Upstreams[0].Name)
		if st.global == nil && st.perUpstream[up] == nil {
			return fmt.Errorf("gateway: route %q has a priority but neither its upstream nor the gateway has an adaptive max in flight", rt.Name)
		}
		st.priorities[rt.Name] = rt.Priority
	}
	return nil
}

// adaptiveShedding returns next behind u's adaptive limits (the gateway's,
// then u's own), or next itself when there are none: an httplimit
// Middleware of AdaptivePolicies whose refusal is the gateway's shed
// (503, Retry-After from the limiter, the access log's SHED).
func (g *Gateway) adaptiveShedding(st *state, u Upstream, route string, next http.Handler) (http.Handler, error) {
	var pols []httplimit.AdaptivePolicy
	prio := st.priority(route, st.cfg.Adaptive, st.cfg.TrustedProxies)
	if st.global != nil {
		pols = append(pols, httplimit.AdaptivePolicy{Name: GlobalAdaptiveName, Limiter: st.global, Priority: prio, Shadow: st.cfg.DryRun})
	}
	if lim := st.perUpstream[u.Name]; lim != nil {
		p := st.priority(route, u.Adaptive, st.cfg.TrustedProxies)
		pols = append(pols, httplimit.AdaptivePolicy{Name: UpstreamAdaptiveName(u.Name), Limiter: lim, Priority: p, Shadow: st.cfg.DryRun})
	}
	if len(pols) == 0 {
		return next, nil
	}
	m, err := httplimit.New(httplimit.Config{
		Adaptive:        pols,
		Settings:        httplimit.Settings{Logger: st.cfg.Logger, LogKeys: st.cfg.LogKeys, LogKeySecret: st.cfg.LogKeySecret, Observer: st.adaptiveObserver(route)},
		RefusalLevel:    refusalLevel(&st.cfg),
		RefusalLogEvery: RefusalLogEvery,
		Metrics:         st.cfg.Limits,
		WriteRejection: func(w http.ResponseWriter, r *http.Request, rej httplimit.Rejection) {
			n := writeProblem(w, rlheader.Problem{
				Title:  "Service Unavailable",
				Status: http.StatusServiceUnavailable,
				Detail: "the upstream is saturated; retry later",
			}, http.StatusServiceUnavailable)
			st.access(r, http.StatusServiceUnavailable, n, "SHED", rej.Policies)
			st.cfg.Metrics.outcome(route, "shed")
		},
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: route %q: %w", route, err)
	}
	return m.Handler(next), nil
}

// priority returns the priority function of route's requests under a:
// the route's priority, changed by a's PriorityHeader as Adaptive says.
func (st *state) priority(route string, a *Adaptive, trusted *clientip.Resolver) func(*http.Request) adaptive.Priority {
	base := st.priorities[route]
	if a == nil || a.PriorityHeader == "" {
		return func(*http.Request) adaptive.Priority { return base }
	}
	name := http.CanonicalHeaderKey(a.PriorityHeader)
	return func(r *http.Request) adaptive.Priority {
		vs := r.Header[name]
		if len(vs) == 0 || vs[0] == "" {
			return base
		}
		p, err := adaptive.ParsePriority(vs[0])
		if err != nil || (p > base && !trusted.TrustsPeer(r)) {
			return base
		}
		return p
	}
}

// refusalLevel is the level of httplimit's line per refusal: debug when
// the access log has the refusal's line.
func refusalLevel(cfg *Config) slog.Level {
	if cfg.AccessLog != nil {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
