// Package httplimit is net/http middleware that rate limits requests with any
// sluice.Limiter (memstore, redisstore, …) and answers in the standard way.
//
// A Middleware applies policies to each request. A policy is a name, a
// sluice.Limit, a KeyFunc that says whose allowance a request spends (client
// IP, API key, user, tenant, route, or a composite of them) and an optional
// CostFunc. Every policy is evaluated; if one denies, the request is refused
// and the units the others spent are given back (when the limiter is a
// sluice.Refunder), as NGINX charges nothing when one of its limits rejects.
//
// The response contract:
//
//   - a denied request gets 429 Too Many Requests (configurable), a
//     Retry-After in whole seconds rounded up, Cache-Control: no-store, the
//     reason header (Sluice-Rate-Limited-Reason: <policy name>) and an
//     application/problem+json body of the quota-exceeded type listing the
//     violated policies;
//   - every response carries RateLimit-Policy (every policy applied to the
//     request) and RateLimit (the one closest to exhaustion: the refusing
//     one, else the one with the fewest units left; see rlheader.Closer) as
//     in draft-ietf-httpapi-ratelimit-headers-11, and optionally the legacy
//     X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset
//     (seconds until the reported policy's state resets, not a Unix time).
//
// RateLimit's t is the effective window: for a denied request, the time
// until a request of that cost fits, which is also Retry-After; for an
// admitted one, the time until the key's state is as good as fresh
// (Result.ResetAfter). A sliding window counter's remaining quota is an
// estimate.
//
// The headers go on every response the middleware lets through, redirects
// included (r=0 on a 3xx is information; a client honours Retry-After only
// on a refusal). When no policy applied to a request, no header is sent,
// never an empty one.
//
// A policy in Shadow mode is evaluated, logged and counted, and never
// refuses anything or shows in the headers.
//
// A policy with a Queue is NGINX's limit_req: rather than refusing a request
// that comes too early, it makes the request wait its turn, up to a bound
// (burst), and refuses only beyond it; nodelay and delay=N as in NGINX (see
// package queue). With several queued policies the request waits the
// longest of their delays, and a request whose client goes away while it
// waits gives its place back and reaches no handler.
//
// Some policies look at the response once the handler has answered (see
// docs/settle.md): one with Settle admits a request on its estimated cost
// and settles it at the actual cost the response reports (a header, a
// trailer or a callback), refunding the surplus or charging the shortfall
// into debt; one with CountOnly counts only the responses whose status it
// matches (failed logins, 404s, 5xx); and one with a Penalty refuses a key
// that broke it for that long, the reason header naming it.
//
// ConcurrencyPolicy bounds requests in flight, per key or in total, like
// NGINX limit_conn. As limit_conn runs after limit_req, a slot is taken
// once the rate limits have admitted the request and any queue has let it
// go (a queued request holds none), and is released when the handler
// returns, even if it panics. A request refused for concurrency spends no
// rate limit.
//
// AdaptivePolicy sheds load with an adaptive concurrency limiter (package
// adaptive), after the ConcurrencyPolicies: its limit follows the
// handler's latency, lower priorities are refused first, and a refusal is
// 503 with Retry-After (load shedding, not a client over its rate).
package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/keyhash"
	"github.com/sluicehq/sluice/internal/loggate"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/rlheader"
)

// ReasonHeader is the response header that names the policy that refused a
// request: rlheader.HeaderReason, the one definition of the name, kept here
// so that callers of this package need not import rlheader to read it.
const ReasonHeader = rlheader.HeaderReason

// MissingKey says what a policy does with a request whose key cannot be
// found: never a shared bucket for every such request.
type MissingKey uint8

const (
	// RejectMissing refuses the request with 400 Bad Request.
	RejectMissing MissingKey = iota
	// SkipMissing does not apply the policy to the request.
	SkipMissing
)

// Policy is one rate limit applied to requests.
type Policy struct {
	// Name identifies the policy in headers, logs and metrics. Printable
	// ASCII, not empty, unique within a Middleware.
	Name string
	// Limit is the limit each key gets. Leave it zero when Queue is set.
	Limit sluice.Limit
	// Queue, when not nil, makes the policy NGINX's limit_req (rate, burst,
	// nodelay, delay=N): an early request waits its turn instead of being
	// refused, and only a request beyond the burst is refused. The policy's
	// limit is then the queue's meter, a sluice.LeakyBucket of Burst+1.
	Queue *queue.Config
	// Key says whose allowance a request spends. Required.
	Key KeyFunc
	// Cost is what a request spends; nil means 1. A cost below 1 or above
	// the limit's capacity is a server error (500), logged, never a silent
	// pass.
	Cost CostFunc
	// OnMissingKey is what to do when Key finds no key. Default
	// RejectMissing.
	OnMissingKey MissingKey
	// Shadow evaluates and logs the policy without ever refusing a request.
	// A shadow policy neither settles nor counts responses.
	Shadow bool
	// Settle, when not nil, settles each admitted request at its actual
	// cost once the handler has answered (see Settle): reserve on the
	// estimate (Cost), then refund the surplus or charge the shortfall.
	// The Limiter must be a sluice.Refunder and a sluice.Charger.
	Settle *Settle
	// CountOnly, when not empty, makes the policy count responses rather
	// than requests, e.g. 401 and 403 for failed logins, 404 for
	// scanners: each request reserves one unit before the handler runs
	// (refused, 429, when none is left: the units of the responses
	// counted and of the requests still in the handler), and once the
	// handler has answered, a response whose status is in the set keeps
	// it, any other gets it back. So at most the limit's capacity of
	// counted responses can be under way at once, however many requests
	// arrive together. A client that leaves before any status was written
	// keeps its unit spent. Policy.Cost is not used: a response costs 1.
	// A shadow policy reserves nothing (it looks at what is left). The
	// Limiter must be a sluice.Refunder, a sluice.Charger and a
	// sluice.Peeker.
	CountOnly StatusSet
	// Penalty, when positive, is a penalty box: a key that breaks the
	// policy (a request refused; with CountOnly, the counted response
	// that fills the limit; with Settle, a charge that leaves it in debt)
	// is refused for Penalty, whatever it has left, with the reason header
	// naming the policy. Breaches at once box the key once: for Penalty,
	// never longer. The box is kept in the Limiter (one unit per Penalty
	// under the key "\x00box:<policy's key>"; with CountOnly, the counted
	// responses alone under "\x00fail:<policy's key>", to tell them from
	// the reservations of requests still in the handler), so that
	// replicas sharing a store share it. The Limiter must be a
	// sluice.Charger and a sluice.Peeker.
	Penalty time.Duration
	// TenantLimit, when not nil, gives a request its tenant's limit in
	// place of Limit (see PlanLimits), checked as Limit is; a tenant limit
	// the policy cannot use is logged and Limit applies. Not with Queue.
	TenantLimit TenantLimitFunc
}

