package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rlheader"
)

// Rules finds the rule that applies to a descriptor. *config.Config
// implements it. Lookup returns nil when no rule applies (an unknown
// domain, or no rule at the descriptor's depth); implementations must be
// safe for concurrent use and must not retain entries. The rules Lookup
// returns must not change while the Service uses the Rules (until
// SetRules replaces it): the Service derives values from each rule once,
// such as its RateLimit-Policy header, and caches them.
type Rules interface {
	Lookup(domain string, entries []config.Entry) *config.RateLimit
}

// HeaderMode says what a Service puts in response_headers_to_add:
// rlheader.Mode, of which a Service sends one of HeadersOff,
// HeadersLegacy and HeadersDraft11 (New refuses rlheader.Both). The zero
// value, rlheader.Default, is HeadersOff.
type HeaderMode = rlheader.Mode

const (
	// HeadersOff adds no headers.
	HeadersOff = rlheader.Off
	// HeadersLegacy adds envoyproxy/ratelimit's three headers (limit,
	// remaining, reset in seconds; names in Config.LegacyNames) and
	// Retry-After when over the limit.
	HeadersLegacy = rlheader.Legacy
	// HeadersDraft11 adds RateLimit-Policy and RateLimit as
	// draft-ietf-httpapi-ratelimit-headers-11 defines them, and Retry-After
	// when over the limit.
	HeadersDraft11 = rlheader.Draft11
)

// ParseHeaderMode returns the HeaderMode named s as rlheader.ParseMode
// reads it: "off" (or "", the default), "legacy" or "draft-11" (also
// "draft11"). It refuses "both", which a Service does not send.
func ParseHeaderMode(s string) (HeaderMode, error) {
	m, err := rlheader.ParseMode(s)
	if err == nil && m == rlheader.Both {
		return rlheader.Default, fmt.Errorf("service: header mode %q: not for the rate limit service, which sends one set of headers (want off, legacy or draft-11)", s)
	}
	if err != nil {
		return rlheader.Default, fmt.Errorf("service: unknown header mode %q (want off, legacy or draft-11)", s)
	}
	return m.Or(HeadersOff), nil
}

// LegacyNames are the field names HeadersLegacy uses. An empty field takes
// its default from DefaultLegacyNames.
type LegacyNames = rlheader.LegacyNames

// DefaultLegacyNames are envoyproxy/ratelimit's default names for its
// LIMIT_RESPONSE_HEADERS_ENABLED headers (its LIMIT_LIMIT_HEADER,
// LIMIT_REMAINING_HEADER and LIMIT_RESET_HEADER settings):
// rlheader.EnvoyLegacyNames.
var DefaultLegacyNames = rlheader.EnvoyLegacyNames

