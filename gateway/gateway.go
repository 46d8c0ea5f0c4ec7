// Package gateway is a rate limiting reverse proxy: the job NGINX's
// limit_req and limit_conn do in front of a service that cannot change its
// code, with the headers of package httplimit.
//
// A Gateway routes each request by the patterns of its Routes (the syntax of
// net/http's ServeMux, "[METHOD ][HOST]/[PATH]", the most specific pattern
// winning), applies the route's httplimit policies (rate limits that reject
// at once, NGINX-style queues with burst, nodelay and delay=N, and
// in-flight limits per key), and passes what is admitted to the route's
// upstream through an httputil.ReverseProxy. A request no pattern matches
// goes to the default upstream with no limit.
//
// Three kinds of refusal are kept apart:
//
//   - a client over its rate or concurrency limit gets Config.StatusCode
//     (429 by default; 503 for NGINX's default) from httplimit, with
//     Retry-After, RateLimit, the reason header and a problem+json body;
//   - when the upstream is saturated (Upstream.MaxInFlight, or
//     Config.MaxInFlight for all of them) the gateway sheds the request with
//     503 and Retry-After, whoever sent it;
//   - when the upstream fails, the answer is 502 (504 on a timeout) with a
//     problem+json body; the upstream's address stays in the log.
//
// A route's Methods answer 403 to any other method, and a request whose
// body stalls for Timeouts.ClientBody gets 408.
//
// A request counts in flight (MaxInFlight, and the routes' concurrency
// policies) only while it is being served: its body, up to 16 KiB, is read
// before it takes its place, so that a client trickling its body holds
// none; a larger body streams to the upstream and counts meanwhile. Each
// read of a body and each write of a response has its own deadline
// (Timeouts), so uploads and streams are not cut while they make progress.
// A refusal is logged once (the access log's line, or the Logger's), and
// keys reach logs only as hashes unless Config.LogKeys.
//
// Matching looks at the request's canonical form (package request): the
// method in upper case, the path decoded with no "//", "." or ".." segment
// and no trailing slash, the host in lower case without port or trailing
// dot, as NGINX's $host; "/public/../admin", "/%61dmin/" and, read first
// as a slash, "/admin%2Fx" are limited under "/admin" (a request whose
// two readings of "%2F", as a slash and as ServeMux reads it, match two
// routes is limited by both). The upstream
// receives the request as the client sent it, save that an upstream with a
// base path gets the canonical path under it (nothing left to resolve
// above the base; "/x%2F..%2F..%2Fsecret" is 400). A request with no canonical
// form (a malformed Host such as "api.example.com..") is answered 400.
// Unlike ServeMux, the gateway never redirects.
//
// Responses stream: the ReverseProxy flushes at once when the upstream sends
// no Content-Length or an event stream, so long polls and server-sent
// events pass without buffering. Hop-by-hop headers are dropped and
// X-Forwarded-For, -Host and -Proto are set as ReverseProxy's
// SetXForwarded does; an incoming X-Forwarded-For, -Host and -Proto are
// kept only from a trusted proxy. When TrustedProxies reads RFC 7239
// Forwarded, the upstream also gets a Forwarded chain: a trusted proxy's
// elements followed by this hop's (for, host, proto).
//
// Update swaps the routes and limits of a running Gateway at once, with no
// request lost; requests already in flight finish under the configuration
// they started with. In-flight counts carry over: per upstream, in total,
// and per concurrency policy (by name, whose counts every route naming the
// policy shares, as NGINX's limit_conn zones are).
package gateway

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/loggate"
	"github.com/sluicehq/sluice/request"
	"github.com/sluicehq/sluice/rlheader"
)

// Upstream is a server the gateway forwards to.
type Upstream struct {
	// Name identifies the upstream in routes, logs and metrics. Not empty,
	// unique.
	Name string
	// URL is where requests go: scheme, host and an optional base path,
	// which is joined to the request's path (in canonical form, so that
	// no ".." reaches above the base).
	URL *url.URL
	// MaxInFlight is the most requests forwarded to this upstream at once;
	// beyond it the gateway sheds load with 503. 0 means no limit.
	MaxInFlight int
	// Adaptive, when not nil, is an adaptive limit on the requests
	// forwarded to this upstream at once, instead of MaxInFlight (which
	// must then be 0); beyond it the gateway sheds load with 503.
	Adaptive *Adaptive
	// PreserveHost passes the client's Host header on, rather than the
	// upstream's host (NGINX's proxy_set_header Host $host).
	PreserveHost bool
	// PathSemantics is how the upstream reads a request's path, which
	// decides which spellings of a path match its routes' patterns (see
	// request.PathSemantics): under PathCaseInsensitive, "/LOGIN" matches
	// the pattern "/login" and spends its limits. The zero value,
	// PathStrict, matches the canonical path as it is. The request is
	// forwarded as sent, whatever the semantics. A route's patterns must
	// be written as its upstream's semantics folds them (lower case under
	// case_insensitive and iis, no ";" under servlet).
	PathSemantics request.PathSemantics
}

