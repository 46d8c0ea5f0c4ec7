package service

import (
	"errors"
	"fmt"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus collectors. A nil *metrics counts
// nothing.
type metrics struct {
	hits, over, near, within, shadow, storeErrors *prometheus.CounterVec
	seconds                                       *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "rls", Name: name, Help: help,
		}, []string{"rule"})
	}
	m := &metrics{
		hits:        counter("hits_total", "Hits (units of cost) asked of each rule."),
		over:        counter("over_limit_total", "Hits over each rule's limit, shadow mode included."),
		near:        counter("near_limit_total", "Admitted hits that left less than 20% of the rule's capacity."),
		within:      counter("within_limit_total", "Hits admitted by each rule."),
		shadow:      counter("shadow_mode_total", "Hits over the limit of a rule in shadow mode, answered OK."),
		storeErrors: counter("store_errors_total", "Decisions the store failed to make, per rule."),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "rls", Name: "decision_seconds",
			Help:    "Time to answer one ShouldRateLimit request, by outcome (ok, over_limit, error).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}, []string{"code"}),
	}
	for _, c := range []**prometheus.CounterVec{&m.hits, &m.over, &m.near, &m.within, &m.shadow, &m.storeErrors} {
		got, err := register(reg, *c)
		if err != nil {
			return nil, err
		}
		*c = got.(*prometheus.CounterVec)
	}
	got, err := register(reg, m.seconds)
	if err != nil {
		return nil, err
	}
	m.seconds = got.(*prometheus.HistogramVec)
	return m, nil
}

// register registers c, or returns the identical collector registered
// before (a second Service on one registry shares the metrics).
func register(reg prometheus.Registerer, c prometheus.Collector) (prometheus.Collector, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		return are.ExistingCollector, nil
	}
	return nil, fmt.Errorf("service: registering metrics: %w", err)
}

// count records one descriptor's decision of cost units under rule label.
func (m *metrics) count(label string, cost uint64, over, near, shadow bool) {
	if m == nil || label == "" {
		return
	}
	c := float64(cost)
	m.hits.WithLabelValues(label).Add(c)
	switch {
	case over:
		m.over.WithLabelValues(label).Add(c)
		if shadow {
			m.shadow.WithLabelValues(label).Add(c)
		}
	default:
		m.within.WithLabelValues(label).Add(c)
		if near {
			m.near.WithLabelValues(label).Add(c)
		}
	}
}

func (m *metrics) storeError(label string) {
	if m == nil {
		return
	}
	m.storeErrors.WithLabelValues(label).Inc()
}

func (m *metrics) observe(d time.Duration, resp *pb.RateLimitResponse, err error) {
	code := "ok"
	switch {
	case err != nil:
		code = "error"
	case resp.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT:
		code = "over_limit"
	}
	m.seconds.WithLabelValues(code).Observe(d.Seconds())
}