// Config configures a Service. Only Limiter is required.
type Config struct {
	// Limiter makes the decisions. Required. To choose what happens when
	// a remote store fails, either set Failure (per-rule failure modes) or
	// wrap the store in package failsafe (one mode for every rule); see
	// the package documentation.
	Limiter sluice.Limiter
	// Failure, when set, puts Limiter behind a circuit breaker and answers
	// each rule by its failure_mode while the store fails; Limiter must
	// then be the store itself. Nil: the Limiter's errors are returned, and
	// rules' failure_mode is ignored.
	Failure *FailurePolicy
	// ForwardAuth, when set, enables the forward-auth endpoint of Handler
	// (/auth, any method) with this forward_auth section of a config: the
	// domain and the descriptors built from each forwarded request. The
	// Service copies its descriptors.
	ForwardAuth *config.ForwardAuth
	// AuthResolver finds the client's address for ForwardAuth's client_ip
	// entries. The auth request's peer is the proxy, so it must trust the
	// proxy: a client_ip entry without trusted proxies is an error of New.
	// Nil: a Resolver that trusts ForwardAuth.TrustedProxies.
	AuthResolver *clientip.Resolver
	// Rules maps descriptors to rules; nil means no rules yet (every
	// descriptor is answered OK). SetRules replaces it.
	Rules Rules
	// Prefix is prepended to every store key, like envoyproxy/ratelimit's
	// CACHE_KEY_PREFIX. Default "".
	Prefix string
	// KeyFormat is how store keys are spelled. The zero value, KeySluice,
	// is StoreKey's; KeyEnvoy is EnvoyStoreKey's.
	KeyFormat KeyFormat
	// ShadowMode is envoyproxy/ratelimit's SHADOW_MODE: every request is
	// decided, counted and answered as without it (statuses OVER_LIMIT,
	// over_limit counted, dynamic metadata and headers as without it),
	// except that an OVER_LIMIT overall code becomes OK, counted in
	// sluice_rls_global_shadow_mode_total. A rule's own shadow_mode is
	// another thing: its descriptor's status is OK.
	ShadowMode bool
	// QuotaMode puts every descriptor in quota mode, like
	// envoyproxy/ratelimit's QUOTA_MODE: every descriptor but an unlimited
	// one counts as a quota, those that match no rule included, and the
	// answer is OVER_LIMIT only when every quota descriptor is over its
	// limit (a matchless one never is). Statuses still say which are
	// over. false: only rules with quota_mode are quotas.
	QuotaMode bool
	// DynamicMetadata, like envoyproxy/ratelimit's
	// RESPONSE_DYNAMIC_METADATA, sets the response's dynamic_metadata:
	// the domain, each descriptor's entries ("key=value"), override and
	// hits_addend, the request's hits_addend, and the metadata of the
	// rules whose descriptors were admitted, deep-merged (see the package
	// documentation). false: no dynamic_metadata, at no cost.
	DynamicMetadata bool
	// NearLimitRatio is envoyproxy/ratelimit's NEAR_LIMIT_RATIO: the
	// units spent past ⌊capacity × NearLimitRatio⌋ (computed in float32,
	// as there) and up to the limit count as near the limit
	// (sluice_rls_near_limit_total), those of a request that crosses the
	// limit included (its units past it are over_limit). 0 means
	// DefaultNearLimitRatio (0.8); for a threshold of 0 (every admitted
	// unit near), use math.SmallestNonzeroFloat64. It must be in [0, 1].
	NearLimitRatio float64
	// StopIncrementWhenOverLimit is envoyproxy/ratelimit's
	// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: when a descriptor of a
	// request is over its limit (in shadow or quota mode too), the
	// request spends on none of its descriptors: what the others spent is
	// refunded through sluice.Refunder, and their limit_remaining says so.
	// false: each admitted descriptor spends, whatever the others say.
	StopIncrementWhenOverLimit bool
	// AllowRefunds lets a descriptor with is_negative_hits give its
	// hits_addend back to its key (sluice.Refunder; never above a fresh
	// key's allowance), answered like a check. Any caller that reaches the
	// service can then restore its own allowance, so turn it on only when
	// every caller is trusted to refund what it spent. false (the
	// default): is_negative_hits is ignored and the descriptor spends its
	// hits_addend, as envoyproxy/ratelimit counts it.
	AllowRefunds bool
	// Headers says what goes in response_headers_to_add. The zero value
	// (rlheader.Default) is HeadersOff.
	Headers HeaderMode
	// PolicyNames says what the response headers call a rule's limits
	// (see PolicyNames). Default PolicyNamesRule: the rule's name, else
	// its full key.
	PolicyNames PolicyNames
	// LegacyNames are the header names of HeadersLegacy; empty fields
	// default to DefaultLegacyNames.
	LegacyNames LegacyNames
	// Logger receives store errors, at most one line per second. Default
	// slog.Default().
	Logger *slog.Logger
	// MaxOverride is the largest requests_per_unit a descriptor's limit
	// override may ask for; a request with a larger one is refused with
	// InvalidArgument (400 over HTTP). Set it when the callers that send
	// overrides are not trusted; mind that Envoy admits a request whose
	// rate limit call fails unless its filter sets failure_mode_deny. 0
	// means DefaultMaxOverride: no maximum, as in envoyproxy/ratelimit.
	MaxOverride uint32
	// MaxCost is the largest cost (hits_addend, of the request or of a
	// descriptor) a request may ask for; a larger one is refused as
	// MaxOverride is. 0 means DefaultMaxCost: no maximum (within it, a
	// cost above a rule's capacity is OVER_LIMIT).
	MaxCost uint64
	// MaxDescriptors is the most descriptors a request may carry, and
	// MaxEntries the most entries one descriptor may: a request with more
	// is refused as MaxOverride is, before any rule is looked up or the
	// store asked, so that the work and memory of one call are bounded
	// by the operator, not by how many tiny descriptors fit in a message.
	// 0 means DefaultMaxDescriptors and DefaultMaxEntries; negative is an
	// error.
	MaxDescriptors, MaxEntries int
	// MaxJSONBytesInFlight bounds the request bodies POST /json holds
	// while it reads them, all requests together: a body that would take
	// more is answered 503 with Retry-After, so that many slow clients
	// cannot make the process hold their bodies without end. 0 means
	// DefaultMaxJSONBytesInFlight; negative is an error.
	MaxJSONBytesInFlight int64
	// MaxJSONBytesPerPeer bounds the part of MaxJSONBytesInFlight the
	// bodies from one peer (the connection's remote address; an IPv6
	// address by its /64) may hold: past it that peer's body is answered
	// 503 with Retry-After while others are still read, so that one
	// client's slow bodies cannot make every other caller wait. A peer is
	// the address a client cannot choose; behind a proxy every client
	// shares the proxy's, so raise it there (up to MaxJSONBytesInFlight,
	// which turns the split off). 0 means MaxJSONBytesInFlight divided by
	// DefaultJSONPeerShares, and never less than MaxJSONBody; negative or
	// above MaxJSONBytesInFlight is an error.
	MaxJSONBytesPerPeer int64
	// JSONBodyTimeout bounds the wait for each read of a POST /json body
	// (as NGINX's client_body_timeout), and is the grace before
	// JSONBodyMinRate applies. A body past either is answered 408 and its
	// connection closed. The http.Server's ReadTimeout, when set, still
	// bounds the whole request: neither stretches it. 0 means
	// DefaultJSONBodyTimeout; negative is an error.
	JSONBodyTimeout time.Duration
	// JSONBodyMinRate is the least average rate, in bytes per second, at
	// which a POST /json body must arrive: it must be whole by
	// JSONBodyTimeout plus one second per JSONBodyMinRate bytes received
	// (see package internal/bodyrate, which sluice proxy's
	// client_body_min_rate shares), or it is answered 408. Without it a
	// client sending a byte just within each JSONBodyTimeout holds its
	// share of the budget until the read timeout. 0 means 1 KiB/s;
	// negative turns it off.
	JSONBodyMinRate int64
	// MaxDetailedSeries caps the metrics series of each rule with
	// detailed_metric, whose labels are the descriptors clients send: a
	// rule counts under at most this many descriptor labels, and under
	// FullKey#other past them. 0 means DefaultMaxDetailedSeries (100);
	// negative is an error.
	MaxDetailedSeries int
	// Healthy, when set, is asked at each health check (GET /healthcheck
	// and the gRPC health service's Check), and by New, SetServing and
	// RecheckHealth for what the gRPC health service's Watch streams:
	// while it returns false they report NOT_SERVING (503), as while
	// draining. Nil: the health checks follow SetServing only. It must be
	// fast and safe for concurrent use; `sluice serve` sets it with
	// REDIS_HEALTH_CHECK_ACTIVE_CONNECTION (see StoreAvailable) and
	// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, and calls RecheckHealth
	// when a config is applied.
	Healthy func() bool
	// TenantLimit, when set, gives a matched rule's descriptor its
	// tenant's limit at run time (a plan or an override; see
	// TenantLimitsBy and package plans), asked after the rule is found.
	// Nil: every descriptor gets its rule's limit.
	TenantLimit TenantLimitFunc
	// Observer, when set, receives each spending decision (see Observer),
	// e.g. for the admin page's live view. Nil: nothing is observed, at
	// no cost.
	Observer Observer
	// Registerer receives the service's metrics; nil means no metrics.
	// When it is also a prometheus.Gatherer (as *prometheus.Registry is),
	// Handler serves it at GET /metrics.
	Registerer prometheus.Registerer
}

// DefaultNearLimitRatio is Config.NearLimitRatio's default, as
// envoyproxy/ratelimit's NEAR_LIMIT_RATIO.
const DefaultNearLimitRatio = 0.8

// Defaults of Config.MaxOverride and Config.MaxCost: no maximum, the
// range of the wire's fields, as envoyproxy/ratelimit accepts. Every
// algorithm keeps bounded state per key (the sliding log one entry per
// request in its window, at most sluice.MaxLogRate) and a cost above a limit's capacity
// is a denial, so a large override or cost costs the store no more than
// a small one; the maxima exist for operators who want to refuse them.
const (
	DefaultMaxOverride = math.MaxUint32
	DefaultMaxCost     = math.MaxUint64
)

// DefaultMaxJSONBytesInFlight is Config.MaxJSONBytesInFlight's default:
// 128 MiB, 128 bodies of the largest size at once.
const DefaultMaxJSONBytesInFlight = 128 << 20

// DefaultJSONBodyTimeout is Config.JSONBodyTimeout's default: 10 s. The
// callers of a rate limit service are services on the same network; a
// body of a few hundred bytes arrives in milliseconds.
const DefaultJSONBodyTimeout = 10 * time.Second

