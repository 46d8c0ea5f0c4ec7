package service

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
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
	numCounters
)

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
	vecs    [numCounters]*prometheus.CounterVec // by rule
	seconds *prometheus.HistogramVec            // by code
	// codes are seconds' observers, each looked up on first use (so that a
	// code's series appears when it is first observed, as with
	// WithLabelValues on every call).
	codes [numCodes]atomic.Pointer[prometheus.Observer]

	// maxDetailed caps the detailed labels of one rule (see detailed);
	// detailedSets maps a rule's FullKey to its *detailedSet. It is kept
	// across SetRules, as the series are.
	maxDetailed  int
	detailedSets sync.Map
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

// detailedSet is the labels a detailed_metric rule has counted under.
type detailedSet struct {
	labels sync.Map // label → struct{}
	other  string   // FullKey#other
	full   atomic.Bool
	mu     sync.Mutex
	n      int
}

// detailed returns the label to count a detailed_metric rule's descriptor
// under: the descriptor's own label while the rule has fewer than
// maxDetailed of them (or already has this one), else the rule's other
// bucket, FullKey#other.
func (m *metrics) detailed(fullKey, label string) string {
	label = detailedLabel(label)
	v, ok := m.detailedSets.Load(fullKey)
	if !ok {
		v, _ = m.detailedSets.LoadOrStore(fullKey, &detailedSet{other: fullKey + otherSuffix})
	}
	set := v.(*detailedSet)
	if _, ok := set.labels.Load(label); ok {
		return label
	}
	if set.full.Load() {
		return set.other // no lock and no allocation once the rule is full
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	if _, ok := set.labels.Load(label); ok {
		return label
	}
	if set.n >= m.maxDetailed {
		set.full.Store(true)
		return set.other
	}
	set.labels.Store(label, struct{}{})
	set.n++
	return label
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
			overCounter:        counter("over_limit_total", "Hits over each rule's limit, shadow mode included."),
			nearCounter:        counter("near_limit_total", "Admitted hits that left less than 20% of the rule's capacity."),
			withinCounter:      counter("within_limit_total", "Hits admitted by each rule."),
			shadowCounter:      counter("shadow_mode_total", "Hits over the limit of a rule in shadow mode, answered OK."),
			storeErrorsCounter: counter("store_errors_total", "Decisions the store failed to make, per rule."),
		},
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "rls", Name: "decision_seconds",
			Help:    "Time to answer one ShouldRateLimit request, by outcome (ok, over_limit, error).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}, []string{"code"}),
	}
	var err error
	for i, c := range m.vecs {
		if m.vecs[i], err = promreg.Register(reg, c); err != nil {
			return nil, fmt.Errorf("service: registering metrics: %w", err)
		}
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

// count records one descriptor's decision of cost units under rule label;
// rc, when set, holds label's counters.
func (m *metrics) count(rc *ruleCounters, label string, cost uint64, over, near, shadow bool) {
	if m == nil || label == "" {
		return
	}
	c := float64(cost)
	m.add(rc, label, hitsCounter, c)
	switch {
	case over:
		m.add(rc, label, overCounter, c)
		if shadow {
			m.add(rc, label, shadowCounter, c)
		}
	default:
		m.add(rc, label, withinCounter, c)
		if near {
			m.add(rc, label, nearCounter, c)
		}
	}
}

func (m *metrics) storeError(rc *ruleCounters, label string) {
	if m == nil {
		return
	}
	m.add(rc, label, storeErrorsCounter, 1)
}

func (m *metrics) observe(d time.Duration, resp *pb.RateLimitResponse, err error) {
	code := codeOK
	switch {
	case err != nil:
		code = codeError
	case resp.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT:
		code = codeOverLimit
	}
	p := m.codes[code].Load()
	if p == nil {
		o := m.seconds.WithLabelValues(codeNames[code])
		p = &o
		m.codes[code].Store(p)
	}
	(*p).Observe(d.Seconds())
}