// Route is a set of patterns and what applies to the requests they match.
type Route struct {
	// Name identifies the route in logs, metrics and the "route" key.
	// Not empty, unique.
	Name string
	// Patterns are ServeMux patterns, "[METHOD ][HOST]/[PATH]": a path
	// ending in "/" matches its whole subtree, {name} matches one segment
	// and {name...} the rest. At least one.
	Patterns []string
	// Methods, when not empty, are the only methods the route lets
	// through: a request its patterns match with another method is
	// answered 403 Forbidden and spends no limit, as NGINX's
	// limit_except METHODS { deny all; }. GET allows HEAD too. Patterns
	// of such a route name no method.
	Methods []string
	// Upstream names the upstream; "" is the first of Config.Upstreams.
	Upstream string
	// Policies are the route's rate limits, in order (httplimit.Policy:
	// reject at once, or queue when Policy.Queue is set). A policy name
	// used by several routes shares its allowances between them, as an
	// NGINX zone does. The header (and trailer) a policy's Settle reads
	// the actual cost from (Settle.Header, or Sluice-Cost; none with a
	// Settle.Cost) is accounting between the upstream and the gateway:
	// the client never receives it, as with NGINX's proxy_hide_header.
	Policies []httplimit.Policy
	// Concurrency are the route's in-flight limits per key (limit_conn).
	Concurrency []httplimit.ConcurrencyPolicy
	// Priority is the route's requests' priority under the adaptive
	// limits (Config.Adaptive, Upstream.Adaptive): the lowest is shed
	// first. The zero value is adaptive.Default; another needs an
	// adaptive limit on the route's upstream or the gateway.
	Priority adaptive.Priority
}

// Config configures a Gateway.
type Config struct {
	// Upstreams are the servers behind the gateway; the first is the
	// default. At least one.
	Upstreams []Upstream
	// Routes say which limits apply to which requests.
	Routes []Route
	// Settings are the routes' Middlewares' (see httplimit.Settings).
	// Limiter decides every rate limit, required if a route has policies;
	// StatusCode is NGINX's limit_req_status, ConcurrencyStatusCode its
	// limit_conn_status.
	// A refused request is logged once: in AccessLog when there is one
	// (Logger then has it at debug level only), else in Logger at info
	// level. Observer is handed too every request the gateway sheds
	// itself (max in flight, a full queue): Policy "shed:" and the
	// upstream, or "queue_full", Key the route. Wait replaces the timer of
	// the routes' queues.
	httplimit.Settings
	// DryRun counts and logs what every policy would refuse, and refuses
	// and delays nothing (limit_req_dry_run, limit_conn_dry_run).
	DryRun bool
	// MaxInFlight is the most requests forwarded at once to all upstreams
	// together; beyond it the gateway sheds load with 503. 0: no limit.
	MaxInFlight int
	// Adaptive, when not nil, is an adaptive limit on the requests
	// forwarded at once to all upstreams together, taken before an
	// upstream's own; beyond it the gateway sheds load with 503.
	Adaptive *Adaptive
	// ClientMaxBodySize is the largest request body accepted, in bytes
	// (NGINX's client_max_body_size). A request whose Content-Length is
	// larger is answered 413 once its route is known, before its body is
	// read and before any limit, so it is charged nothing (as NGINX checks
	// it before its access phases); a body of unknown length (chunked) is
	// answered 413 once it grows past the cap, after the limits, as NGINX
	// reads it. The connection is closed after a 413. 0: 1 MiB, NGINX's
	// default; negative: no cap.
	ClientMaxBodySize int64
	// InFlight, when set, counts the requests in flight of every
	// concurrency policy without Slots of its own, instead of the
	// Gateway's in-process counts: redisstore.Leases shares limit_conn
	// across proxies on one Redis. Its failures follow
	// httplimit.InFlight's policy.
	InFlight httplimit.InFlight
	// TrustedProxies decides whose X-Forwarded-For is believed, both for
	// the client-IP keys of Routes and for the header sent upstream.
	// Nil trusts no proxy.
	TrustedProxies *clientip.Resolver
	// Transport sends requests upstream; nil is a clone of
	// http.DefaultTransport with more idle connections per host,
	// UpstreamTimeout, and compression left to the client and upstream.
	Transport http.RoundTripper
	// UpstreamTimeout bounds the wait for an upstream's response headers
	// with the default Transport; past it the answer is 504. 0: no bound.
	UpstreamTimeout time.Duration
	// Timeouts bound slow clients. The Gateway applies ClientBody and
	// Send to each request; ClientHeader and Keepalive are for the
	// http.Server that serves it (see Timeouts.Server). Zero fields are
	// NGINX's defaults.
	Timeouts Timeouts
	// AccessLog receives one line per request a policy refuses, the
	// gateway sheds or cannot forward, in NGINX's combined format followed
	// by the outcome and the policy. Nil logs none.
	AccessLog io.Writer
	// AccessLogJSON writes AccessLog's lines as JSON objects instead, one
	// per line, with the keys of sluice's JSON logs (see access): for a
	// log pipeline that reads the program's other lines as JSON. False
	// (the zero value) is NGINX's combined format.
	AccessLogJSON bool
	// Limits and Metrics, when not nil, count decisions (httplimit) and
	// the gateway's own outcomes. Reuse them across Update.
	Limits  *httplimit.Metrics
	Metrics *Metrics
	// MaxQueued is the most requests waiting in the queues of policies
	// with a Queue at once, all routes together; beyond it a request that
	// would wait is answered 503 with Retry-After and charged nothing. Each
	// waiting request holds its connection's (or HTTP/2 stream's) memory,
	// and the keys of a header can be many: burst bounds one key's queue,
	// this bounds them all. 0 is DefaultMaxQueued; negative, no bound.
	MaxQueued int
	// Plans, when not nil, gives each request its tenant's limits (its
	// plan's and overrides') in place of the routes' limits with an
	// algorithm; see Plans. Nil: every request gets the routes' limits.
	Plans *Plans

	// index is Routes' patterns as ParseFile registered them, which New
	// and Update use while they still fit Routes; nil: they register
	// them.
	index *patternIndex
}