// Defaults of Config.MaxDescriptors and Config.MaxEntries: Envoy sends one
// descriptor per rate limit action of a route and one entry per action
// item, a handful of each; these leave ample room and keep one call to at
// most 256 store calls.
const (
	DefaultMaxDescriptors = 256
	DefaultMaxEntries     = 64
)

// HealthServiceName is the gRPC service name the health service reports,
// besides the server-wide "" and LegacyHealthServiceName.
const HealthServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// LegacyHealthServiceName is the one name envoyproxy/ratelimit registers
// with gRPC health, which Envoy's health checks and Kubernetes' gRPC probes
// written for it ask for; the health service reports it as it reports
// HealthServiceName.
const LegacyHealthServiceName = "ratelimit"

// MaxUnlimited is the limit_remaining of an unlimited rule: MaxUint32, as
// envoyproxy/ratelimit reports it.
const MaxUnlimited = math.MaxUint32

// ErrInvalidRequest is wrapped by the errors ShouldRateLimit returns for a
// malformed request; they carry the gRPC code InvalidArgument.
var ErrInvalidRequest = errors.New("service: invalid request")

// Service answers rate limit requests. It is safe for concurrent use; its
// rules may be swapped with SetRules while it serves. Its zero value is not
// usable (it has no Limiter, rules or metrics); make one with New.
type Service struct {
	limiter  sluice.Limiter
	refunder sluice.Refunder // nil when the limiter cannot refund
	fb       *fallback       // nil without Config.Failure
	auth     *forwardAuth    // nil without Config.ForwardAuth
	rules    atomic.Pointer[rulesBox]
	prefix   string
	rawKeys  bool   // Config.KeyFormat is KeyEnvoy
	maxRPU   uint32 // Config.MaxOverride
	maxCost  uint64 // Config.MaxCost
	maxDescs int    // Config.MaxDescriptors
	maxEnts  int    // Config.MaxEntries
	shadow   bool
	quota    bool    // Config.QuotaMode
	dynMeta  bool    // Config.DynamicMetadata
	nearRat  float64 // Config.NearLimitRatio
	stopIncr bool    // Config.StopIncrementWhenOverLimit
	refunds  bool    // Config.AllowRefunds
	headers  HeaderMode
	names    PolicyNames // Config.PolicyNames
	legacy   LegacyNames
	log      *slog.Logger
	logH     slog.Handler // log's handler, asked directly whether it logs decisions
	m        *metrics     // nil: no metrics
	gatherer prometheus.Gatherer
	health   *health.Server
	serving  atomic.Bool
	healthFn func() bool // Config.Healthy
	// healthMu orders SetServing and RecheckHealth, so that a status
	// worked out before a drain is not set after it.
	healthMu sync.Mutex
	lastLog  atomic.Int64 // Unix ns of the last store error log line

	tenantFn TenantLimitFunc // Config.TenantLimit
	obs      Observer        // Config.Observer

	// jsonBytes counts the bytes of the POST /json bodies being read
	// now; jsonTimeout and jsonMinRate bound how slowly they arrive.
	jsonBytes   jsonBudget
	jsonTimeout time.Duration
	jsonMinRate int64
}

// New returns a Service configured by cfg. It fails when cfg.Limiter is nil
// or the metrics cannot be registered. The Service starts serving: the
// health service reports SERVING until SetServing(false).
func New(cfg Config) (*Service, error) {
	if cfg.Limiter == nil {
		return nil, errors.New("service: Config.Limiter is nil")
	}
	if !(cfg.NearLimitRatio >= 0 && cfg.NearLimitRatio <= 1) {
		return nil, fmt.Errorf("service: Config.NearLimitRatio %v is not in [0, 1]", cfg.NearLimitRatio)
	}
	headers := cfg.Headers.Or(HeadersOff)
	if headers != HeadersOff && headers != HeadersLegacy && headers != HeadersDraft11 {
		return nil, fmt.Errorf("service: header mode %v: a Service sends off, legacy or draft-11", headers)
	}
	s := &Service{
		limiter:  cfg.Limiter,
		prefix:   cfg.Prefix,
		rawKeys:  cfg.KeyFormat == KeyEnvoy,
		maxRPU:   cmp.Or(cfg.MaxOverride, DefaultMaxOverride),
		maxCost:  cmp.Or(cfg.MaxCost, DefaultMaxCost),
		maxDescs: cmp.Or(cfg.MaxDescriptors, DefaultMaxDescriptors),
		maxEnts:  cmp.Or(cfg.MaxEntries, DefaultMaxEntries),
		shadow:   cfg.ShadowMode,
		quota:    cfg.QuotaMode,
		dynMeta:  cfg.DynamicMetadata,
		nearRat:  cmp.Or(cfg.NearLimitRatio, DefaultNearLimitRatio),
		stopIncr: cfg.StopIncrementWhenOverLimit,
		refunds:  cfg.AllowRefunds,
		headers:  headers,
		names:    cfg.PolicyNames,
		legacy: LegacyNames{
			Limit:     cmp.Or(cfg.LegacyNames.Limit, DefaultLegacyNames.Limit),
			Remaining: cmp.Or(cfg.LegacyNames.Remaining, DefaultLegacyNames.Remaining),
			Reset:     cmp.Or(cfg.LegacyNames.Reset, DefaultLegacyNames.Reset),
		},
		log:      cmp.Or(cfg.Logger, slog.Default()),
		health:   health.NewServer(),
		healthFn: cfg.Healthy,
		tenantFn: cfg.TenantLimit,
		obs:      cfg.Observer,
	}
	s.logH = s.log.Handler()
	if cfg.Failure != nil {
		fb, err := newFallback(cfg.Limiter, cfg.Failure, s.log)
		if err != nil {
			return nil, err
		}
		s.fb, s.limiter = fb, fb.def
	} else {
		s.refunder, _ = cfg.Limiter.(sluice.Refunder)
	}
	if cfg.ForwardAuth != nil {
		a, err := s.newForwardAuth(cfg.ForwardAuth, cfg.AuthResolver)
		if err != nil {
			return nil, err
		}
		s.auth = a
	}
	if err := s.setJSONBounds(cfg); err != nil {
		return nil, err
	}
	if cfg.MaxDescriptors < 0 || cfg.MaxEntries < 0 {
		return nil, fmt.Errorf("service: Config.MaxDescriptors %d or MaxEntries %d is negative", cfg.MaxDescriptors, cfg.MaxEntries)
	}
	if cfg.PolicyNames > PolicyNamesIndex {
		return nil, fmt.Errorf("service: Config.PolicyNames %v is none of rule, hash or index", cfg.PolicyNames)
	}
	if cfg.MaxDetailedSeries < 0 {
		return nil, fmt.Errorf("service: Config.MaxDetailedSeries %d is negative", cfg.MaxDetailedSeries)
	}
	if cfg.Registerer != nil {
		m, err := newMetrics(cfg.Registerer, cmp.Or(cfg.MaxDetailedSeries, DefaultMaxDetailedSeries))
		if err != nil {
			return nil, err
		}
		s.m = m
		s.gatherer, _ = cfg.Registerer.(prometheus.Gatherer)
	}
	if err := s.SetRules(cfg.Rules); err != nil {
		return nil, err
	}
	s.SetServing(true)
	return s, nil
}