// ConcurrencyPolicy bounds the requests in flight at once, per key (Key
// set) or in total (Key nil), in this process, or wherever InFlight counts.
type ConcurrencyPolicy struct {
	// Name identifies the policy, as Policy.Name does.
	Name string
	// Max is the most requests in flight at once. At least 1.
	Max int
	// Key groups requests; nil means one group for all of them.
	Key KeyFunc
	// OnMissingKey is what to do when Key finds no key.
	OnMissingKey MissingKey
	// Shadow counts and logs the requests the policy would refuse and
	// refuses none, like NGINX's limit_conn_dry_run.
	Shadow bool
	// Slots counts the requests in flight; nil gives the policy its own.
	// Share one between policies of the same Name (in several
	// Middlewares, or before and after a reconfiguration) to bound them
	// together: keys are scoped by Name, so policies of different names
	// that share Slots share nothing but their counts without Key.
	Slots *Slots
	// InFlight, when set, counts the requests in flight instead of Slots
	// (which must then be nil): redisstore.Leases, to bound the requests
	// of every process on one Redis together. See InFlight for its failure.
	InFlight InFlight
}

// CostFunc returns what a request costs.
type CostFunc func(r *http.Request) int

// Settings are what a Middleware is configured with apart from its limits
// and its hooks: the Limiter that decides, the status and headers of its
// answers, how it hashes and logs keys, its Observer and its queue's
// wait. A gateway.Config embeds them and hands them to the Middleware of
// each of its routes. The zero value is no Limiter (New refuses it) and
// every other field's default.
type Settings struct {
	// Limiter decides; any sluice.Limiter.
	Limiter sluice.Limiter
	// StatusCode is the status of a refused request. Default 429.
	StatusCode int
	// ConcurrencyStatusCode is the status of a request refused by a
	// ConcurrencyPolicy (NGINX's limit_conn_status). Default StatusCode.
	ConcurrencyStatusCode int
	// Headers chooses the rate limit headers: rlheader.Draft11
	// (RateLimit-Policy and RateLimit), rlheader.Legacy (X-RateLimit-Limit,
	// -Remaining and -Reset, rlheader.XLegacyNames), rlheader.Both or
	// rlheader.Off. The zero value, rlheader.Default, is Draft11.
	Headers rlheader.Mode
	// HashKeys replaces every key by a hash (SHA-256, 128 bits, hex) before
	// it reaches the Limiter or a log, so that client IPs and API keys do
	// not leave the process. Keys longer than sluice.MaxKeyLen are hashed
	// always.
	HashKeys bool
	// StoreErrorStatus is the status when the Limiter fails; 0 means let
	// the request through (fail open). Wrap the Limiter with package
	// failsafe for finer choices: a failsafe limiter that fails closed
	// returns an error wrapping sluice.ErrUnavailable, which always refuses
	// the request, with StoreErrorStatus or else 503 and its Retry-After.
	StoreErrorStatus int
	// Logger receives one line per refused request (at RefusalLevel) and
	// per store error (at warn level). Default slog.Default().
	Logger *slog.Logger
	// LogKeys writes keys into log lines as they are. By default a log
	// line shows a keyed hash of the key ("policy:~" and 128 bits of
	// HMAC-SHA-256 under LogKeySecret, in hex; not the form HashKeys
	// stores), so that a key taken from a header, a cookie or a query
	// parameter, such as an API key, or a client IP never reaches a log,
	// not even as a hash that could be reversed by trying every value.
	LogKeys bool
	// LogKeySecret is the secret of the keyed hash of keys in log lines
	// (see LogKeys): equal keys show equal hashes under one secret, so
	// replicas given the same secret write logs that can be correlated.
	// Empty: a random secret drawn once per process, shared by every
	// Middleware of the process.
	LogKeySecret []byte
	// Observer, when not nil, is handed every decision (see Observer): a
	// live view of who is limited. Nil costs nothing.
	Observer Observer
	// Wait makes a request that a queued policy admitted wait d before it
	// goes on, and returns an error if it must not go on (its context
	// ended). Nil waits on a timer, returning ctx.Err() when the context
	// ends first. Tests replace it to see NGINX's delays without waiting.
	Wait func(ctx context.Context, d time.Duration) error
}