// DefaultMaxQueued is Config.MaxQueued's default.
const DefaultMaxQueued = 4096

// Gateway is a rate limiting reverse proxy. It is an http.Handler, safe for
// concurrent use.
type Gateway struct {
	state     atomic.Pointer[state]
	inflight  atomic.Int64 // forwarded now, all upstreams
	queued    atomic.Int64 // waiting in a queue now, all routes
	transport http.RoundTripper

	mu       sync.Mutex
	counters map[string]*atomic.Int64    // per upstream name, kept across Update
	slots    map[string]*httplimit.Slots // per concurrency policy name, likewise
	// adaptives are the adaptive limiters, "" the global one, else by
	// "upstream:" and the upstream's name; kept across Update.
	adaptives map[string]*adaptiveLimiter
	logMu     sync.Mutex
}

// state is one configuration, compiled.
type state struct {
	cfg      Config
	mux      *http.ServeMux // the patterns of cfg.Routes; its handlers are routeRefs into routes
	routes   []*route       // cfg.Routes', compiled, in order
	fallback *route
	// folded holds, for each semantics other than PathStrict that an
	// upstream of a route has, the patterns of those routes (matchFolded).
	folded   []foldedMux
	logMu    *sync.Mutex // the access log's, shared across Update
	timeouts Timeouts    // cfg.Timeouts with defaults
	maxBody  int64       // cfg.ClientMaxBodySize with its default; <= 0: no cap

	global      *adaptive.Limiter            // cfg.Adaptive's
	perUpstream map[string]*adaptive.Limiter // by upstream name, for those with Adaptive
	priorities  map[string]adaptive.Priority // by route name, those not Default

	// upstreamLog bounds each upstream's "upstream failed" lines as
	// refusals are (RefusalLogEvery), by upstream name.
	upstreamLog map[string]*loggate.Gate
}

type route struct {
	name    string
	sem     request.PathSemantics // its upstream's
	handler http.Handler          // wrap(the route's forwarder)
	// wrap puts the route's method check and limits in front of next.
	wrap func(next http.Handler) http.Handler
}

// New checks cfg and returns a Gateway.
func New(cfg Config) (*Gateway, error) {
	g := &Gateway{counters: map[string]*atomic.Int64{}, slots: map[string]*httplimit.Slots{}}
	g.transport = cfg.Transport
	if g.transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256
		t.MaxIdleConns = 1024
		// Pass Accept-Encoding as the client sent it, and the body as the
		// upstream sent it: a proxy does not ask for gzip on a client's
		// behalf and then inflate it itself.
		t.DisableCompression = true
		t.ResponseHeaderTimeout = cfg.UpstreamTimeout
		g.transport = t
	}
	if err := g.Update(cfg); err != nil {
		return nil, err
	}
	return g, nil
}

// Update replaces the Gateway's configuration. On error the running one is
// kept. Transport and UpstreamTimeout are New's and are not changed.
func (g *Gateway) Update(cfg Config) error {
	st, err := g.compile(cfg)
	if err != nil {
		return err
	}
	g.state.Store(st)
	return nil
}

// Close closes the idle connections to the upstreams.
func (g *Gateway) Close() {
	if t, ok := g.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// counter returns the in-flight count of the upstream name, kept across
// Update.
func (g *Gateway) counter(name string) *atomic.Int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return getOrNew(g.counters, name)
}

// slotsFor returns the in-flight counts of the concurrency policy name,
// shared by every route that names it and kept across Update.
func (g *Gateway) slotsFor(name string) *httplimit.Slots {
	g.mu.Lock()
	defer g.mu.Unlock()
	return getOrNew(g.slots, name)
}

// getOrNew returns m[name], storing a new zero V there first if it has
// none.
func getOrNew[V any](m map[string]*V, name string) *V {
	v := m[name]
	if v == nil {
		v = new(V)
		m[name] = v
	}
	return v
}