// Close releases what the Service holds. The Service owns no store: it
// closes neither Config.Limiter nor Config.Failure.Local, which are the
// caller's. It returns nil, and may be called more than once.
func (s *Service) Close() error { return nil }

// SetRules replaces the rules, as on a config reload. Requests already
// being answered finish with the rules they started with. nil means no
// rules. Rules the Service cannot serve are refused, and the current ones
// kept: a rule whose failure_mode is local when Config.Failure has no
// Local store (seen in a Rules that lists its rules, as *config.Config
// does; the error is a *config.Error naming the rule's file and line).
func (s *Service) SetRules(r Rules) error {
	if s.fb != nil {
		if err := s.fb.checkRules(r); err != nil {
			return err
		}
	}
	s.rules.Store(&rulesBox{r: r})
	return nil
}

// SetServing sets what the health checks report: SERVING (and 200 at GET
// /healthcheck) or NOT_SERVING (and 503), as when draining before a
// shutdown. It does not change how ShouldRateLimit answers.
func (s *Service) SetServing(ok bool) {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	s.serving.Store(ok)
	s.setHealthLocked()
}

// RecheckHealth asks Config.Healthy again and gives the gRPC health
// service's Watch streams the status it and SetServing make now. Check
// and GET /healthcheck ask Config.Healthy at each call; Watch streams a
// change only once RecheckHealth (or SetServing) sees it, so whoever
// changes what Config.Healthy reports (a config with a domain loaded or
// removed, say) calls it. Safe for concurrent use; without
// Config.Healthy it changes nothing.
func (s *Service) RecheckHealth() {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	s.setHealthLocked()
}

// setHealthLocked sets the gRPC health statuses of every name the health
// service reports from healthy; health.Server streams a status to a
// watcher only when it differs from the last one sent. healthMu is held.
func (s *Service) setHealthLocked() {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if s.healthy() {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range [...]string{"", HealthServiceName, LegacyHealthServiceName} {
		s.health.SetServingStatus(name, st)
	}
}

// codedError carries a gRPC code with an ordinary wrapped error.
type codedError struct {
	code codes.Code
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// GRPCStatus lets package grpc and status.Code see the code.
func (e *codedError) GRPCStatus() *status.Status { return status.New(e.code, e.err.Error()) }

func invalid(format string, args ...any) error {
	return &codedError{codes.InvalidArgument, fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)}
}

// plan is what one descriptor asks for, before the store is asked.
type plan struct {
	rule    *config.RateLimit // nil: no rule applies
	lim     sluice.Limit
	rpu     uint32
	unit    pb.RateLimitResponse_RateLimit_Unit
	period  time.Duration
	name    string        // current_limit.name
	policy  string        // the header policy name
	label   string        // the metrics label
	info    *ruleInfo     // the rule's cached values; nil for an override or when not cached
	ctr     *ruleCounters // label's counters; nil: looked up by label
	shadow  bool
	cost    uint64
	check   bool // cost 0 or is_negative_hits: nothing is spent
	refund  bool // is_negative_hits
	keyDesc *rlpb.RateLimitDescriptor
	entries []config.Entry
	key     string          // the store key of entries, once decide has built it; "": not built
	meta    map[string]any  // the matched rule's metadata, kept through an override
	metaVal *structpb.Value // meta converted, from the rule's ruleInfo; nil: convert meta
}

// outcome is one descriptor's answer.
type outcome struct {
	st       *pb.RateLimitResponse_DescriptorStatus
	eligible bool // may choose the response headers
	over     bool // enforced and over the limit
	denied   bool // over the limit, enforced or not (shadow mode)
	spent    bool // the store spent the cost (see Config.StopIncrementWhenOverLimit)
	remain   int64
	wait     time.Duration
	p        *plan
}

// ShouldRateLimit decides a RateLimitRequest, as the package documentation
// describes. A malformed request returns an error with the gRPC code
// InvalidArgument (wrapping ErrInvalidRequest), a failing store one with
// the code Unavailable (wrapping the store's error).
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	sc := getScratch()
	// evaluateIn, written out: its call and its third result cost about
	// 20 of a decision's instructions (BENCHMARKS.md, "Cost per decision").
	start := monoNow()
	resp, _, err := s.shouldRateLimit(ctx, req, sc)
	if s.m != nil {
		s.m.observe(monoNow()-start, resp, err)
	}
	sc.release()
	return resp, err
}

// evaluate is ShouldRateLimit, also returning the outcomes for the
// forward-auth endpoint's headers.
func (s *Service) evaluate(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, []outcome, error) {
	return s.evaluateIn(ctx, req, new(scratch))
}

// monoBase is the instant monoNow counts from.
var monoBase = time.Now()

// monoNow is the monotonic clock's reading since monoBase: one clock read,
// where time.Now reads the wall clock too, which a call's duration does
// not need.
func monoNow() time.Duration { return time.Since(monoBase) }

// evaluateIn is evaluate with its plans and outcomes in sc.
func (s *Service) evaluateIn(ctx context.Context, req *pb.RateLimitRequest, sc *scratch) (*pb.RateLimitResponse, []outcome, error) {
	start := monoNow()
	resp, outs, err := s.shouldRateLimit(ctx, req, sc)
	if s.m != nil {
		s.m.observe(monoNow()-start, resp, err)
	}
	return resp, outs, err
}