// Config configures a Middleware: its Settings, its limits and its hooks.
// Settings.Limiter and at least one policy are required; every other field
// has a default.
type Config struct {
	Settings
	// Policies are the rate limits, evaluated in order.
	Policies []Policy
	// Concurrency are the in-flight limits, taken once Policies have
	// admitted the request and any queue has let it go, as NGINX's
	// limit_conn runs after limit_req. A request they refuse gets back
	// what Policies charged.
	Concurrency []ConcurrencyPolicy
	// Adaptive are the adaptive concurrency limits (load shedding),
	// taken after Concurrency; a request they refuse is answered 503 and
	// gets back what Policies charged. See AdaptivePolicy.
	Adaptive []AdaptivePolicy
	// WriteRejection writes the body of a refused request; nil writes the
	// problem+json body. The headers are already set when it is called.
	WriteRejection func(w http.ResponseWriter, r *http.Request, rej Rejection)
	// OnError, when not nil, is told of every request answered with an
	// error rather than a decision: a missing key (400), an impossible cost
	// (500), a failing limiter (503, or StoreErrorStatus), after the
	// response is written, with the policy concerned.
	OnError func(r *http.Request, status int, policy string)
	// RefusalLevel is the level of the line logged per refused request,
	// or per request whose key is missing. Zero is slog.LevelInfo; a
	// program that logs refusals elsewhere (an access log) sets
	// slog.LevelDebug, so that each refusal is one line. A shadow
	// policy's would-be refusals are logged at info level at least: they
	// show nowhere else.
	RefusalLevel slog.Level
	// RefusalLogEvery, when positive, bounds those lines (refusals, shadow
	// policies' would-be refusals, requests with no key) to one per
	// RefusalLogEvery for the Middleware: the first of each interval is
	// logged, the others are counted, and the next line logged carries
	// their number (not_logged) and since when (not_logged_since). A
	// count is written only with a later line; the metrics count every
	// refusal. A failing limiter's warnings are bounded alike, on a gate
	// of their own, so that a flood of refusals does not hide them. Zero
	// logs every one, as a program that has no access log
	// for per-request lines should not: a flood of refusals would be a
	// flood of lines.
	RefusalLogEvery time.Duration
	// Ready, when not nil, is called once the rate limits have admitted a
	// request and any queue has let it go, before the Concurrency slots
	// are taken; it may replace r.Body. It returns false when it has
	// answered the request itself, which then goes no further (what the
	// rate limits charged stays spent, as NGINX charges a request that
	// times out). A reverse proxy reads the request body here, so that a
	// client sending its body slowly holds no slot.
	Ready func(w http.ResponseWriter, r *http.Request) bool
	// Metrics, when not nil, counts decisions, store errors and latency.
	Metrics *Metrics
}

// Rejection describes a refused request to Config.WriteRejection.
type Rejection struct {
	// Status is the response status.
	Status int
	// Policies names the policies that refused the request. The slice
	// may be shared by every refusal of a policy: read it, do not write
	// into it.
	Policies []string
	// RetryAfter is when a request of the same cost may succeed.
	RetryAfter time.Duration
}

// Middleware applies a Config's policies to requests. It is safe for
// concurrent use. Its zero value is not usable (it has no store and no
// policies); make one with New.
type Middleware struct {
	cfg      Config
	policies []compiled
	conc     []*concurrency
	adaptive []AdaptivePolicy
	// allPolicies is RateLimit-Policy when every enforced policy applied,
	// the usual case, written once.
	allPolicies string
	// allPoliciesValue is allPolicies as the header's values, shared by
	// every response that sends it (net/http copies, never writes into,
	// a header's values).
	allPoliciesValue []string
	enforced         int             // policies that are not in shadow mode
	keyHash          *keyhash.Hasher // under cfg.LogKeySecret (logHash)
	headers          rlheader.Mode   // cfg.Headers, its default applied
	refusalLog       loggate.Gate    // cfg.RefusalLogEvery's
	failureLog       loggate.Gate    // cfg.RefusalLogEvery's, for a failing limiter
}

// Header names in canonical form, set straight into the header map: Set
// would canonicalize them again on every response.
var (
	hdrPolicy    = http.CanonicalHeaderKey(rlheader.HeaderRateLimitPolicy)
	hdrRateLimit = http.CanonicalHeaderKey(rlheader.HeaderRateLimit)
	hdrLimit     = http.CanonicalHeaderKey(rlheader.XLegacyNames.Limit)
	hdrRemaining = http.CanonicalHeaderKey(rlheader.XLegacyNames.Remaining)
	hdrReset     = http.CanonicalHeaderKey(rlheader.XLegacyNames.Reset)
)

type compiled struct {
	Policy
	header rlheader.Policy
	q      *queue.Queue // for a queued policy
	tenant bool         // Limit is a request's tenant's (forTenant)
	// tenants holds the policy made for each tenant limit seen (forTenant);
	// nil without a TenantLimit.
	tenants *tenantPolicies
	// name is []string{Name}, made once: a refusal's Rejection.Policies
	// and its reason header, shared by every refusal (len = cap, so that
	// an append copies).
	name []string
	// refused caches RateLimit's value of a refusal ("name";r=0;t=N) by
	// N, made on first use and then shared (by a tenant's copy of the
	// policy too: the value depends on the name and N alone).
	refused *refusedValues
}

// refusedValues holds a policy's statusValues, made on its first refusal.
type refusedValues struct{ tab atomic.Pointer[statusValues] }