// compile checks cfg and builds the state that serves it: its upstreams,
// and a route for each of its routes on the mux, the fallback forwarding
// anything else to the first upstream.
func (g *Gateway) compile(cfg Config) (*state, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := cfg.checkLimits(); err != nil {
		return nil, err
	}
	if err := cfg.Plans.check(); err != nil {
		return nil, err
	}
	ups, err := upstreamsByName(cfg.Upstreams)
	if err != nil {
		return nil, err
	}
	st := &state{cfg: cfg, logMu: &g.logMu, timeouts: cfg.Timeouts.WithDefaults(), maxBody: cfg.ClientMaxBodySize}
	if st.maxBody == 0 {
		st.maxBody = DefaultClientMaxBodySize
	}
	st.upstreamLog = make(map[string]*loggate.Gate, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		st.upstreamLog[u.Name] = &loggate.Gate{Every: RefusalLogEvery}
	}
	if err := g.compileAdaptive(st, &cfg); err != nil {
		return nil, err
	}
	index := cfg.index // registered already, when it fits
	if !index.fits(cfg.Routes) {
		index = newPatternIndex()
	}
	st.mux = index.mux
	names := map[string]bool{}
	for _, rt := range cfg.Routes {
		if rt.Name == "" {
			return nil, errors.New("gateway: a route has no name")
		}
		if names[rt.Name] {
			return nil, fmt.Errorf("gateway: two routes are named %q", rt.Name)
		}
		names[rt.Name] = true
		if err := g.addRoute(st, ups, rt, index); err != nil {
			return nil, err
		}
	}
	fwd, err := g.forwarder(st, cfg.Upstreams[0], Unmatched, nil, false)
	if err != nil {
		return nil, err
	}
	st.fallback = &route{name: Unmatched, handler: fwd}
	return st, nil
}

// checkLimits refuses a config without upstream, a negative in-flight
// bound and trusted proxies that do not validate.
func (cfg *Config) checkLimits() error {
	if len(cfg.Upstreams) == 0 {
		return errors.New("gateway: no upstream")
	}
	if cfg.MaxInFlight < 0 {
		return fmt.Errorf("gateway: max in flight %d is negative", cfg.MaxInFlight)
	}
	if cfg.TrustedProxies != nil {
		if err := cfg.TrustedProxies.Validate(); err != nil {
			return fmt.Errorf("gateway: trusted proxies: %w", err)
		}
	}
	return nil
}

// upstreamsByName checks the upstreams (a name, unique; an http or https
// URL with a host; no negative in-flight bound) and maps them by name.
func upstreamsByName(list []Upstream) (map[string]Upstream, error) {
	ups := map[string]Upstream{}
	for i, u := range list {
		if u.Name == "" {
			return nil, fmt.Errorf("gateway: upstream %d has no name", i+1)
		}
		if _, dup := ups[u.Name]; dup {
			return nil, fmt.Errorf("gateway: two upstreams are named %q", u.Name)
		}
		if u.URL == nil || (u.URL.Scheme != "http" && u.URL.Scheme != "https") || u.URL.Host == "" {
			return nil, fmt.Errorf("gateway: upstream %q: the URL must be http:// or https:// with a host", u.Name)
		}
		if u.MaxInFlight < 0 {
			return nil, fmt.Errorf("gateway: upstream %q: max in flight %d is negative", u.Name, u.MaxInFlight)
		}
		ups[u.Name] = u
	}
	return ups, nil
}

// addRoute compiles rt as st's next route: its method filter, then its
// limits, then its forwarder to its upstream; and registers its patterns
// on index, unless they are there already (index is st's, built for
// st.cfg.Routes).
func (g *Gateway) addRoute(st *state, ups map[string]Upstream, rt Route, index *patternIndex) error {
	if len(rt.Patterns) == 0 {
		return fmt.Errorf("gateway: route %q has no pattern", rt.Name)
	}
	wrap, fwd, err := g.routeLimits(st, ups, rt)
	if err != nil {
		return err
	}
	if len(rt.Methods) > 0 {
		limits := wrap
		wrap = func(next http.Handler) http.Handler {
			return st.onlyMethods(rt, limits(next)) // before any limit: a denied request spends none
		}
	}
	i := len(st.routes)
	sem := upstreamOf(st, ups, rt).PathSemantics
	st.routes = append(st.routes, &route{name: rt.Name, sem: sem, handler: wrap(fwd), wrap: wrap})
	if sem != request.PathStrict {
		if err := st.addFolded(i, sem, rt); err != nil {
			return err
		}
	}
	if index != st.cfg.index {
		for _, p := range rt.Patterns {
			if err := index.add(i, p); err != nil {
				return fmt.Errorf("gateway: route %q: %w", rt.Name, err)
			}
		}
	}
	return nil
}

// upstreamOf returns rt's upstream (the first of st's when it names none;
// the zero Upstream for a name that is not in ups, which routeLimits has
// refused already).
func upstreamOf(st *state, ups map[string]Upstream, rt Route) Upstream {
	if rt.Upstream == "" {
		return st.cfg.Upstreams[0]
	}
	return ups[rt.Upstream]
}