func (s *Service) shouldRateLimit(ctx context.Context, req *pb.RateLimitRequest, sc *scratch) (*pb.RateLimitResponse, []outcome, error) {
	hits, entriesIn, err := s.checkRequest(req)
	if err != nil {
		return nil, nil, err
	}
	descs := req.GetDescriptors()
	box := s.rules.Load()
	var rules Rules
	if box != nil {
		rules = box.r
	}
	plans, outs, buf := sc.take(len(descs), entriesIn)
	replaced := false
	for i, d := range descs {
		n := len(d.GetEntries())
		p := &plans[i]
		if err := s.planDescriptor(i, d, buf[:n:n], hits, req.GetDomain(), rules, p); err != nil {
			return nil, nil, err
		}
		buf = buf[n:]
		replaced = replaced || p.rule != nil && len(p.rule.Replaces) > 0
	}
	if replaced {
		dropReplaced(plans)
	}
	// Whether the domain may use overrides is asked only of a request that
	// carries one: the answer is a map lookup the common request skips.
	overrides, asked := false, false
	for i := range plans {
		if !asked && plans[i].keyDesc.GetLimit() != nil {
			overrides, asked = domainKnown(rules, req.GetDomain()), true
		}
		s.resolve(box, req.GetDomain(), &plans[i], overrides)
		s.tenantLimit(ctx, req.GetDomain(), &plans[i])
	}
	resp, err := s.respond(ctx, req, plans, outs)
	if err != nil {
		return nil, nil, err
	}
	return resp, outs, nil
}

// checkRequest checks what bounds a request's work before any of it is
// done: its domain, how many descriptors and entries it has, and its
// cost. It returns the request's cost (hits_addend, 0 meaning 1) and the
// number of entries of all its descriptors.
func (s *Service) checkRequest(req *pb.RateLimitRequest) (hits uint64, entries int, err error) {
	if req == nil {
		return 0, 0, invalid("nil request")
	}
	if req.GetDomain() == "" {
		return 0, 0, invalid("empty domain")
	}
	descs := req.GetDescriptors()
	if len(descs) == 0 {
		return 0, 0, invalid("no descriptors")
	}
	if len(descs) > s.maxDescs {
		return 0, 0, invalid("%d descriptors, over the maximum of %d", len(descs), s.maxDescs)
	}
	hits = max(uint64(req.GetHitsAddend()), 1)
	if hits > s.maxCost {
		return 0, 0, invalid("hits_addend %d is over the maximum cost %d", hits, s.maxCost)
	}
	for i, d := range descs {
		m := len(d.GetEntries())
		if m > s.maxEnts {
			return 0, 0, invalid("descriptor %d has %d entries, over the maximum of %d", i, m, s.maxEnts)
		}
		entries += m
	}
	return hits, entries, nil
}

// planDescriptor fills in p for descriptor i of the request, d, with its
// entries in entries (room for them, from the scratch), its cost and its
// rule (share_threshold levels keyed by their patterns), checking its
// fields.
func (s *Service) planDescriptor(i int, d *rlpb.RateLimitDescriptor, entries []config.Entry, hits uint64, domain string, rules Rules, p *plan) error {
	es := d.GetEntries()
	if len(es) == 0 {
		return invalid("descriptor %d has no entries", i)
	}
	for j, e := range es {
		if e.GetKey() == "" {
			return invalid("descriptor %d entry %d has an empty key", i, j)
		}
		entries[j] = config.Entry{Key: e.GetKey(), Value: e.GetValue()}
	}
	p.keyDesc = d
	p.entries = entries
	p.cost = hits
	if h := d.GetHitsAddend(); h != nil {
		p.cost = h.GetValue()
		if p.cost > s.maxCost {
			return invalid("descriptor %d: hits_addend %d is over the maximum cost %d", i, p.cost, s.maxCost)
		}
	}
	// Without Config.AllowRefunds a refund is a spend, as
	// envoyproxy/ratelimit counts it: never an allowance given back.
	p.refund = d.GetIsNegativeHits() && s.refunds
	p.check = p.cost == 0 || p.refund
	if rules != nil {
		p.rule = rules.Lookup(domain, entries)
		if p.rule != nil && p.rule.Shared {
			shareEntries(p.rule, entries)
		}
	}
	if o := d.GetLimit(); o != nil {
		if _, ok := overrideUnits[o.GetUnit()]; !ok {
			return invalid("descriptor %d: limit override has unit %v, want SECOND, MINUTE, HOUR, DAY, MONTH or YEAR", i, o.GetUnit())
		}
		if rpu := o.GetRequestsPerUnit(); rpu > s.maxRPU {
			return invalid("descriptor %d: limit override of %d requests per unit is over the maximum override %d", i, rpu, s.maxRPU)
		}
	}
	return nil
}

// respond decides every planned descriptor, into outs, and builds the
// response: statuses, the overall code (quota mode's rule when a
// descriptor is a quota), the refunds of Config.StopIncrementWhenOverLimit,
// dynamic metadata and headers.
func (s *Service) respond(ctx context.Context, req *pb.RateLimitRequest, plans []plan, outs []outcome) (*pb.RateLimitResponse, error) {
	resp, parts, room := newResponse(len(plans))
	quotas, denied := false, false
	// Once per request: at info, nothing more per decision. Asked of the
	// handler directly, not through Logger.Enabled, whose call and nil
	// context check (a context is never nil) cost about 20 of a
	// decision's instructions (BENCHMARKS.md, "Cost per decision"); a
	// Logger's handler never changes.
	debug := s.logH.Enabled(ctx, slog.LevelDebug)
	for i := range plans {
		o := &outs[i]
		if err := s.decide(ctx, req.GetDomain(), i, &plans[i], &parts[i], o, room); err != nil {
			return nil, err
		}
		if s.obs != nil {
			s.observe(req.GetDomain(), &plans[i], *o)
		}
		if debug {
			s.logDecision(ctx, req.GetDomain(), i, &plans[i], *o)
		}
		resp.Statuses[i] = o.st
		denied = denied || o.denied
		quotas = quotas || s.isQuota(&plans[i])
		if o.st.GetCode() == pb.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
		}
	}
	if quotas {
		resp.OverallCode = s.overall(plans, outs)
	}
	if s.shadow && resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
		// Config.ShadowMode, as envoyproxy/ratelimit's SHADOW_MODE: after
		// every other rule, only the overall code turns OK.
		resp.OverallCode = pb.RateLimitResponse_OK
		s.m.globalShadow()
	}
	if denied && s.stopIncr {
		if err := s.unspend(ctx, req.GetDomain(), plans, outs); err != nil {
			return nil, err
		}
	}
	if s.dynMeta {
		resp.DynamicMetadata = dynamicMetadata(req, plans, outs)
	}
	if s.headers != HeadersOff {
		resp.ResponseHeadersToAdd = s.responseHeaders(outs, resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT)
	}
	return resp, nil
}

// dropReplaced forgets the rules that another matched rule replaces.
func dropReplaced(plans []plan) {
	names := map[string]bool{}
	for i := range plans {
		if r := plans[i].rule; r != nil {
			for _, n := range r.Replaces {
				names[n] = true
			}
		}
	}
	for i := range plans {
		if r := plans[i].rule; r != nil && r.Name != "" && names[r.Name] {
			plans[i].rule = nil
		}
	}
}

