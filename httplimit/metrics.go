package httplimit

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/promreg"
)

// Metrics are the middleware's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	decisions   *prometheus.CounterVec
	storeErrors *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	adaptive    *adaptiveGauges
	// The children of decisions and duration, found without the
	// vectors' hashing and lock on every decision.
	decisionOf *promreg.Children[prometheus.Counter]
	durationOf *promreg.Children[prometheus.Observer]
}

// NewMetrics creates the metrics and registers them with reg:
//
//	sluice_http_decisions_total{policy, outcome}   outcome: allowed, delayed, rejected, shadow_rejected, cancelled, shed, shadow_shed
//	sluice_http_store_errors_total{policy}
//	sluice_http_decision_duration_seconds{policy}  time spent in the Limiter
//	sluice_http_adaptive_limit{policy}             an adaptive policy's current limit
//	sluice_http_adaptive_in_flight{policy}         requests in flight under it
//	sluice_http_adaptive_latency_seconds{policy}   its limiter's latest mean latency
//
// Called again with the same reg, it returns Metrics that count into the
// series registered the first time.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_decisions_total", Help: "Rate limit decisions by policy and outcome.",
		}, []string{"policy", "outcome"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_store_errors_total", Help: "Rate limit store errors by policy.",
		}, []string{"policy"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_http_decision_duration_seconds", Help: "Time spent deciding, by policy.",
			Buckets: []float64{1e-6, 5e-6, 25e-6, 1e-4, 5e-4, 1e-3, 5e-3, 0.025, 0.1},
		}, []string{"policy"}),
		adaptive: newAdaptiveGauges(),
	}
	var err error
	if m.decisions, err = promreg.Register(reg, m.decisions); err != nil {
		return nil, fmt.Errorf("httplimit: metrics: %w", err)
	}
	if m.storeErrors, err = promreg.Register(reg, m.storeErrors); err != nil {
		return nil, fmt.Errorf("httplimit: metrics: %w", err)
	}
	if m.duration, err = promreg.Register(reg, m.duration); err != nil {
		return nil, fmt.Errorf("httplimit: metrics: %w", err)
	}
	if m.adaptive, err = promreg.Register(reg, m.adaptive); err != nil {
		return nil, fmt.Errorf("httplimit: metrics: %w", err)
	}
	m.decisionOf = promreg.NewChildren(m.decisions.WithLabelValues)
	m.durationOf = promreg.NewChildren(m.duration.WithLabelValues)
	return m, nil
}

func (m *Metrics) decision(policy, outcome string) {
	if m != nil {
		m.decisionOf.With2(policy, outcome).Inc()
	}
}

func (m *Metrics) storeError(policy string) {
	if m != nil {
		m.storeErrors.WithLabelValues(policy).Inc()
	}
}

func (m *Metrics) latency(policy string, d time.Duration) {
	if m != nil {
		m.durationOf.With1(policy).Observe(d.Seconds())
	}
}
