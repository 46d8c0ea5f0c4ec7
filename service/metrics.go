package service

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	gostats "github.com/lyft/gostats"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/promreg"
)

// counterKind indexes the counter vectors of metrics.
type counterKind int

const (
	hitsCounter counterKind = iota
	overCounter
	nearCounter
	withinCounter
	shadowCounter
	storeErrorsCounter
	// The decisions made without the store, by the failure mode that
	// answered them: one vector with a rule and a mode label, curried
	// by mode (see newMetrics).
	fallbackOpenCounter
	fallbackClosedCounter
	fallbackLocalCounter
	numCounters
)

// fallbackKinds are the fallback counters by failsafe.Mode.
var fallbackKinds = [...]counterKind{
	failsafe.Open: fallbackOpenCounter, failsafe.Closed: fallbackClosedCounter, failsafe.Local: fallbackLocalCounter,
}

// decision codes, the label values of decision_seconds.
const (
	codeOK = iota
	codeOverLimit
	codeError
	numCodes
)

var codeNames = [numCodes]string{codeOK: "ok", codeOverLimit: "over_limit", codeError: "error"}

// metrics are the service's Prometheus collectors. A nil *metrics counts
// nothing.
type metrics struct {
	vecs [numCounters]*prometheus.CounterVec // by rule
	// fallbacks is fallback_decisions_total, by rule and mode; vecs holds
	// it curried by each mode.
	fallbacks *prometheus.CounterVec
	seconds   *prometheus.HistogramVec // by code
	// codes are seconds' observers, each looked up on first use (so that a
	// code's series appears when it is first observed, as with
	// WithLabelValues on every call).
	codes [numCodes]atomic.Pointer[prometheus.Observer]

	// maxDetailed caps the detailed labels of one rule (see detailed);
	// detailedSets maps a rule's FullKey to its *detailedSet. It is kept
	// across SetRules, as the series are.
	maxDetailed  int
	detailedSets sync.Map

	// globalShadowed counts the requests Config.ShadowMode answered OK; a
	// vector without labels, so that its series appears on first use.
	globalShadowed *prometheus.CounterVec

	// sd is the statsd sink fed beside the Prometheus counters; nil (the
	// default) sends nothing and costs one load per count.
	sd atomic.Pointer[statsdSink]
}

// DefaultMaxDetailedSeries is the default of Config.MaxDetailedSeries.
const DefaultMaxDetailedSeries = 100

// otherSuffix ends the label of a detailed rule's other bucket:
// FullKey#other.
const otherSuffix = "#other"

// MaxDetailedLabelBytes is the longest metrics label of a detailed_metric
// rule's descriptor: a longer one is cut and ends in sluice.HashKey's hash
// of it ("#" and 32 hex digits), so that distinct descriptors keep
// distinct labels.
const MaxDetailedLabelBytes = 256

// detailedSet is the labels a detailed_metric rule has counted under, each
// with its counters, so that a label's Prometheus series and statsd name
// are looked up and built once, not on every decision. It holds at most
// maxDetailed labels and the other bucket.
type detailedSet struct {
	labels sync.Map // label → *ruleCounters
	other  *ruleCounters
	full   atomic.Bool
	mu     sync.Mutex
	n      int
}