// overrideUnits maps a descriptor override's unit to the response's unit
// and its length.
var overrideUnits = map[typepb.RateLimitUnit]struct {
	unit   pb.RateLimitResponse_RateLimit_Unit
	period time.Duration
}{
	typepb.RateLimitUnit_SECOND: {pb.RateLimitResponse_RateLimit_SECOND, time.Second},
	typepb.RateLimitUnit_MINUTE: {pb.RateLimitResponse_RateLimit_MINUTE, time.Minute},
	typepb.RateLimitUnit_HOUR:   {pb.RateLimitResponse_RateLimit_HOUR, time.Hour},
	typepb.RateLimitUnit_DAY:    {pb.RateLimitResponse_RateLimit_DAY, 24 * time.Hour},
	typepb.RateLimitUnit_MONTH:  {pb.RateLimitResponse_RateLimit_MONTH, 30 * 24 * time.Hour},
	typepb.RateLimitUnit_YEAR:   {pb.RateLimitResponse_RateLimit_YEAR, 365 * 24 * time.Hour},
}

// configUnits maps package config's units to the response's.
var configUnits = [...]pb.RateLimitResponse_RateLimit_Unit{
	config.UnitUnknown: pb.RateLimitResponse_RateLimit_UNKNOWN,
	config.Second:      pb.RateLimitResponse_RateLimit_SECOND,
	config.Minute:      pb.RateLimitResponse_RateLimit_MINUTE,
	config.Hour:        pb.RateLimitResponse_RateLimit_HOUR,
	config.Day:         pb.RateLimitResponse_RateLimit_DAY,
	config.Week:        pb.RateLimitResponse_RateLimit_WEEK,
	config.Month:       pb.RateLimitResponse_RateLimit_MONTH,
	config.Year:        pb.RateLimitResponse_RateLimit_YEAR,
}

// overrideLabel is the metrics label of a limit override that matched no
// rule: the descriptor's values must not become labels.
const overrideLabel = "_override"

// domainKnown reports whether the request's domain may use limit
// overrides: whether rules configure it, as envoyproxy/ratelimit's
// GetLimit answers no limit for an unknown domain before it reads an
// override. Rules that cannot say (no Domain method) know every domain;
// nil rules, none.
func domainKnown(rules Rules, domain string) bool {
	switch r := rules.(type) {
	case nil:
		return false
	case interface {
		Domain(name string) *config.Domain
	}:
		return r.Domain(domain) != nil
	}
	return true
}

// resolve fills in the limit a plan enforces: the rule's, or the
// descriptor's override when overrides is set (domainKnown). b holds the
// rules the plan's rule came from.
func (s *Service) resolve(b *rulesBox, domain string, p *plan, overrides bool) {
	r := p.rule
	if r != nil {
		p.meta = r.Metadata
	}
	if o := p.keyDesc.GetLimit(); o != nil && overrides {
		u := overrideUnits[o.GetUnit()]
		rpu := o.GetRequestsPerUnit()
		lim := sluice.Limit{Algorithm: sluice.FixedWindow}
		p.label = overrideLabel
		p.policy = descriptorName(domain, p.keyDesc)
		if r != nil {
			lim.Algorithm = r.Limit.Algorithm
			p.name = r.Name
			p.label, p.ctr = s.label(domain, r, p)
			if r.Name != "" {
				p.policy = r.Name
			}
			if in := s.info(b, r); in != nil && p.ctr == nil {
				p.ctr = in.ctr // the rule's label's; nil for DetailedMetric and ValueToMetric, whose label has its own
			}
		}
		lim.Rate, lim.Burst, lim.Period = int(rpu), int(rpu), u.period
		if r != nil {
			// The rule's layout, where the override's rate allows it: a key
			// decided by turns with and without an override stays in one
			// layout rather than seeding each from the other.
			lim = lim.WithLayoutOf(r.Limit)
		}
		// The override is a plain rule: not unlimited, never in shadow mode.
		p.rule = &config.RateLimit{FullKey: p.policy, Name: p.name, RequestsPerUnit: rpu, Limit: lim}
		if r != nil {
			p.rule.FailureMode = r.FailureMode
		}
		p.lim, p.rpu, p.unit, p.period = lim, rpu, u.unit, u.period
		return
	}
	if r == nil {
		return
	}
	p.lim = r.Limit
	p.rpu = r.RequestsPerUnit
	if int(r.Unit) < len(configUnits) {
		p.unit = configUnits[r.Unit]
	}
	p.period = r.Period()
	p.name = r.Name
	p.policy = policyName(r)
	p.label, p.ctr = s.label(domain, r, p)
	p.shadow = r.ShadowMode // Config.ShadowMode acts on the overall code only (respond)
	if in := s.info(b, r); in != nil {
		p.info, p.metaVal = in, in.meta
		if p.ctr == nil {
			p.ctr = in.ctr
		}
	}
}

// policyName is the name a rule goes by in the response headers: its
// name, else its FullKey.
func policyName(r *config.RateLimit) string { return cmp.Or(r.Name, r.FullKey) }

// label is the metrics label of a rule, and its counters when they are
// cached by label: its FullKey (counters nil: the rule's ruleInfo holds
// them); with DetailedMetric the descriptor itself (detailedName), with
// ValueToMetric the FullKey with the request's values
// (valueToMetricName), each while the rule has fewer than
// Config.MaxDetailedSeries labels, else FullKey#other.
func (s *Service) label(domain string, r *config.RateLimit, p *plan) (string, *ruleCounters) {
	var rc *ruleCounters
	switch {
	case s.m == nil:
		return r.FullKey, nil // counted nowhere
	case r.DetailedMetric:
		rc = s.m.detailed(r.FullKey, detailedName(domain, p.entries, r.Shared))
	case r.ValueToMetric:
		rc = s.m.detailed(r.FullKey, valueToMetricName(domain, r, p.keyDesc))
	default:
		return r.FullKey, nil
	}
	if rc == nil { // an empty label: counted nowhere, as count does
		return "", nil
	}
	return rc.label, rc
}

// KeyFormat says how a Service spells store keys (Config.KeyFormat):
// sluice.KeyFormat, the one setting the service's keys and the Redis
// store's layout share.
type KeyFormat = sluice.KeyFormat

const (
	// KeySluice is StoreKey: values escaped, so that no value can spell
	// another descriptor's key.
	KeySluice = sluice.KeySluice
	// KeyEnvoy is EnvoyStoreKey: envoyproxy/ratelimit's cache key up to its
	// window start, values as sent, for a store that shares counters with
	// envoyproxy/ratelimit (redisstore's envoy key format). Values can then
	// spell each other's keys, as in envoyproxy/ratelimit.
	KeyEnvoy = sluice.KeyEnvoy
)