// statusValues are a policy's RateLimit values of a refusal, by the
// seconds of its t parameter, each made on first use.
type statusValues [maxCachedSeconds + 1]atomic.Pointer[[]string]

// maxCachedSeconds is the longest wait whose header values are made once
// and shared (Retry-After, and RateLimit's t of a refusal); a longer one
// is formatted per response.
const maxCachedSeconds = 300

// refusedValue returns RateLimit's value for a refusal of c with wait t
// (its remaining count 0), made once per number of seconds up to
// maxCachedSeconds and shared, else formatted now.
func (c *compiled) refusedValue(t time.Duration) []string {
	secs := ceilSeconds(t)
	if secs < 0 || secs > maxCachedSeconds {
		return []string{string(rlheader.AppendStatuses(nil, rlheader.Status{Name: c.Name, Reset: t}))}
	}
	tab := c.refused.tab.Load()
	if tab == nil {
		c.refused.tab.CompareAndSwap(nil, new(statusValues))
		tab = c.refused.tab.Load()
	}
	if v := tab[secs].Load(); v != nil {
		return *v
	}
	v := []string{string(rlheader.AppendStatuses(nil, rlheader.Status{Name: c.Name, Reset: t}))}
	tab[secs].Store(&v)
	return v
}

// ceilSeconds is d in whole seconds, rounded up, as the headers write
// it; 0 for a wait of 0 or less.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// retryAfterValues are Retry-After's values by seconds, each made on
// first use and then shared by every response that sends it.
var retryAfterValues [maxCachedSeconds + 1]atomic.Pointer[[]string]

// retryAfterValue returns Retry-After's value for d as a header's values:
// shared up to maxCachedSeconds, else formatted now.
func retryAfterValue(d time.Duration) []string {
	secs := ceilSeconds(d)
	if secs < 0 || secs > maxCachedSeconds {
		return []string{rlheader.FormatRetryAfter(d)}
	}
	if v := retryAfterValues[secs].Load(); v != nil {
		return *v
	}
	v := []string{rlheader.FormatRetryAfter(d)}
	retryAfterValues[secs].Store(&v)
	return v
}

// New checks cfg and returns a Middleware.
func New(cfg Config) (*Middleware, error) {
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	m := &Middleware{cfg: cfg, keyHash: keyhash.New(cfg.LogKeySecret), headers: cfg.Headers.Or(rlheader.Draft11), refusalLog: loggate.Gate{Every: cfg.RefusalLogEvery}, failureLog: loggate.Gate{Every: cfg.RefusalLogEvery}}
	names := policyNames{}
	for _, p := range cfg.Policies {
		if err := names.add(p.Name); err != nil {
			return nil, err
		}
		c, err := compilePolicy(cfg.Limiter, p)
		if err != nil {
			return nil, err
		}
		m.policies = append(m.policies, c)
	}
	// Shadow policies go first, so that every request is counted by them
	// even when an enforced policy refuses it.
	slices.SortStableFunc(m.policies, func(a, b compiled) int {
		switch {
		case a.Shadow && !b.Shadow:
			return -1
		case !a.Shadow && b.Shadow:
			return 1
		}
		return 0
	})
	var all []rlheader.Policy
	for _, p := range m.policies {
		if !p.Shadow {
			all = append(all, p.header)
			m.enforced++
		}
	}
	m.allPolicies = string(rlheader.AppendPolicies(nil, all...))
	m.allPoliciesValue = []string{m.allPolicies}
	for _, c := range cfg.Concurrency {
		if err := names.add(c.Name); err != nil {
			return nil, err
		}
		if c.Max < 1 {
			return nil, fmt.Errorf("httplimit: concurrency policy %q: max %d must be at least 1", c.Name, c.Max)
		}
		if c.Slots != nil && c.InFlight != nil {
			return nil, fmt.Errorf("httplimit: concurrency policy %q: both Slots and InFlight are set", c.Name)
		}
		slots := c.Slots
		if slots == nil && c.InFlight == nil {
			slots = new(Slots)
		}
		m.conc = append(m.conc, &concurrency{ConcurrencyPolicy: c, slots: slots, group: c.Name + ":"})
	}
	var err error
	if m.adaptive, err = compileAdaptive(cfg.Adaptive, names); err != nil {
		return nil, err
	}
	for _, a := range m.adaptive {
		cfg.Metrics.watch(a.Name, a.Limiter)
	}
	return m, nil
}