// addFolded registers the patterns of rt, the i-th route, whose upstream
// reads paths as sem, on st's folded mux of sem (made on first use),
// refusing a pattern that no folded path matches.
func (st *state) addFolded(i int, sem request.PathSemantics, rt Route) error {
	k := slices.IndexFunc(st.folded, func(f foldedMux) bool { return f.sem == sem })
	if k < 0 {
		st.folded = append(st.folded, foldedMux{sem: sem, mux: http.NewServeMux()})
		k = len(st.folded) - 1
	}
	for _, p := range rt.Patterns {
		if err := checkFoldedPattern(p, sem); err != nil {
			return fmt.Errorf("gateway: route %q: %w", rt.Name, err)
		}
		if err := register(st.folded[k].mux, p, routeRef(i)); err != nil {
			return fmt.Errorf("gateway: route %q: %w", rt.Name, err)
		}
	}
	return nil
}

// routeLimits returns the route's limits, in front of any handler, and its
// forwarder.
func (g *Gateway) routeLimits(st *state, ups map[string]Upstream, rt Route) (func(http.Handler) http.Handler, http.Handler, error) {
	cfg := &st.cfg
	up := cfg.Upstreams[0].Name
	if rt.Upstream != "" {
		up = rt.Upstream
	}
	u, ok := ups[up]
	if !ok {
		return nil, nil, fmt.Errorf("gateway: route %q: no upstream named %q", rt.Name, rt.Upstream)
	}
	hide, err := costHeaders(rt.Policies)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: route %q: %w", rt.Name, err)
	}
	h, err := g.forwarder(st, u, rt.Name, hide, readsResponse(rt.Policies))
	if err != nil {
		return nil, nil, err
	}
	if len(rt.Policies) == 0 && len(rt.Concurrency) == 0 {
		return func(next http.Handler) http.Handler { return next }, h, nil
	}
	pol := slices.Clone(rt.Policies) // the caller's are not changed
	st.cfg.Plans.apply(pol)
	conc := slices.Clone(rt.Concurrency)
	for i := range conc {
		switch {
		case conc[i].Slots != nil || conc[i].InFlight != nil:
		case cfg.InFlight != nil:
			conc[i].InFlight = cfg.InFlight
		default:
			conc[i].Slots = g.slotsFor(conc[i].Name)
		}
	}
	if cfg.DryRun {
		for i := range pol {
			pol[i].Shadow = true
		}
		for i := range conc {
			conc[i].Shadow = true
		}
	}
	m, err := httplimit.New(g.limitsConfig(st, rt.Name, pol, conc))
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: route %q: %w", rt.Name, err)
	}
	return m.Handler, h, nil
}

// RefusalLogEvery is how often, at most, a route logs a refused request
// on the logger (httplimit.Config.RefusalLogEvery): the first refusal of
// each 10 s, with the count of those not logged since the last line. The
// access log, when there is one, has a line per request; the metrics
// count every refusal.
const RefusalLogEvery = 10 * time.Second

// limitsConfig returns the httplimit config of route's policies: the
// gateway's settings, its queue wait and body read-ahead, and its access
// log and metrics for errors and refusals.
func (g *Gateway) limitsConfig(st *state, route string, pol []httplimit.Policy, conc []httplimit.ConcurrencyPolicy) httplimit.Config {
	cfg := &st.cfg
	// A refusal is one line: the access log's when there is one; else the
	// logger's, at most one per RefusalLogEvery per route, the rest
	// counted into the next (and so for shadow policies' would-be
	// refusals, which the access log does not show).
	refusalLevel := slog.LevelInfo
	if cfg.AccessLog != nil {
		refusalLevel = slog.LevelDebug
	}
	refusals := newRefusalBodies(cmp.Or(cfg.StatusCode, http.StatusTooManyRequests), pol) // httplimit's default status
	settings := cfg.Settings
	settings.Wait = g.boundedWait(st, route)
	return httplimit.Config{
		Settings:        settings,
		Policies:        pol,
		Concurrency:     conc,
		RefusalLevel:    refusalLevel,
		RefusalLogEvery: RefusalLogEvery,
		Metrics:         cfg.Limits,
		Ready:           func(w http.ResponseWriter, r *http.Request) bool { return st.readAhead(w, r, route) },
		OnError: func(r *http.Request, status int, policy string) {
			outcome := "UNAVAILABLE"
			switch status {
			case http.StatusBadRequest:
				outcome = "NO_KEY"
			case http.StatusInternalServerError:
				outcome = "BAD_COST"
			}
			st.access(r, status, -1, outcome, []string{policy})
			cfg.Metrics.outcome(route, "error")
		},
		WriteRejection: func(w http.ResponseWriter, r *http.Request, rej httplimit.Rejection) {
			n := refusals.write(w, r, rej)
			st.access(r, rej.Status, n, "REJECTED", rej.Policies)
			cfg.Metrics.outcome(route, "rejected")
		},
	}
}