// storeKey is the store key of a descriptor in the Service's KeyFormat.
func (s *Service) storeKey(domain string, entries []config.Entry) string {
	return s.storeKeyIn(nil, domain, entries)
}

// storeKeyIn is storeKey written into room when it fits (room's bytes
// are then the key's, never to be written again), else allocated.
func (s *Service) storeKeyIn(room []byte, domain string, entries []config.Entry) string {
	return joinKey(room, s.prefix, domain, entries, s.rawKeys)
}

// EnvoyStoreKey returns envoyproxy/ratelimit's cache key of a descriptor up
// to its window start: prefix + domain + "_" + key + "_" + value + "_" for
// each entry, values as they are (e.g. "mongo_cps_database_users_"). A key
// longer than sluice.MaxKeyLen is shortened as StoreKey's is, so it is no
// longer envoyproxy/ratelimit's.
func EnvoyStoreKey(prefix, domain string, entries []config.Entry) string {
	return joinKey(nil, prefix, domain, entries, true)
}

// StoreKey returns the store key of a descriptor: prefix + domain + "_" +
// each entry's key and value, joined by "_", e.g.
// "mongo_cps_database_users", as envoyproxy/ratelimit spells it. A value
// (the client's choice: a header's, through /auth) has its "_" and "%"
// escaped as "%5F" and "%25", so that no value can spell the key of
// another descriptor ("victim_path_/login" at depth one is not tenant
// "victim" with path "/login") and spend its allowance. A key longer than
// sluice.MaxKeyLen is cut and
// ends in the hash of the whole key (sluice.HashKey: "#" and 128 bits of
// its SHA-256 in hex), so that it stays distinct and is MaxKeyLen long.
func StoreKey(prefix, domain string, entries []config.Entry) string {
	return joinKey(nil, prefix, domain, entries, false)
}

// joinKey spells both store keys: prefix + domain + "_" + key + "_" +
// value for each entry, with the value escaped (StoreKey) or raw and a
// final "_" (EnvoyStoreKey). It writes into room when the key fits its
// capacity, else into a new allocation.
func joinKey(room []byte, prefix, domain string, entries []config.Entry, envoy bool) string {
	n := len(prefix) + len(domain)
	if envoy {
		n++ // the final "_"; a byte more than the key would take a size class more
	}
	for _, e := range entries {
		n += 2 + len(e.Key) + len(e.Value)
	}
	// Appends to a byte slice, not a strings.Builder, whose every write
	// checks that the builder was not copied: about 170 of a decision's
	// instructions (BENCHMARKS.md, "Cost per decision"). The slice is not
	// written once it is the string.
	b := room[:0]
	if cap(b) < n {
		b = make([]byte, 0, n)
	}
	b = append(b, prefix...)
	b = append(b, domain...)
	for _, e := range entries {
		b = append(b, '_')
		b = append(b, e.Key...)
		b = append(b, '_')
		if envoy {
			b = append(b, e.Value...)
		} else {
			b = appendKeyValue(b, e.Value)
		}
	}
	if envoy {
		b = append(b, '_')
	}
	return shorten(unsafe.String(unsafe.SliceData(b), len(b)))
}

// appendKeyValue appends a descriptor value to a store key, its "_" and
// "%" escaped (see StoreKey).
func appendKeyValue(b []byte, v string) []byte {
	// One pass over the bytes: strings.IndexAny costs a rune search per
	// character of the set, which showed in a decision's profile (see
	// BENCHMARKS.md, section "Figures moved from code comments").
	start := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '_' && c != '%' {
			continue
		}
		b = append(b, v[start:i]...)
		if c == '_' {
			b = append(b, "%5F"...)
		} else {
			b = append(b, "%25"...)
		}
		start = i + 1
	}
	return append(b, v[start:]...)
}

func shorten(key string) string {
	if len(key) <= sluice.MaxKeyLen {
		return key
	}
	return sluice.HashKey(key[:sluice.MaxKeyLen-sluice.HashedKeyLen], key)
}