// detailed returns the label to count a detailed_metric rule's descriptor
// under, and that label's counters: the descriptor's own label while the
// rule has fewer than maxDetailed of them (or already has this one), else
// the rule's other bucket, FullKey#other.
func (m *metrics) detailed(fullKey, label string) *ruleCounters {
	label = detailedLabel(label)
	v, ok := m.detailedSets.Load(fullKey)
	if !ok {
		v, _ = m.detailedSets.LoadOrStore(fullKey, &detailedSet{other: m.counters(fullKey + otherSuffix)})
	}
	set := v.(*detailedSet)
	if rc, ok := set.labels.Load(label); ok {
		return rc.(*ruleCounters)
	}
	if set.full.Load() {
		return set.other // no lock and no allocation once the rule is full
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	if rc, ok := set.labels.Load(label); ok {
		return rc.(*ruleCounters)
	}
	if set.n >= m.maxDetailed {
		set.full.Store(true)
		return set.other
	}
	rc := m.counters(label)
	set.labels.Store(label, rc)
	set.n++
	return rc
}

// detailedLabel returns label as a Prometheus label value may be: valid
// UTF-8 (Prometheus panics on anything else) of at most
// MaxDetailedLabelBytes. One that is not is made valid, cut at a rune
// boundary and ended with sluice.HashKey's hash of the original, which
// keeps distinct descriptors apart.
func detailedLabel(label string) string {
	if len(label) <= MaxDetailedLabelBytes && utf8.ValidString(label) {
		return label
	}
	valid := strings.ToValidUTF8(label, "\uFFFD")
	n := min(len(valid), MaxDetailedLabelBytes-sluice.HashedKeyLen)
	for n > 0 && n < len(valid) && !utf8.RuneStart(valid[n]) {
		n--
	}
	return sluice.HashKey(valid[:n], label)
}

func newMetrics(reg prometheus.Registerer, maxDetailed int) (*metrics, error) {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "rls", Name: name, Help: help,
		}, []string{"rule"})
	}
	m := &metrics{
		maxDetailed: maxDetailed,
		vecs: [numCounters]*prometheus.CounterVec{
			hitsCounter:        counter("hits_total", "Hits (units of cost) asked of each rule."),
			overCounter:        counter("over_limit_total", "Hits over each rule's limit, shadow mode included; of a request that crossed the limit, the part past it."),
			nearCounter:        counter("near_limit_total", "Hits past floor(capacity × NEAR_LIMIT_RATIO, default 0.8) of each rule's capacity and within it: of an admitted request, and of one that crossed the limit the part up to it."),
			withinCounter:      counter("within_limit_total", "Hits admitted by each rule."),
			shadowCounter:      counter("shadow_mode_total", "Hits over the limit of a rule in shadow mode (counted as over_limit), answered OK."),
			storeErrorsCounter: counter("store_errors_total", "Decisions the store failed to make, per rule."),
		},
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "rls", Name: "fallback_decisions_total",
			Help: "Decisions (and checks) answered without the store, by its failure or its open breaker, per rule and failure mode (open, closed, local).",
		}, []string{"rule", "mode"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "rls", Name: "decision_seconds",
			Help:    "Time to answer one ShouldRateLimit request, by outcome (ok, over_limit, error).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}, []string{"code"}),
	}
	var err error
	m.globalShadowed, err = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Subsystem: "rls", Name: "global_shadow_mode_total",
		Help: "Requests over the limit answered OK by the service-wide shadow mode.",
	}, nil))
	if err != nil {
		return nil, fmt.Errorf("service: registering metrics: %w", err)
	}
	for i, c := range m.vecs {
		if c == nil {
			continue // a fallback kind, curried below
		}
		if m.vecs[i], err = promreg.Register(reg, c); err != nil {
			return nil, fmt.Errorf("service: registering metrics: %w", err)
		}
	}
	if m.fallbacks, err = promreg.Register(reg, m.fallbacks); err != nil {
		return nil, fmt.Errorf("service: registering metrics: %w", err)
	}
	for mode, k := range fallbackKinds {
		m.vecs[k] = m.fallbacks.MustCurryWith(prometheus.Labels{"mode": failsafe.Mode(mode).String()})
	}
	if m.seconds, err = promreg.Register(reg, m.seconds); err != nil {
		return nil, fmt.Errorf("service: registering metrics: %w", err)
	}
	return m, nil
}

// ruleCounters are the counters of one rule label, each looked up once, on
// first use: a rule's series appear when first counted, as with
// WithLabelValues on every call, without its hashing and locking on every
// decision.
type ruleCounters struct {
	m     *metrics
	label string
	c     [numCounters]atomic.Pointer[prometheus.Counter]
	sc    [numCounters]atomic.Pointer[statsdCounter] // the statsd sink's, when there is one
}

// counters returns the counters of label; nil when m is nil or label is
// empty (nothing is counted).
func (m *metrics) counters(label string) *ruleCounters {
	if m == nil || label == "" {
		return nil
	}
	return &ruleCounters{m: m, label: label}
}

func (rc *ruleCounters) add(k counterKind, v float64) {
	p := rc.c[k].Load()
	if p == nil {
		c := rc.m.vecs[k].WithLabelValues(rc.label)
		p = &c
		rc.c[k].Store(p)
	}
	(*p).Add(v)
}