// ServeHTTP routes r, applies its route's limits and forwards it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := g.state.Load()
	sw := &sendWriter{ResponseWriter: w, dl: deadlinesOf(w), d: st.timeouts.Send}
	rt, r := st.match(sw, r)
	if rt == nil {
		return // malformed: match answered 400
	}
	if r.ProtoMajor == 1 {
		// For the server's last flush, after the handler. (An HTTP/2
		// stream's deadline ends with the stream; its connection has
		// its own.)
		defer sw.arm()
		// And for its discarding of a body the handler left unread.
		defer st.boundDiscard(sw, r)
	}
	if !st.capBody(sw, r, rt.name) {
		return
	}
	rt.handler.ServeHTTP(sw, r)
}

// Unmatched is the route name, in logs and metrics, of the requests no
// pattern matches.
const Unmatched = "-"

// rewrite returns the proxy's Rewrite for upstream u: the forwarding
// headers a client sent are kept only from a trusted proxy (as the ip key
// decides), this hop's are added (X-Forwarded-*, and Forwarded when the
// resolver reads RFC 7239's), and the request goes to u's URL.
func rewrite(trusted *clientip.Resolver, u Upstream) func(*httputil.ProxyRequest) {
	target := u.URL
	return func(pr *httputil.ProxyRequest) {
		// Keep the client's X-Forwarded-For only from a trusted proxy;
		// SetXForwarded then appends the peer.
		fromProxy := trusted.TrustsPeer(pr.In) // as the ip key decides
		if !fromProxy {
			// NGINX's X-Real-IP, which applications behind it read,
			// is a trusted proxy's to tell, as X-Forwarded-For.
			delete(pr.Out.Header, "X-Real-Ip")
		}
		if fromProxy {
			if v := pr.In.Header.Values("X-Forwarded-For"); len(v) > 0 {
				pr.Out.Header["X-Forwarded-For"] = v
			}
		}
		dropUnderscoreForwarding(pr.Out.Header)
		dropH2CUpgrade(pr.Out.Header)
		pr.SetURL(target)
		pr.SetXForwarded()
		if fromProxy {
			// The host and scheme the client used are the trusted
			// proxy's to tell (it may have terminated TLS), not this
			// hop's.
			for _, k := range []string{"X-Forwarded-Host", "X-Forwarded-Proto"} {
				if v := pr.In.Header.Values(k); len(v) > 0 {
					pr.Out.Header[k] = v
				}
			}
		}
		if trusted != nil && trusted.Header == clientip.Forwarded {
			// RFC 7239 chosen: pass the trusted chain on and add this
			// hop's element, as SetXForwarded does for X-Forwarded-For.
			var chain []string
			if fromProxy {
				chain = pr.In.Header.Values("Forwarded")
			}
			pr.Out.Header["Forwarded"] = append(chain[:len(chain):len(chain)], forwardedElement(pr.In))
		}
		if u.PreserveHost {
			pr.Out.Host = pr.In.Host
		}
	}
}

// forwarder returns the handler of route that sheds load beyond the
// in-flight limits (fixed, then adaptive) and forwards the rest to u,
// whose response reaches the client without the headers and trailers
// named in hide (the route's cost headers). When drains (the route's
// limits read the response), a request goes on upstream for a while after
// its client left (see drain.go), so that it is charged the upstream's
// answer.
func (g *Gateway) forwarder(st *state, u Upstream, route string, hide []string, drains bool) (http.Handler, error) {
	target := u.URL
	rp := &httputil.ReverseProxy{
		Transport:  g.transport,
		Rewrite:    rewrite(st.cfg.TrustedProxies, u),
		BufferPool: copyBuffers,
		ErrorLog:   log.New(slogWriter{st.cfg.Logger}, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			st.upstreamError(w, r, route, u.Name, err)
		},
	}
	if len(hide) > 0 {
		rp.ModifyResponse = hideOnUpgrade(hide)
	}
	if drains {
		rp.ModifyResponse = drainResponse(rp.ModifyResponse)
	}
	mine := g.counter(u.Name)
	based := target.Path != "" && target.Path != "/"
	forward, err := g.adaptiveShedding(st, u, route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st.cfg.Metrics.outcome(route, "forwarded")
		st.cfg.Metrics.inflight(u.Name, 1)
		defer st.cfg.Metrics.inflight(u.Name, -1)
		if len(w.Header()) > 0 {
			w = keepHeadersOf(w)
		}
		if len(hide) > 0 {
			hc := &hideCost{ResponseWriter: w, names: hide}
			defer hc.finish()
			w = hc
		}
		if b, ok := r.Body.(*clientBody); ok && b.rest != nil {
			w = &streamingBody{ResponseWriter: w, body: b} // for upstreamError
		}
		if drains {
			var end func()
			r, end = outliveClient(r, w.Header())
			defer end()
		}
		rp.ServeHTTP(w, r)
	}))
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if based {
			var ok bool
			if r, ok = st.underBase(w, r, route); !ok {
				return
			}
		}
		// A request counts in flight once its body is here (or streams).
		if !st.readAhead(w, r, route) {
			return
		}
		total := g.inflight.Add(1)
		defer g.inflight.Add(-1)
		n := mine.Add(1)
		defer mine.Add(-1)
		if (st.cfg.MaxInFlight > 0 && total > int64(st.cfg.MaxInFlight)) || (u.MaxInFlight > 0 && n > int64(u.MaxInFlight)) {
			st.shed(w, r, route, u.Name)
			return
		}
		forward.ServeHTTP(w, r)
	}), nil
}