// complete checks cfg's settings and fills in its defaults.
func (cfg *Config) complete() error {
	if cfg.Limiter == nil && len(cfg.Policies) > 0 {
		return errors.New("httplimit: Config.Limiter is nil")
	}
	if len(cfg.Policies) == 0 && len(cfg.Concurrency) == 0 && len(cfg.Adaptive) == 0 {
		return errors.New("httplimit: no policies")
	}
	if cfg.StatusCode == 0 {
		cfg.StatusCode = http.StatusTooManyRequests
	}
	if cfg.StatusCode < 400 || cfg.StatusCode > 599 {
		return fmt.Errorf("httplimit: status %d is not between 400 and 599", cfg.StatusCode)
	}
	if cfg.ConcurrencyStatusCode == 0 {
		cfg.ConcurrencyStatusCode = cfg.StatusCode
	}
	if cfg.ConcurrencyStatusCode < 400 || cfg.ConcurrencyStatusCode > 599 {
		return fmt.Errorf("httplimit: concurrency status %d is not between 400 and 599", cfg.ConcurrencyStatusCode)
	}
	if cfg.Headers > rlheader.Both {
		return fmt.Errorf("httplimit: unknown header mode %v", cfg.Headers)
	}
	if cfg.Wait == nil {
		cfg.Wait = Sleep
	}
	if cfg.StoreErrorStatus != 0 && (cfg.StoreErrorStatus < 400 || cfg.StoreErrorStatus > 599) {
		return fmt.Errorf("httplimit: store error status %d is not between 400 and 599", cfg.StoreErrorStatus)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return nil
}

// policyNames are the names of a Middleware's policies, rate and in-flight
// ones together.
type policyNames map[string]bool

// add refuses an empty name, one already taken, and one that is not
// printable ASCII (it goes into headers and keys); else it takes it.
func (names policyNames) add(n string) error {
	if n == "" {
		return errors.New("httplimit: a policy has no name")
	}
	if names[n] {
		return fmt.Errorf("httplimit: two policies are named %q", n)
	}
	names[n] = true
	for i := 0; i < len(n); i++ {
		if n[i] < 0x20 || n[i] > 0x7e {
			return fmt.Errorf("httplimit: policy name %q is not printable ASCII", n)
		}
	}
	return nil
}

// compilePolicy checks p and returns it with its queue (on limiter) and its
// RateLimit-Policy item.
func compilePolicy(limiter sluice.Limiter, p Policy) (compiled, error) {
	var q *queue.Queue
	if p.Queue != nil {
		if p.Limit != (sluice.Limit{}) {
			return compiled{}, fmt.Errorf("httplimit: policy %q has both a Limit and a Queue", p.Name)
		}
		var err error
		if q, err = queue.New(limiter, *p.Queue); err != nil {
			return compiled{}, fmt.Errorf("httplimit: policy %q: %w", p.Name, err)
		}
		p.Limit = q.Limit()
	}
	if err := p.Limit.Validate(); err != nil {
		return compiled{}, fmt.Errorf("httplimit: policy %q: %w", p.Name, err)
	}
	if p.Key == nil {
		return compiled{}, fmt.Errorf("httplimit: policy %q has no key function", p.Name)
	}
	if err := checkAfter(limiter, &p); err != nil {
		return compiled{}, err
	}
	if err := checkTenantLimit(&p); err != nil {
		return compiled{}, err
	}
	h := rlheader.Policy{Name: p.Name, Quota: int64(p.Limit.Rate)}
	if p.Limit.Period%time.Second == 0 {
		h.Window = p.Limit.Period // w is whole seconds; otherwise it is left out
	}
	c := compiled{Policy: p, header: h, q: q, name: []string{p.Name}, refused: new(refusedValues)}
	if p.TenantLimit != nil {
		c.tenants = &tenantPolicies{byLimit: map[sluice.Limit]*compiled{}}
	}
	return c, nil
}

// Handler returns next wrapped by the middleware.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

// Wrap is New followed by Handler, as a func(http.Handler) http.Handler for
// routers that take middleware in that form (chi, gorilla/mux).
func Wrap(cfg Config) (func(http.Handler) http.Handler, error) {
	m, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return m.Handler, nil
}

// decision is one policy's outcome for one request.
type decision struct {
	p    *compiled
	key  string
	cost int
	res  sluice.Result
}

// serve runs the request through the rate policies (rateLimits), answers
// a refusal, waits the longest delay a queued policy asks, then runs it
// through the in-flight policies to next (serveInFlight).
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ctx := r.Context()
	var buf [4]decision // no allocation for up to 4 policies
	decisions, refused, delay, ok := m.rateLimits(w, r, buf[:0])
	if !ok {
		return
	}
	m.setHeaders(w.Header(), decisions)
	if refused {
		m.giveBack(ctx, decisions)
		last := &decisions[len(decisions)-1]
		m.reject(w, r, Rejection{Status: m.cfg.StatusCode, Policies: last.p.name, RetryAfter: last.res.RetryAfter})
		return
	}
	if delay > 0 {
		if err := m.cfg.Wait(ctx, delay); err != nil {
			// The client went away while queued: its place goes to the
			// next request, and there is no one to answer.
			m.giveBack(ctx, decisions)
			m.cfg.Logger.Debug("httplimit: left the queue", "delay", delay, "err", err)
			for _, d := range decisions {
				m.cfg.Metrics.decision(d.p.Name, "cancelled")
			}
			return
		}
	}
	if m.cfg.Ready != nil && !m.cfg.Ready(w, r) {
		return
	}
	m.serveInFlight(w, r, decisions, next)
}