// add adds v to counter k of label: through rc when it is set (the
// rule's cached counters), else by looking the label up.
func (m *metrics) add(rc *ruleCounters, label string, k counterKind, v float64) {
	if rc != nil {
		rc.add(k, v)
		return
	}
	m.vecs[k].WithLabelValues(label).Add(v)
}

// tally is what one descriptor's decision adds to its rule's counters
// (see Service.tallyOf): hits, and within or over, each with its near
// and shadow parts.
type tally struct {
	hits, within, near, over, shadow uint64
	denied                           bool // counted over (within when false)
}

// kinds returns the counters t adds to and how much, as count adds them:
// hits, then over (with shadow) or within, then near.
func (t tally) kinds() (ks [4]counterKind, vs [4]uint64, n int) {
	ks[0], vs[0], n = hitsCounter, t.hits, 1
	if t.denied {
		ks[n], vs[n], n = overCounter, t.over, n+1
		if t.shadow > 0 {
			ks[n], vs[n], n = shadowCounter, t.shadow, n+1
		}
	} else {
		ks[n], vs[n], n = withinCounter, t.within, n+1
	}
	if t.near > 0 {
		ks[n], vs[n], n = nearCounter, t.near, n+1
	}
	return ks, vs, n
}

// count records one descriptor's decision, t, under rule label, in
// Prometheus and in the statsd sink when there is one: both count the
// same tally. rc, when set, holds label's counters.
func (m *metrics) count(rc *ruleCounters, label string, t tally) {
	if m == nil || label == "" {
		return
	}
	// Prometheus's adds are spelled out, not a loop over kinds: with
	// no statsd sink a decision then costs what it did before the sink,
	// within callgrind's noise (+11 instructions of about 3,870; +37
	// with the loop; see BENCHMARKS.md, "Tracing and statsd").
	// TestStatsdAgreesWithPrometheus holds the two to the same counts.
	if rc != nil {
		// The rule's cached counters, added to directly: through m.add,
		// which asks for rc on every add, a decision cost about 30
		// instructions more (BENCHMARKS.md, "Cost per decision").
		rc.add(hitsCounter, float64(t.hits))
		if t.denied {
			rc.add(overCounter, float64(t.over))
			if t.shadow > 0 {
				rc.add(shadowCounter, float64(t.shadow))
			}
		} else {
			rc.add(withinCounter, float64(t.within))
		}
		if t.near > 0 {
			rc.add(nearCounter, float64(t.near))
		}
	} else {
		m.add(nil, label, hitsCounter, float64(t.hits))
		if t.denied {
			m.add(nil, label, overCounter, float64(t.over))
			if t.shadow > 0 {
				m.add(nil, label, shadowCounter, float64(t.shadow))
			}
		} else {
			m.add(nil, label, withinCounter, float64(t.within))
		}
		if t.near > 0 {
			m.add(nil, label, nearCounter, float64(t.near))
		}
	}
	if sd := m.sd.Load(); sd != nil {
		ks, vs, n := t.kinds()
		for i := range n {
			sd.add(rc, label, ks[i], vs[i])
		}
	}
}

// globalShadow counts one request that Config.ShadowMode answered OK.
func (m *metrics) globalShadow() {
	if m == nil {
		return
	}
	m.globalShadowed.WithLabelValues().Inc()
	if sd := m.sd.Load(); sd != nil {
		sd.globalShadow.Inc()
	}
}

// fallback counts one decision of rule label answered by failure mode
// mode without the store (and, as before, one store error of the rule).
func (m *metrics) fallback(rc *ruleCounters, label string, mode failsafe.Mode) {
	if m == nil {
		return
	}
	m.storeError(rc, label)
	if int(mode) < len(fallbackKinds) {
		m.add(rc, label, fallbackKinds[mode], 1)
	}
}

func (m *metrics) storeError(rc *ruleCounters, label string) {
	if m == nil {
		return
	}
	m.add(rc, label, storeErrorsCounter, 1)
	if sd := m.sd.Load(); sd != nil {
		sd.redisError.Inc()
	}
}

