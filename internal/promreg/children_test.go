package promreg_test

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/internal/promreg"
)

// A cached child is the vector's own series: what is counted through
// Children shows in the vector under the same labels, one series per
// label values however many goroutines ask for it first at once.
func TestChildrenCountIntoTheVectorsSeries(t *testing.T) {
	two := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "two_total", Help: "h"}, []string{"a", "b"})
	one := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "one", Help: "h"}, []string{"a"})
	c2, c1 := promreg.NewChildren(two.WithLabelValues), promreg.NewChildren(one.WithLabelValues)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c2.With2("x", "y").Inc()
				c2.With2("x", "z").Inc()
				c1.With1("x").Add(1)
			}
		})
	}
	wg.Wait()
	if got := testutil.ToFloat64(two.WithLabelValues("x", "y")); got != 800 {
		t.Errorf("x,y: %v, want 800", got)
	}
	if got := testutil.ToFloat64(two.WithLabelValues("x", "z")); got != 800 {
		t.Errorf("x,z: %v, want 800", got)
	}
	if got := testutil.ToFloat64(one.WithLabelValues("x")); got != 800 {
		t.Errorf("x: %v, want 800", got)
	}
	if n := testutil.CollectAndCount(two); n != 2 {
		t.Errorf("%d series, want 2", n)
	}
}

// A cached child costs no allocation to find.
func TestChildrenFoundWithoutAllocating(t *testing.T) {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "h"}, []string{"a", "b"})
	c := promreg.NewChildren(v.WithLabelValues)
	c.With2("x", "y")
	if n := testing.AllocsPerRun(100, func() { c.With2("x", "y").Inc() }); n != 0 {
		t.Errorf("%v allocations per cached child", n)
	}
}