// rateLimits spends the request's cost on each rate policy in order, onto
// decisions: the enforced policies' decisions, the last one the refusal
// when refused, and the longest delay a queued policy asks. The first
// refusal ends the run (the rest would be given back anyway). ok is false
// when it has answered the request itself (a missing key, an impossible
// cost, a failing limiter), having given back what was spent.
func (m *Middleware) rateLimits(w http.ResponseWriter, r *http.Request, decisions []decision) (_ []decision, refused bool, delay time.Duration, ok bool) {
	ctx := r.Context()
	for i := range m.policies {
		p := m.forTenant(r, &m.policies[i])
		key, cost, ok := m.keyAndCost(w, r, p, decisions)
		if !ok {
			return nil, false, 0, false
		}
		if key == "" {
			continue // no key, skipped
		}
		res, wait, err := m.spend(ctx, p, key, cost)
		if err != nil {
			if m.storeFailed(w, r, p, res, err) {
				m.giveBack(ctx, decisions)
				return nil, false, 0, false
			}
			continue // fail open for this policy
		}
		outcome := "allowed"
		if wait > 0 && !p.Shadow {
			outcome = "delayed"
			delay = max(delay, wait)
		}
		if !res.Allowed {
			outcome = "rejected"
			if p.Shadow {
				outcome = "shadow_rejected"
			}
			if m.logsRefusal(ctx, p.Shadow) { // before its attributes are boxed
				m.logRefusal(ctx, r, p.Name, key, p.Shadow, "remaining", res.Remaining, "retry_after", res.RetryAfter)
			}
		}
		m.cfg.Metrics.decision(p.Name, outcome)
		if m.cfg.Observer != nil {
			m.observe(p.Name, observed(res.Allowed, p.Shadow), cost, key)
		}
		if p.Shadow {
			continue // never refuses, never shows
		}
		decisions = append(decisions, decision{p: p, key: key, cost: cost, res: res})
		if !res.Allowed {
			return decisions, true, delay, true
		}
	}
	return decisions, false, delay, true
}

// keyAndCost returns the request's final key and cost for p; key "" skips
// p (no key, and p skips requests without one). ok is false when it has
// answered the request (no key, or a cost out of p's range), having given
// back what decisions spent.
func (m *Middleware) keyAndCost(w http.ResponseWriter, r *http.Request, p *compiled, decisions []decision) (key string, cost int, ok bool) {
	key, found := p.Key(r)
	if !found || key == "" {
		if p.OnMissingKey == SkipMissing {
			return "", 0, true
		}
		m.giveBack(r.Context(), decisions)
		m.missingKey(w, r, p.Name)
		return "", 0, false
	}
	cost = 1
	if p.Cost != nil && p.CountOnly.IsEmpty() { // a counted response costs 1
		cost = p.Cost(r)
	}
	if cost < 1 || cost > p.Limit.Capacity() {
		m.giveBack(r.Context(), decisions)
		m.cfg.Logger.Error("httplimit: cost function returned an impossible cost", "policy", p.Name, "cost", cost, "capacity", p.Limit.Capacity())
		m.fail(w, r, http.StatusInternalServerError, "rate limit cost out of range", p.Name)
		return "", 0, false
	}
	return m.finalKey(p.Name, key), cost, true
}

// spend asks p's limiter (or its queue) to spend cost units of key, and
// times the call; wait is the delay a queued policy asks.
func (m *Middleware) spend(ctx context.Context, p *compiled, key string, cost int) (res sluice.Result, wait time.Duration, err error) {
	var start time.Time
	if m.cfg.Metrics != nil {
		start = time.Now()
	}
	if p.q != nil {
		var d queue.Decision
		d, err = p.q.ReserveN(ctx, key, cost)
		res, wait = d.Result, d.Delay
	} else {
		res, err = m.decide(ctx, p, key, cost) // AllowN, or a penalty box or a count (after.go)
	}
	if m.cfg.Metrics != nil {
		m.cfg.Metrics.latency(p.Name, time.Since(start))
	}
	return res, wait, err
}

// storeFailed counts and logs a failing limiter, and answers the request
// when the failure refuses it: a limiter that fails closed
// (sluice.ErrUnavailable, with its Retry-After), or StoreErrorStatus set.
// It reports whether it answered; if not, p fails open.
func (m *Middleware) storeFailed(w http.ResponseWriter, r *http.Request, p *compiled, res sluice.Result, err error) bool {
	m.cfg.Metrics.storeError(p.Name)
	if ok, skipped := m.failureLog.Allow(); ok {
		m.cfg.Logger.Warn("httplimit: limiter failed", skipped.Attrs([]any{"policy", p.Name, "err", err})...)
	}
	closed := errors.Is(err, sluice.ErrUnavailable) // a limiter that fails closed
	if !closed && m.cfg.StoreErrorStatus == 0 {
		return false
	}
	status := m.cfg.StoreErrorStatus
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	if closed && res.RetryAfter > 0 {
		w.Header().Set(rlheader.HeaderRetryAfter, rlheader.FormatRetryAfter(res.RetryAfter))
	}
	w.Header().Set("Cache-Control", "no-store")
	m.fail(w, r, status, "rate limiter unavailable", p.Name)
	return true
}

// serveInFlight runs the request through the in-flight policies and, if
// they admit it, next. In-flight limits come after the rate limits, as
// NGINX runs limit_conn after limit_req: a request waiting in a queue
// holds no slot. A request refused here gets back what the rate limits
// charged (decisions). Each slot taken is released by a deferred call,
// also when a later policy refuses or the handler panics.
func (m *Middleware) serveInFlight(w http.ResponseWriter, r *http.Request, decisions []decision, next http.Handler) {
	ctx := r.Context()
	for _, c := range m.conc {
		key, ok := m.groupKey(c, r)
		if !ok {
			if c.OnMissingKey == SkipMissing {
				continue
			}
			m.giveBack(ctx, decisions)
			m.clearHeaders(w.Header())
			m.missingKey(w, r, c.Name)
			return
		}
		if c.InFlight != nil {
			release, ok := m.acquireShared(w, r, c, key, decisions)
			if !ok {
				return
			}
			if release != nil {
				defer release() // runs even if next panics
			}
			continue
		}
		if !c.acquire(key) {
			if !m.slotRefused(w, r, c, key, decisions) {
				return
			}
			continue
		}
		defer c.release(key) // runs even if next panics
	}
	if needsAfter(decisions) { // a policy settles or counts once the handler has answered
		sw := &statusWriter{ResponseWriter: w}
		defer m.afterResponse(r, sw, decisions)
		w = sw
	}
	if len(m.adaptive) > 0 {
		m.serveAdaptive(w, r, decisions, next)
		return
	}
	next.ServeHTTP(w, r)
}

