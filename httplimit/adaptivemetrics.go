package httplimit

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/adaptive"
)

// adaptiveGauges reads the adaptive policies' limiters when the metrics
// are scraped, so that serving a request updates no gauge.
type adaptiveGauges struct {
	limit, inFlight, latency *prometheus.Desc

	mu       sync.Mutex
	limiters map[string]*adaptive.Limiter // by policy name
}

func newAdaptiveGauges() *adaptiveGauges {
	label := []string{"policy"}
	return &adaptiveGauges{
		limit: prometheus.NewDesc("sluice_http_adaptive_limit",
			"Requests an adaptive policy lets be in flight now.", label, nil),
		inFlight: prometheus.NewDesc("sluice_http_adaptive_in_flight",
			"Requests in flight under an adaptive policy's limiter.", label, nil),
		latency: prometheus.NewDesc("sluice_http_adaptive_latency_seconds",
			"Mean latency of the adaptive limiter's last window (0 before the first).", label, nil),
		limiters: map[string]*adaptive.Limiter{},
	}
}

// Describe implements prometheus.Collector.
func (g *adaptiveGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.limit
	ch <- g.inFlight
	ch <- g.latency
}

// Collect implements prometheus.Collector.
func (g *adaptiveGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, l := range g.limiters {
		s := l.Stats()
		ch <- prometheus.MustNewConstMetric(g.limit, prometheus.GaugeValue, float64(s.Limit), name)
		ch <- prometheus.MustNewConstMetric(g.inFlight, prometheus.GaugeValue, float64(s.InFlight), name)
		ch <- prometheus.MustNewConstMetric(g.latency, prometheus.GaugeValue, s.RTT.Seconds(), name)
	}
}

// watch makes l the limiter whose gauges are exported under policy name,
// replacing any before (a reconfiguration); names are bounded by the
// configuration.
func (m *Metrics) watch(name string, l *adaptive.Limiter) {
	if m == nil || m.adaptive == nil {
		return
	}
	m.adaptive.mu.Lock()
	defer m.adaptive.mu.Unlock()
	m.adaptive.limiters[name] = l
}

// WatchAdaptive exports l's limit, requests in flight and latency as the
// gauges of policy name (sluice_http_adaptive_*), for a limiter used
// outside an AdaptivePolicy of this package, as a proxy's per-upstream
// limiter. A later call with the same name replaces l. A nil *Metrics
// does nothing.
func (m *Metrics) WatchAdaptive(name string, l *adaptive.Limiter) { m.watch(name, l) }
