package rlqs_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/rlqs"
)

// gauges returns the per-bucket gauges of reg by name, for bucket label b.
func gauges(t *testing.T, reg *prometheus.Registry, b string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if label(m, "bucket") == b || len(m.GetLabel()) == 0 {
				out[mf.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Per bucket: what this replica's Envoys reported, what it assigned them,
// and how many Envoys the bucket has; a bucket whose Envoys left is gone.
func TestPerBucketMetricsShowUsageSharesAndClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		c := configtest.Parse(t, edgeYAML)
		s, err := rlqs.New(rlqs.Config{Rules: func() *config.Config { return c }, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		f := newFleet(t.Context(), 4, func(int) *rlqs.Server { return s })
		f.drive(11*time.Second, func(int) float64 { return 50 })
		g := gauges(t, reg, "|3:api=v1")
		t.Logf("%v", g)
		if g["sluice_rlqs_bucket_clients"] != 4 || g["sluice_rlqs_bucket_reported_requests_per_second"] < 190 ||
			g["sluice_rlqs_bucket_assigned_requests_per_second"] < 99 || g["sluice_rlqs_bucket_assigned_requests_per_second"] > 100.01 {
			t.Errorf("metrics %v: want 4 clients, about 200/s reported, 100/s assigned", g)
		}
		f.close()
		synctest.Wait()
		if g := gauges(t, reg, "|3:api=v1"); g["sluice_rlqs_bucket_clients"] != 0 || g["sluice_rlqs_buckets_unlisted"] != 0 {
			t.Errorf("after the Envoys left: %v, want the bucket gone", g)
		}
		shutdown(t, s)
	})
}