// slotRefused logs, counts and observes a request in-flight policy c
// found no slot of key for, and reports whether it goes on: a shadow
// policy lets it (without a slot), else concurrencyRefused answers it.
func (m *Middleware) slotRefused(w http.ResponseWriter, r *http.Request, c *concurrency, key string, decisions []decision) bool {
	m.logRefusal(r.Context(), r, c.Name, key, c.Shadow, "reason", "concurrency")
	if c.Shadow {
		m.cfg.Metrics.decision(c.Name, "shadow_rejected")
		m.observe(c.Name, Shadow, 1, key)
		return true
	}
	m.observe(c.Name, Limited, 1, key)
	m.concurrencyRefused(w, r, c, decisions)
	return false
}

// concurrencyRefused answers a request that in-flight policy c refuses:
// what the rate limits charged is given back, and their headers replaced
// by c's RateLimit-Policy.
func (m *Middleware) concurrencyRefused(w http.ResponseWriter, r *http.Request, c *concurrency, decisions []decision) {
	m.cfg.Metrics.decision(c.Name, "rejected")
	m.giveBack(r.Context(), decisions)
	m.clearHeaders(w.Header())
	rej := Rejection{Status: m.cfg.ConcurrencyStatusCode, Policies: []string{c.Name}, RetryAfter: time.Second}
	if m.headers.SendsDraft11() {
		p := rlheader.Policy{Name: c.Name, Quota: int64(c.Max), Unit: rlheader.UnitConcurrentRequests}
		w.Header()[hdrPolicy] = []string{string(rlheader.AppendPolicies(nil, p))}
	}
	m.reject(w, r, rej)
}

// Sleep is Config.Wait's default: it waits d on a timer and returns nil,
// or returns ctx's error as soon as ctx ends. Safe for concurrent use.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// setHeaders writes RateLimit-Policy for every policy decided and RateLimit
// (and the legacy headers) for the one closest to exhaustion by
// rlheader.Closer: the refusing one if any, else the one with the fewest
// units left.
func (m *Middleware) setHeaders(h http.Header, ds []decision) {
	if len(ds) == 0 {
		return // no policy applied: no header, never an empty one
	}
	report, st := &ds[0], standing(&ds[0].res)
	for i := 1; i < len(ds); i++ {
		if s := standing(&ds[i].res); rlheader.Closer(s, st) {
			report, st = &ds[i], s
		}
	}
	t := st.Wait
	var buf [128]byte
	if m.headers.SendsDraft11() {
		policies := m.allPolicies
		if len(ds) != m.enforced || tenantLimited(ds) { // some policy skipped, not reached, or a tenant's
			b := buf[:0]
			for i := range ds {
				if i > 0 {
					b = append(b, ", "...)
				}
				b = rlheader.AppendPolicies(b, ds[i].p.header)
			}
			policies = string(b)
		}
		if policies == m.allPolicies {
			h[hdrPolicy] = m.allPoliciesValue
		} else {
			h[hdrPolicy] = []string{policies}
		}
		if !report.res.Allowed && report.res.Remaining == 0 {
			h[hdrRateLimit] = report.p.refusedValue(t)
		} else {
			b := rlheader.AppendStatuses(buf[:0], rlheader.Status{Name: report.p.Name, Remaining: int64(report.res.Remaining), Reset: t})
			h[hdrRateLimit] = []string{string(b)}
		}
	}
	if m.headers.SendsLegacy() {
		h[hdrLimit] = []string{strconv.Itoa(report.p.Limit.Rate)}
		h[hdrRemaining] = []string{strconv.Itoa(report.res.Remaining)}
		h[hdrReset] = []string{string(rlheader.AppendRetryAfter(buf[:0], t))}
	}
}

// standing is where res leaves the client, for rlheader.Closer.
func standing(res *sluice.Result) rlheader.Standing {
	if !res.Allowed {
		return rlheader.Standing{Over: true, Wait: res.RetryAfter}
	}
	return rlheader.Standing{Remaining: int64(res.Remaining), Wait: res.ResetAfter}
}

// clearHeaders removes what setHeaders wrote, for a request refused by a
// ConcurrencyPolicy after the rate limits admitted it.
func (m *Middleware) clearHeaders(h http.Header) {
	for _, k := range [...]string{hdrPolicy, hdrRateLimit, hdrLimit, hdrRemaining, hdrReset} {
		delete(h, k)
	}
}

// noStore is the Cache-Control value of every refusal, shared: a
// header's values are replaced or appended to (len = cap: a copy), never
// written in place.
var noStore = []string{"no-store"}

// reject writes a refusal: status, Retry-After, no-store, the reason and the
// body.
func (m *Middleware) reject(w http.ResponseWriter, r *http.Request, rej Rejection) {
	// The names are canonical: set without Header.Set's canonicalizing,
	// and no-store from one shared value (net/http never writes into a
	// header's values; it copies them).
	h := w.Header()
	h[rlheader.HeaderRetryAfter] = retryAfterValue(rej.RetryAfter)
	h["Cache-Control"] = noStore
	if len(rej.Policies) == 1 {
		h[rlheader.HeaderReason] = rej.Policies // its one name, as Join would write it; shared, never written into
	} else {
		h[rlheader.HeaderReason] = []string{strings.Join(rej.Policies, ", ")}
	}
	if m.cfg.WriteRejection != nil {
		m.cfg.WriteRejection(w, r, rej)
		return
	}
	body, err := rlheader.QuotaExceeded(rej.Status, rej.Policies...).MarshalJSON()
	if err != nil {
		http.Error(w, http.StatusText(rej.Status), rej.Status)
		return
	}
	h.Set("Content-Type", rlheader.ProblemContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rej.Status)
	w.Write(body)
}