// underBase returns r with its path in canonical form, for an upstream
// with a base path: the upstream joins the path to its base, so a "..",
// "%2E%2E" or "//" left in it would resolve above the base, out of the
// part of the upstream the proxy serves. A path whose encoded slashes
// would climb above the base once decoded ("/x%2F..%2F..%2Fsecret") is
// answered 400, and underBase returns false.
func (st *state) underBase(w http.ResponseWriter, r *http.Request, route string) (*http.Request, bool) {
	c, err := request.Of(r)
	if err == nil && (strings.Contains(c.Path, "..%2F") || strings.Contains(c.Path, "%2F..")) {
		err = &request.Error{Part: "path", Reason: "an encoded slash next to a .. segment"}
	}
	if err != nil {
		st.malformed(w, r, err)
		return r, false
	}
	if c.Path == r.URL.EscapedPath() {
		return r, true
	}
	u := *r.URL
	u.Path, u.RawPath = c.Path, ""
	if strings.IndexByte(c.Path, '%') >= 0 {
		u.Path, _ = url.PathUnescape(c.Path) // canonical: its escapes are valid
		u.RawPath = c.Path
	}
	l := *r
	l.URL = &u
	return &l, true
}

// keepHeaders puts back, on the final response, the headers set before the
// request was forwarded (httplimit's RateLimit and RateLimit-Policy), which
// ReverseProxy clears after forwarding an upstream's 1xx (100 Continue, 103
// Early Hints).
type keepHeaders struct {
	http.ResponseWriter
	saved   []savedHeader // in few, which holds the usual ones
	few     [4]savedHeader
	cleared bool // a 1xx was written, and the header map cleared after it
}

// savedHeader is a header's name and values (shared, not copied).
type savedHeader struct {
	name   string
	values []string
}

// keepHeadersOf wraps w, keeping the headers set on it now, in one
// allocation when they are four at most.
func keepHeadersOf(w http.ResponseWriter) *keepHeaders {
	k := &keepHeaders{ResponseWriter: w}
	k.saved = k.few[:0]
	for name, v := range w.Header() {
		k.saved = append(k.saved, savedHeader{name, v})
	}
	return k
}

func (k *keepHeaders) WriteHeader(code int) {
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		k.cleared = true
	} else if k.cleared {
		k.cleared = false
		h := k.ResponseWriter.Header()
		for _, s := range k.saved {
			h[s.name] = append(s.values[:len(s.values):len(s.values)], h[s.name]...)
		}
	}
	k.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController (ReverseProxy's flushes and
// hijacks) reach the underlying ResponseWriter.
func (k *keepHeaders) Unwrap() http.ResponseWriter { return k.ResponseWriter }

// copyBuffers lends the ReverseProxies their buffers for copying response
// bodies, which each would otherwise allocate (32 KiB) for every response.
var copyBuffers = &bufferPool{}

// bufferPool is an httputil.BufferPool of 32 KiB buffers. It pools them
// as array pointers, which a slice of the whole buffer converts back to,
// so that a Put allocates nothing.
type bufferPool struct{ p sync.Pool }

// copyBufferSize is the size of bufferPool's buffers.
const copyBufferSize = 32 << 10

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[copyBufferSize]byte); ok {
		return v[:]
	}
	return make([]byte, copyBufferSize)
}

func (b *bufferPool) Put(buf []byte) {
	if cap(buf) == copyBufferSize {
		b.p.Put((*[copyBufferSize]byte)(buf[:copyBufferSize]))
	}
}

// shed answers 503 when the upstream is saturated.
func (st *state) shed(w http.ResponseWriter, r *http.Request, route, upstream string) {
	st.unavailable(w, r, route, "the upstream is saturated; retry later", "SHED", upstream, "shed")
}

// unavailable answers 503 with Retry-After 1 (load shedding, not a rate
// limit), logs outcome with by and counts metric for the route.
func (st *state) unavailable(w http.ResponseWriter, r *http.Request, route, detail, outcome, by, metric string) {
	h := w.Header()
	h.Set("Retry-After", "1")
	h.Set("Cache-Control", "no-store")
	n := writeProblem(w, rlheader.Problem{
		Title:  "Service Unavailable",
		Status: http.StatusServiceUnavailable,
		Detail: detail,
	}, http.StatusServiceUnavailable)
	st.access(r, http.StatusServiceUnavailable, n, outcome, []string{by})
	st.cfg.Metrics.outcome(route, metric)
	st.observeShed(route, by, metric)
}

