package stores

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/memstore"
)

// MemCollector exports a memory store's Stats, read once per scrape:
//
//   - sluice_memstore_keys, sluice_memstore_bytes: its size now (bytes as
//     memstore.Config.MaxBytes counts them);
//   - sluice_memstore_max_bytes: the budget in force;
//   - sluice_memstore_evictions_total: keys evicted, not yet idle, to stay
//     within the budget (a rising rate means the budget is too small for
//     the traffic, or a flood of new keys);
//   - sluice_memstore_swept_total: idle keys dropped;
//   - sluice_memstore_remembered_total, sluice_memstore_merged_total:
//     evicted keys whose state went to the sketch of evicted keys, and
//     those of them merged into a wildcard (a rising rate means the sketch
//     is saturated: new keys may start as spent as the keys merged).
type MemCollector struct {
	s                       *memstore.Store
	keys, bytes, maxBytes   *prometheus.Desc
	evictions, sweptEntries *prometheus.Desc
	remembered, merged      *prometheus.Desc
}

// NewMemCollector returns the collector of s's Stats; s must not be nil.
func NewMemCollector(s *memstore.Store) *MemCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &MemCollector{
		s:            s,
		keys:         d("sluice_memstore_keys", "Keys the memory store holds."),
		bytes:        d("sluice_memstore_bytes", "Heap bytes the memory store's keys take (keys, states, sliding log entries)."),
		maxBytes:     d("sluice_memstore_max_bytes", "The memory store's byte budget (-memory-max-bytes)."),
		evictions:    d("sluice_memstore_evictions_total", "Keys evicted before they were idle, to stay within the budget."),
		sweptEntries: d("sluice_memstore_swept_total", "Idle keys dropped by sweeps."),
		remembered:   d("sluice_memstore_remembered_total", "Evicted keys whose spent state the sketch of evicted keys took in."),
		merged:       d("sluice_memstore_merged_total", "Evicted keys merged into a wildcard of the full sketch: new keys of that bucket start as spent as they."),
	}
}

// Describe sends the descriptions of the collector's metrics.
func (c *MemCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.keys, c.bytes, c.maxBytes, c.evictions, c.sweptEntries, c.remembered, c.merged} {
		ch <- d
	}
}

// Collect reads the store's Stats once and sends the metrics.
func (c *MemCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(st.Keys))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(c.maxBytes, prometheus.GaugeValue, float64(st.MaxBytes))
	ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(st.Evictions))
	ch <- prometheus.MustNewConstMetric(c.sweptEntries, prometheus.CounterValue, float64(st.Swept))
	ch <- prometheus.MustNewConstMetric(c.remembered, prometheus.CounterValue, float64(st.Remembered))
	ch <- prometheus.MustNewConstMetric(c.merged, prometheus.CounterValue, float64(st.Merged))
}
