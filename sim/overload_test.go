package sim_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/sim"
)

// The overload scenario of docs/adaptive.md: 50 workers of 10 ms offered
// 1.5× their capacity. A fixed limit too high lets latency grow to the
// queue's (p99 at least 5× the unloaded latency), one too low wastes
// capacity (under half of it), and the adaptive limits Gradient and AIMD
// hold p99 within twice the unloaded latency at 90% of the capacity or
// more.
func TestOverloadAdaptiveHoldsLatencyAndGoodput(t *testing.T) {
	rep, err := sim.RunOverload(sim.OverloadConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + table.String())
	byName := map[string]sim.OverloadResult{}
	for _, r := range rep.Results {
		byName[r.Name] = r
	}
	unloaded := 10 * time.Millisecond
	if r := byName["fixed 500 (too high)"]; r.P99Duration() < 5*unloaded {
		t.Errorf("fixed 500: p99 %v, want the queue's, at least 5× %v", r.P99Duration(), unloaded)
	}
	if r := byName["fixed 20 (too low)"]; r.GoodputShare > 0.5 {
		t.Errorf("fixed 20: goodput %.1f%% of capacity, want it to waste capacity", 100*r.GoodputShare)
	}
	for _, name := range []string{"adaptive aimd", "adaptive gradient"} {
		r, ok := byName[name]
		if !ok {
			t.Fatalf("no %s in the report", name)
		}
		if r.P99Duration() > 2*unloaded {
			t.Errorf("%s: p99 %v, want within twice the unloaded %v", name, r.P99Duration(), unloaded)
		}
		if r.GoodputShare < 0.9 {
			t.Errorf("%s: goodput %.1f%% of capacity, want at least 90%%", name, 100*r.GoodputShare)
		}
		if r.FinalLimit >= 500 || r.FinalLimit < 50 {
			t.Errorf("%s: final limit %d, want it between the workers (50) and the queue (500)", name, r.FinalLimit)
		}
	}
	if len(rep.Results[0].P99OverTime) != 60 || len(rep.Results[0].LimitOverTime) != 60 {
		t.Errorf("series of %d and %d points, want one per second of the minute", len(rep.Results[0].P99OverTime), len(rep.Results[0].LimitOverTime))
	}
}

// The chart of one report is the same bytes every time, in both formats.
func TestOverloadChartIsDeterministic(t *testing.T) {
	c := sim.OverloadConfig{Duration: 5 * time.Second, Warmup: time.Second, Limits: []sim.OverloadLimit{
		{Name: "fixed", Fixed: 500}, {Name: "aimd", Adaptive: adaptive.AIMD{Timeout: 15 * time.Millisecond}},
	}}
	rep, err := sim.RunOverload(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{sim.SVG, sim.PNG} {
		var a, b bytes.Buffer
		if err := rep.WriteChart(&a, format); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteChart(&b, format); err != nil {
			t.Fatal(err)
		}
		if a.Len() == 0 || !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("%s: %d and %d bytes, want the same non-empty chart twice", format, a.Len(), b.Len())
		}
	}
}

func TestOverloadConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  sim.OverloadConfig
		want string
	}{
		{sim.OverloadConfig{Servers: -1}, "servers"},
		{sim.OverloadConfig{Load: 1000}, "load"},
		{sim.OverloadConfig{Warmup: time.Hour}, "warmup"},
		{sim.OverloadConfig{Duration: 24 * time.Hour, Servers: 10000}, "100 million"},
		{sim.OverloadConfig{Limits: []sim.OverloadLimit{{Name: "both", Fixed: 3, Adaptive: adaptive.AIMD{}}}}, "one of them"},
		{sim.OverloadConfig{Limits: []sim.OverloadLimit{{Name: "bad", Adaptive: adaptive.AIMD{BackoffRatio: 2}}}}, "invalid config"},
	} {
		if _, err := sim.RunOverload(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.cfg, err, c.want)
		}
	}
}

// A run with adaptive.Gradient repeats itself for the same seed, the
// Gradient given as a value or through a pointer: its probe times are
// jittered from a source seeded with the run's Seed, not from the
// process's global one.
func TestOverloadGradientRunRepeatsForTheSameSeed(t *testing.T) {
	// Probes every second or so, each jittered by up to half of that.
	g := adaptive.Gradient{ProbeInterval: time.Second, Jitter: 0.5}
	for name, algo := range map[string]adaptive.Algorithm{"value": g, "pointer": &g} {
		t.Run(name, func(t *testing.T) {
			c := sim.OverloadConfig{Duration: 20 * time.Second, Warmup: 2 * time.Second, Seed: 7, Limits: []sim.OverloadLimit{
				{Name: "gradient", Adaptive: algo},
			}}
			run := func() sim.OverloadResult {
				rep, err := sim.RunOverload(c)
				if err != nil {
					t.Fatal(err)
				}
				return rep.Results[0]
			}
			a, b := run(), run()
			if a.P99 != b.P99 || !slices.Equal(a.LimitOverTime, b.LimitOverTime) {
				t.Errorf("two runs of seed 7: p99 %s and %s, limits over time\n%v\n%v", a.P99, b.P99, a.LimitOverTime, b.LimitOverTime)
			}
		})
	}
	if g.Seed != 0 {
		t.Errorf("the caller's Gradient was given Seed %d, want it left as it was", g.Seed)
	}
}
