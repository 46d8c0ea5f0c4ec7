package gateway

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/promreg"
)

// Metrics are the gateway's own Prometheus metrics; the decisions of each
// policy are httplimit.Metrics'. A nil *Metrics records nothing.
type Metrics struct {
	requests    *prometheus.CounterVec
	inFlight    *prometheus.GaugeVec
	readingBody prometheus.Gauge
	// requestsOf finds requests' children without the vector's hashing
	// and lock on every request.
	requestsOf *promreg.Children[prometheus.Counter]
	inFlightOf *promreg.Children[prometheus.Gauge]
}

// NewMetrics creates the metrics and registers them with reg:
//
//	sluice_proxy_requests_total{route, outcome}  outcome: forwarded, rejected, shed, denied, upstream_error, body_timeout, body_too_large, error, cancelled, queue_full, malformed
//	sluice_proxy_in_flight{upstream}              requests being forwarded now
//	sluice_proxy_reading_body                     requests whose body is being read before they are forwarded
//
// The route label is the route's name, or "-" for requests no pattern
// matched: its values are bounded by the configuration, never by traffic.
//
// Called again with the same reg, it returns Metrics that count into the
// series registered the first time.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_proxy_requests_total", Help: "Requests by route and outcome.",
		}, []string{"route", "outcome"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_proxy_in_flight", Help: "Requests being forwarded, by upstream.",
		}, []string{"upstream"}),
		readingBody: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_proxy_reading_body", Help: "Requests whose body is being read before they are forwarded (NGINX stub_status's Reading).",
		}),
	}
	var err error
	if m.requests, err = promreg.Register(reg, m.requests); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	if m.inFlight, err = promreg.Register(reg, m.inFlight); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	if m.readingBody, err = promreg.Register(reg, m.readingBody); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	m.requestsOf = promreg.NewChildren(m.requests.WithLabelValues)
	m.inFlightOf = promreg.NewChildren(m.inFlight.WithLabelValues)
	return m, nil
}

func (m *Metrics) reading(d float64) {
	if m != nil {
		m.readingBody.Add(d)
	}
}

func (m *Metrics) outcome(route, outcome string) {
	if m != nil {
		m.requestsOf.With2(route, outcome).Inc()
	}
}

func (m *Metrics) inflight(upstream string, d float64) {
	if m != nil {
		m.inFlightOf.With1(upstream).Add(d)
	}
}