func (m *metrics) observe(d time.Duration, resp *pb.RateLimitResponse, err error) {
	code := codeOK
	switch {
	case err != nil:
		code = codeError
	case resp.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT:
		code = codeOverLimit
	}
	if sd := m.sd.Load(); sd != nil {
		sd.observe(d, err)
	}
	p := m.codes[code].Load()
	if p == nil {
		o := m.seconds.WithLabelValues(codeNames[code])
		p = &o
		m.codes[code].Store(p)
	}
	(*p).Observe(d.Seconds())
}

// statsdSuffixes are the statsd names of the per-rule counters, after
// ratelimit.service.rate_limit.<rule>., as envoyproxy/ratelimit names
// them. A store error is not counted per rule there: it is the service's
// call.should_rate_limit.redis_error.
var statsdSuffixes = [numCounters]string{
	hitsCounter:   "total_hits",
	overCounter:   "over_limit",
	nearCounter:   "near_limit",
	withinCounter: "within_limit",
	shadowCounter: "shadow_mode",
}

// statsdCounter boxes a gostats.Counter for an atomic.Pointer, with the
// sink it counts into: a counter of a sink that SendStatsd replaced is
// made again in the new one.
type statsdCounter struct {
	gostats.Counter
	sd *statsdSink
}

// statsdSink sends the service's counts with envoyproxy/ratelimit's stat
// names to a gostats store (see SendStatsd).
type statsdSink struct {
	rules         gostats.Scope // ratelimit.service.rate_limit
	redisError    gostats.Counter
	serviceError  gostats.Counter
	globalShadow  gostats.Counter
	totalRequests gostats.Counter
	responseTime  gostats.Timer
	// ratelimit.service.config_load_success and config_load_error
	loadSuccess, loadError gostats.Counter
}

// SendStatsd makes the Service count into store as well as into its
// Prometheus metrics, under envoyproxy/ratelimit's stat names, each
// tagged with tags (EXTRA_TAGS; nil for none):
//
//   - ratelimit.service.rate_limit.<rule>.{total_hits,over_limit,near_limit,within_limit,shadow_mode},
//     where <rule> is the rule's metrics label (its FullKey, or what
//     detailed_metric and value_to_metric make of it) with ":", "|",
//     control characters and the dots of every match of
//     \d{1,3}(\.\d{1,3}){3} made "_", as envoyproxy/ratelimit sanitizes
//     stat names (statsdName);
//   - ratelimit.service.call.should_rate_limit.redis_error (a store
//     error) and .service_error (a malformed request);
//   - ratelimit.service.global_shadow_mode (a request Config.ShadowMode
//     answered OK);
//   - ratelimit.service.config_load_success and .config_load_error, as
//     ConfigLoaded counts them;
//   - ratelimit_server.ShouldRateLimit.total_requests and .response_time
//     (a timer in milliseconds, with their fractions, as envoyproxy/ratelimit
//     sends it), for every decision, gRPC and POST /json.
//
// The store flushes them (gostats.Store.Start); the Service only counts.
// It needs Config.Registerer, the counting SendStatsd feeds from, and
// should be called before the Service serves; a later call replaces the
// store. A nil store stops sending.
func (s *Service) SendStatsd(store gostats.Store, tags map[string]string) error {
	if s.m == nil {
		return errors.New("service: SendStatsd needs the metrics of Config.Registerer")
	}
	if store == nil {
		s.m.sd.Store(nil)
		return nil
	}
	root := store.ScopeWithTags("ratelimit", tags)
	call := root.Scope("service").Scope("call").Scope("should_rate_limit")
	server := store.ScopeWithTags("ratelimit_server", tags).Scope("ShouldRateLimit")
	s.m.sd.Store(&statsdSink{
		rules:         root.Scope("service").Scope("rate_limit"),
		redisError:    call.NewCounter("redis_error"),
		serviceError:  call.NewCounter("service_error"),
		globalShadow:  root.Scope("service").NewCounter("global_shadow_mode"),
		loadSuccess:   root.Scope("service").NewCounter("config_load_success"),
		loadError:     root.Scope("service").NewCounter("config_load_error"),
		totalRequests: server.NewCounter("total_requests"),
		responseTime:  server.NewTimer("response_time"),
	})
	return nil
}