func clampUint32(v int64) uint32 {
	switch {
	case v <= 0:
		return 0
	case v >= math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(v)
}

// decide answers one descriptor, with its status in sp. room, when it is
// not nil, is where its store key may be written (newResponse): the key's
// own allocation, and its cost, saved.
func (s *Service) decide(ctx context.Context, domain string, i int, p *plan, sp *statusParts, o *outcome, room []byte) error {
	sp.st.Code = pb.RateLimitResponse_OK
	*o = outcome{p: p, st: &sp.st}
	r := p.rule
	switch {
	case r == nil:
		return nil
	case r.Unlimited:
		o.st.LimitRemaining = MaxUnlimited
		s.m.count(p.ctr, p.label, tally{hits: p.cost, within: p.cost})
		return nil
	}
	sp.lim.Name, sp.lim.RequestsPerUnit, sp.lim.Unit = p.name, p.rpu, p.unit
	o.st.CurrentLimit = &sp.lim
	capacity := p.lim.Capacity()

	switch {
	case p.rpu == 0: // a block rule
		o.over, o.wait = true, p.period
		if !p.check {
			o.eligible = !p.shadow
		}
		s.m.count(p.ctr, p.label, s.tallyOf(0, p.cost, false, 0, p.shadow))
		s.finish(o, sp)
		return nil
	case len(r.More) > 0: // a rate_limits list (multi.go); never an override
		return s.decideAll(ctx, domain, i, p, sp, o)
	case p.check:
		return s.decideCheck(ctx, domain, i, p, sp, o)
	}
	o.eligible = !p.shadow
	if capacity >= 1 && p.cost > uint64(capacity) {
		// It can never be admitted: a denial, not bad input.
		o.over, o.wait = true, p.period
		s.m.count(p.ctr, p.label, s.tallyOf(capacity, p.cost, false, 0, p.shadow))
		s.finish(o, sp)
		return nil
	}
	p.key = s.storeKeyIn(room, domain, p.entries)
	res, err := s.spend(ctx, i, p, p.key)
	if err != nil {
		return err
	}
	s.decided(o, sp, res)
	return nil
}

// decideCheck answers a descriptor that spends nothing: a check only
// (cost 0), read through peek, or a refund (is_negative_hits).
func (s *Service) decideCheck(ctx context.Context, domain string, i int, p *plan, sp *statusParts, o *outcome) error {
	capacity := p.lim.Capacity()
	if p.cost == 0 { // a check only: the key read without spending (peek.go)
		res, ok, err := s.peek(ctx, domain, i, p)
		if err != nil {
			return s.storeError(ctx, i, p, err)
		}
		if ok {
			s.peeked(o, sp, res)
			return nil
		}
	}
	if p.refund && p.cost > 0 && capacity >= 1 {
		c := int(min(p.cost, uint64(capacity)))
		if err := s.giveBack(ctx, i, p, s.storeKey(domain, p.entries), c); err != nil {
			return err
		}
	}
	o.st.LimitRemaining = clampUint32(int64(capacity))
	return nil
}

// giveBack refunds c units of p's limit at key, through the rule's
// failure mode's Limiter with Config.Failure (a failing store then loses
// the refund, counted: a refund is a courtesy), else through the
// Limiter when it is a sluice.Refunder.
func (s *Service) giveBack(ctx context.Context, i int, p *plan, key string, c int) error {
	switch {
	case s.fb != nil:
		if err := s.fb.limiterOf(p).RefundN(ctx, key, p.lim, c); err != nil {
			if ctx.Err() != nil || errors.Is(err, sluice.ErrBadInput) {
				return s.storeError(ctx, i, p, err)
			}
			s.m.storeError(p.ctr, p.label)
		}
	case s.refunder != nil:
		if err := s.refunder.RefundN(ctx, key, p.lim, c); err != nil {
			return s.storeError(ctx, i, p, err)
		}
	}
	return nil
}

// spend asks the store to spend p's cost at key under p.lim: through the
// rule's failure mode with Config.Failure, else the Limiter, whose
// failsafe Closed answer (sluice.ErrUnavailable) is a denial. Any other
// failure is ShouldRateLimit's error.
func (s *Service) spend(ctx context.Context, i int, p *plan, key string) (sluice.Result, error) {
	var res sluice.Result
	var err error
	if s.fb != nil {
		// The rule's failure mode answers while the store fails.
		res, err = s.allowFailsafe(ctx, p, key)
	} else {
		res, err = s.limiter.AllowN(ctx, key, p.lim, int(p.cost))
	}
	if err != nil {
		if s.fb != nil || !errors.Is(err, sluice.ErrUnavailable) {
			return res, s.storeError(ctx, i, p, err)
		}
		// failsafe's Closed mode: its answer is a denial.
		s.m.storeError(p.ctr, p.label)
		s.logError(i, p, err)
		res = sluice.Result{RetryAfter: res.RetryAfter}
	}
	return res, nil
}

// decided fills in a spending descriptor's outcome from the store's
// Result, and counts it.
func (s *Service) decided(o *outcome, sp *statusParts, res sluice.Result) {
	p := o.p
	if res.Allowed {
		o.spent = true
		o.remain, o.wait = int64(res.Remaining), res.ResetAfter
		o.st.LimitRemaining = clampUint32(o.remain)
	} else {
		o.over, o.wait = true, res.RetryAfter
	}
	s.m.count(p.ctr, p.label, s.tallyOf(p.lim.Capacity(), p.cost, res.Allowed, int64(res.Remaining), p.shadow))
	s.finish(o, sp)
}

// tallyOf is what a decision of cost units on a limit of capacity adds to
// the counters, as envoyproxy/ratelimit counts a request of several hits
// (its base_limiter): remain is what the store reports left, after an
// admitted decision or before a refused one (a refused one spends
// nothing). With the near threshold ⌊capacity × NearLimitRatio⌋, computed
// in float32 as there:
//   - admitted, the units past the threshold are near_limit, all within;
//   - refused with units left (the request crosses the limit), the units
//     past the limit are over_limit and those between the threshold (or
//     what was spent, if more) and the limit near_limit;
//   - refused at or past the limit, every unit is over_limit.
//
// A rule in shadow mode counts its over_limit units in shadow_mode too.
// A request of more units than the capacity is refused unread (remain
// 0): every unit over. So is one refused with at least its cost left,
// which a store keeping sluice.Result's contract never reports.
func (s *Service) tallyOf(capacity int, cost uint64, allowed bool, remain int64, shadow bool) tally {
	c := uint64(max(capacity, 0))
	left := min(uint64(max(remain, 0)), c)
	threshold := uint64(math.Floor(float64(float32(c) * float32(s.nearRat))))
	t := tally{hits: cost, denied: !allowed}
	if allowed {
		t.within = cost
		after := c - left
		before := after - min(cost, after)
		switch {
		case after <= threshold:
		case before >= threshold:
			t.near = cost
		default:
			t.near = after - threshold
		}
		return t
	}
	before := c - left
	if before >= c || left >= cost { // at or past the limit, or a Remaining the refusal contradicts
		t.over = cost
	} else {
		t.over = before + cost - c
		t.near = c - max(threshold, before)
	}
	if shadow {
		t.shadow = t.over
	}
	return t
}

// finish sets the code and duration of a decided outcome, the latter in
// sp.
func (s *Service) finish(o *outcome, sp *statusParts) {
	o.denied = o.over
	if o.over {
		if o.p.shadow {
			o.over = false
		} else {
			o.st.Code = pb.RateLimitResponse_OVER_LIMIT
		}
	}
	if o.wait >= 0 {
		setDuration(&sp.dur, resetSeconds(o.wait, o.p.period))
		o.st.DurationUntilReset = &sp.dur
	}
}

// resetSeconds is a descriptor's duration_until_reset for a wait of w on a
// rule of period: w rounded up to whole seconds, as envoyproxy/ratelimit
// reports it (it counts whole seconds, and Envoy's filter writes
// X-RateLimit-Reset from the seconds alone, so an exact 750ms would reach
// the client as 0, where envoyproxy/ratelimit's clients see 1). A period
// that is not a whole number of seconds (a limit given in code) keeps the
// exact wait.
func resetSeconds(w, period time.Duration) time.Duration {
	if period <= 0 || period%time.Second != 0 {
		return w
	}
	if r := w % time.Second; r != 0 {
		w += time.Second - r
	}
	return w
}

// storeError turns a Limiter's error into ShouldRateLimit's.
func (s *Service) storeError(ctx context.Context, i int, p *plan, err error) error {
	if errors.Is(err, sluice.ErrBadInput) {
		return invalid("descriptor %d (rule %q): %w", i, p.policy, err)
	}
	if cerr := ctx.Err(); cerr != nil {
		return &codedError{status.FromContextError(cerr).Code(), fmt.Errorf("service: descriptor %d: %w", i, err)}
	}
	s.m.storeError(p.ctr, p.label)
	s.logError(i, p, err)
	return &codedError{codes.Unavailable, fmt.Errorf("service: descriptor %d (rule %q): rate limit store: %w", i, p.policy, err)}
}

// logError logs a store error, at most once per second.
func (s *Service) logError(i int, p *plan, err error) {
	now := time.Now().UnixNano()
	last := s.lastLog.Load()
	if now-last < int64(time.Second) || !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("service: rate limit store error", "descriptor", i, "rule", p.label, "error", err.Error())
}