// upstreamError answers 502, or 504 on a timeout, when forwarding failed.
func (st *state) upstreamError(w http.ResponseWriter, r *http.Request, route, upstream string, err error) {
	if sb, ok := w.(*streamingBody); ok {
		switch {
		case sb.body.timedOut.Load():
			// The client's body stalled on its way to the upstream: the
			// client's fault, not the upstream's.
			st.bodyTimeout(sb.ResponseWriter, r, route)
			return
		case sb.body.tooLarge.Load():
			// The client's body grew past the cap on its way.
			st.bodyTooLarge(sb.ResponseWriter, r, route)
			return
		}
	}
	if clientLeft(r) {
		// The client left; there is no one to answer.
		st.cfg.Metrics.outcome(route, "cancelled")
		return
	}
	status, title := http.StatusBadGateway, "Bad Gateway"
	if isTimeout(err) {
		status, title = http.StatusGatewayTimeout, "Gateway Timeout"
	}
	// At most one line per RefusalLogEvery per upstream, the rest counted
	// into the next: a down upstream under load is not a line per request.
	// compile gives every upstream of the config a gate.
	if ok, skipped := st.upstreamLog[upstream].Allow(); ok {
		st.cfg.Logger.Warn("gateway: upstream failed", skipped.Attrs([]any{"upstream", upstream, "method", r.Method, "path", r.URL.Path, "status", status, "err", err})...)
	}
	w.Header().Set("Cache-Control", "no-store")
	n := writeProblem(w, rlheader.Problem{
		Title: title, Status: status,
		Detail: "the upstream " + strconv.Quote(upstream) + " did not answer",
	}, status)
	st.access(r, status, n, "UPSTREAM_ERROR", []string{upstream})
	st.cfg.Metrics.outcome(route, "upstream_error")
}

// refusalBodies are the 429 bodies of one route's policies, made once
// when the route is: a refusal of one policy with the status they were
// made for writes its body and Content-Length as they are, without
// encoding JSON or formatting a length per request. Read only once made.
type refusalBodies struct {
	status int
	byName map[string]refusalBody
}

// refusalBody is one policy's refusal: the problem's JSON and its
// Content-Length header value, shared by every refusal (net/http never
// writes into a header's values).
type refusalBody struct {
	body          []byte
	contentLength []string
}

// newRefusalBodies makes the refusal bodies of pol with status.
func newRefusalBodies(status int, pol []httplimit.Policy) *refusalBodies {
	rb := &refusalBodies{status: status, byName: make(map[string]refusalBody, len(pol))}
	for _, p := range pol {
		body, err := rlheader.QuotaExceeded(status, p.Name).MarshalJSON()
		if err != nil {
			continue // cannot happen with these values; write marshals again
		}
		rb.byName[p.Name] = refusalBody{body: body, contentLength: []string{strconv.Itoa(len(body))}}
	}
	return rb
}

// write writes rej's problem as the response to r and returns the body's
// length: the one made beforehand when there is one, else encoded now.
func (rb *refusalBodies) write(w http.ResponseWriter, r *http.Request, rej httplimit.Rejection) int {
	if len(rej.Policies) == 1 && rej.Status == rb.status {
		if b, ok := rb.byName[rej.Policies[0]]; ok {
			h := w.Header()
			h["Content-Type"] = problemContentType
			h["Content-Length"] = b.contentLength
			if sw, ok := w.(*sendWriter); ok && r.ProtoMajor == 1 && len(b.body) <= bufferedBody {
				// The body stays in net/http's buffer until the
				// server's last flush, which ServeHTTP's deferred
				// arm bounds: no deadline (and clock read) of its
				// own for this write.
				w = sw.ResponseWriter
			}
			w.WriteHeader(rej.Status)
			w.Write(b.body)
			return len(b.body)
		}
	}
	return writeProblem(w, rlheader.QuotaExceeded(rej.Status, rej.Policies...), rej.Status)
}

// bufferedBody is the most of a response's body that net/http's HTTP/1
// server keeps in its buffer (2 KiB, bufferBeforeChunkingSize) before it
// writes to the connection, with some margin.
const bufferedBody = 1 << 10

// problemContentType is the Content-Type of a problem, shared.
var problemContentType = []string{rlheader.ProblemContentType}

// writeProblem writes p as the response with status, and returns the body's
// length.
func writeProblem(w http.ResponseWriter, p rlheader.Problem, status int) int {
	body, err := p.MarshalJSON()
	if err != nil { // cannot happen with these values
		body = []byte("{}")
	}
	h := w.Header()
	h["Content-Type"] = problemContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	w.Write(body)
	return len(body)
}

// slogWriter turns ReverseProxy's log lines into slog records.
type slogWriter struct{ l *slog.Logger }

func (s slogWriter) Write(p []byte) (int, error) {
	s.l.Warn("gateway: proxy", "msg", string(bytes.TrimRight(p, "\r\n")))
	return len(p), nil
}