// add adds v to counter k of label; rc, when set, caches label's counter.
func (sd *statsdSink) add(rc *ruleCounters, label string, k counterKind, v uint64) {
	if rc == nil {
		sd.rules.NewCounter(statsdName(label) + "." + statsdSuffixes[k]).Add(v)
		return
	}
	p := rc.sc[k].Load()
	if p == nil || p.sd != sd {
		p = &statsdCounter{sd.rules.NewCounter(statsdName(label) + "." + statsdSuffixes[k]), sd}
		rc.sc[k].Store(p)
	}
	p.Add(v)
}

// ConfigLoaded counts one load of the rules (at start, on a reload, from
// xDS) that ended in err, under envoyproxy/ratelimit's statsd names:
// ratelimit.service.config_load_success when err is nil, else
// config_load_error (Envoy Gateway's dashboards map both). It counts
// nothing until SendStatsd gives it a store.
func (s *Service) ConfigLoaded(err error) {
	if s.m == nil {
		return
	}
	sd := s.m.sd.Load()
	switch {
	case sd == nil:
	case err == nil:
		sd.loadSuccess.Inc()
	default:
		sd.loadError.Inc()
	}
}

// observe counts one decision that took d and ended in err.
func (sd *statsdSink) observe(d time.Duration, err error) {
	sd.totalRequests.Inc()
	sd.responseTime.AddValue(float64(d) / float64(time.Millisecond)) // not AddDuration: gostats's base is µs
	if errors.Is(err, ErrInvalidRequest) {
		sd.serviceError.Inc()
	}
}

// statsdName returns a metrics label as a statsd name may spell it, as
// envoyproxy/ratelimit sanitizes its stat names: ":" and "|" (the statsd
// line's separators) become "_", and so do the dots of every match of
// the unanchored pattern \d{1,3}(\.\d{1,3}){3}, leftmost first (an IPv4
// address, whose dots would split it into name levels); Sluice also makes
// control characters "_" (a newline would end the statsd line). Other
// dots stay name levels. A hand-written scan, not a regexp: it runs for
// each new name of a detailed rule (TestStatsdNameAgreesWithTheRegexp
// holds it to the regexp).
func statsdName(label string) string {
	if !needsSanitizing(label) {
		return label
	}
	b := []byte(label)
	for i, c := range b {
		if c == ':' || c == '|' || c < 0x20 || c == 0x7f {
			b[i] = '_'
		}
	}
	joinIPv4Dots(b)
	return string(b)
}

// needsSanitizing reports whether statsdName may change label: it has a
// dot or a character made "_".
func needsSanitizing(label string) bool {
	for i := 0; i < len(label); i++ {
		if c := label[i]; c == '.' || c == ':' || c == '|' || c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// joinIPv4Dots makes "_" the three dots of every match in b of
// \d{1,3}(\.\d{1,3}){3}, unanchored, leftmost first, each search going
// on where the last match ended, as regexp.ReplaceAll does.
func joinIPv4Dots(b []byte) {
	for i := 0; i < len(b); {
		end, dots, ok := ipv4At(b, i)
		if !ok {
			i++
			continue
		}
		for _, d := range dots {
			b[d] = '_'
		}
		i = end
	}
}

// ipv4At reports whether the pattern matches at b[i:], and where the
// match ends and its dots are. The first three parts are runs of one to
// three digits each ended by a dot (the pattern cannot stop inside a run
// that a dot must follow); the last is the first one to three digits of
// the run after the third dot, greedy.
func ipv4At(b []byte, i int) (end int, dots [3]int, ok bool) {
	for part := range 3 {
		n := digitsAt(b, i, 4)
		if n == 0 || n > 3 || i+n >= len(b) || b[i+n] != '.' {
			return 0, dots, false
		}
		dots[part] = i + n
		i += n + 1
	}
	n := digitsAt(b, i, 3)
	if n == 0 {
		return 0, dots, false
	}
	return i + n, dots, true
}

// digitsAt counts the ASCII digits at b[i:], up to max.
func digitsAt(b []byte, i, max int) int {
	n := 0
	for i+n < len(b) && n < max && isDigit(b[i+n]) {
		n++
	}
	return n
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