// logRefusal logs a refusal by policy of the request r with key (a
// policy's final key), hashed unless LogKeys, with attrs.
func (m *Middleware) logRefusal(ctx context.Context, r *http.Request, policy, key string, shadow bool, attrs ...any) {
	if !m.logsRefusal(ctx, shadow) {
		return
	}
	level := m.refusalLevel(shadow)
	ok, skipped := m.refusalLog.Allow()
	if !ok {
		return
	}
	args := append([]any{"policy", policy, "key", m.logKey(policy, key), "method", r.Method, "path", r.URL.Path, "shadow", shadow}, attrs...)
	m.cfg.Logger.Log(ctx, level, "httplimit: refused", skipped.Attrs(args)...)
}

// refusalLevel is the level of a refusal's log line (of a shadow
// policy's would-be refusal when shadow).
func (m *Middleware) refusalLevel(shadow bool) slog.Level {
	if shadow {
		return max(m.cfg.RefusalLevel, slog.LevelInfo)
	}
	return m.cfg.RefusalLevel
}

// logsRefusal reports whether the logger takes a refusal's line at its
// level (the gate of RefusalLogEvery aside).
func (m *Middleware) logsRefusal(ctx context.Context, shadow bool) bool {
	return m.cfg.Logger.Enabled(ctx, m.refusalLevel(shadow))
}

// logKey is key as a log line shows it: its keyed hash (see logHash),
// unless LogKeys. A key that HashKeys made a hash is hashed again: the
// store's hash is a plain one.
func (m *Middleware) logKey(policy, key string) string {
	if m.cfg.LogKeys {
		return key
	}
	return logHash(m.keyHash, policy, key)
}

func (m *Middleware) missingKey(w http.ResponseWriter, r *http.Request, policy string) {
	if m.cfg.Logger.Enabled(r.Context(), m.cfg.RefusalLevel) {
		if ok, skipped := m.refusalLog.Allow(); ok {
			m.cfg.Logger.Log(r.Context(), m.cfg.RefusalLevel, "httplimit: no key for the request",
				skipped.Attrs([]any{"policy", policy, "method", r.Method, "path", r.URL.Path})...)
		}
	}
	m.fail(w, r, http.StatusBadRequest, "missing rate limit key for policy "+strconv.Quote(policy), policy)
}

// fail answers a request the middleware could not decide: a missing key
// (400), an impossible cost (500), a failing limiter (503 or
// StoreErrorStatus).
func (m *Middleware) fail(w http.ResponseWriter, r *http.Request, status int, msg, policy string) {
	http.Error(w, msg, status)
	if m.cfg.OnError != nil {
		m.cfg.OnError(r, status, policy)
	}
}

// giveBack refunds the units the admitted decisions spent, when the
// limiter can.
func (m *Middleware) giveBack(ctx context.Context, ds []decision) {
	rf, ok := m.cfg.Limiter.(sluice.Refunder)
	if !ok {
		return
	}
	// A refund outlives a cancelled request, but not a hung store; the
	// context is made on first use: a lone refusal gives nothing back.
	var rctx context.Context
	for _, d := range ds {
		if !d.res.Allowed { // a policy that counts responses reserved its unit: given back too
			continue
		}
		if rctx == nil {
			var cancel context.CancelFunc
			rctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
		}
		rf.RefundN(rctx, d.key, d.p.Limit, d.cost)
	}
}

// finalKey scopes key to its policy, so that two policies never share an
// allowance, and hashes it (sluice.HashKey, as "policy:#hash") when
// configured or when it is longer than sluice.MaxKeyLen. "#" marks a hash,
// so that no raw key of 32 hex digits can share its allowance.
func (m *Middleware) finalKey(policy, key string) string {
	return PolicyKey(policy, key, m.cfg.HashKeys)
}

func (m *Middleware) groupKey(c *concurrency, r *http.Request) (string, bool) {
	if c.Key == nil {
		return "", true
	}
	k, ok := c.Key(r)
	if !ok || k == "" {
		return "", false
	}
	return m.finalKey(c.Name, k), true
}

// Slots counts requests in flight per key for ConcurrencyPolicy. Give the
// policies of one Name the same Slots (in several Middlewares, or across a
// reconfiguration) to bound their requests together, as one NGINX
// limit_conn_zone is shared by every location that names it. The zero
// Slots is ready to use; it is safe for concurrent use.
type Slots struct {
	mu       sync.Mutex
	inflight map[string]int
}

// InFlight returns the requests in flight for key (a policy's key as the
// Middleware scopes it: "<policy>:<key>", or "" for a policy without Key).
func (s *Slots) InFlight(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight[key]
}

// concurrency is a ConcurrencyPolicy and its slots.
type concurrency struct {
	ConcurrencyPolicy
	slots *Slots
	// group is a keyless policy's key in a shared InFlight: its name and
	// ":", made once rather than per request.
	group string
}

func (c *concurrency) acquire(key string) bool { return c.slots.take(key, c.Max) }

func (c *concurrency) release(key string) { c.slots.give(key) }
