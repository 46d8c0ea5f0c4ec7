package sim

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math/rand/v2"
	"slices"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/eventq"
)

// OverloadConfig is a backend past its capacity and the in-flight limits
// to compare in front of it (RunOverload).
//
// The backend has Servers workers, each serving one request in Service,
// and a FIFO queue in front of them: past Servers requests in flight every
// extra request waits its turn, so latency grows with concurrency as
// Little's law says (n in flight take n/capacity each, capacity being
// Servers/Service per second). Requests arrive as a Poisson process at
// Load times the capacity. Everything runs event by event on a simulated
// clock: a run is deterministic for its Seed, and with the defaults it
// plays the same arrivals as package adaptive's own simulation, whose
// figures docs/adaptive.md shows.
type OverloadConfig struct {
	// Servers and Service make the backend. Defaults 50 and 10ms.
	Servers int
	Service time.Duration
	// Load is the offered load as a multiple of the capacity. Default 1.5.
	Load float64
	// Duration is the simulated time; Warmup, the start left out of the
	// figures. Defaults 60s and 20s.
	Duration, Warmup time.Duration
	// Seed seeds the arrivals, and the probe jitter of an
	// adaptive.Gradient whose own Seed is zero. Default 1.
	Seed uint64
	// Bucket is the span of each point of the report's series. Default 1s.
	Bucket time.Duration
	// Limits are the limits compared; nil means DefaultOverloadLimits.
	Limits []OverloadLimit
}

// OverloadLimit is one limit on requests in flight: Fixed, or Adaptive
// with its Window.
type OverloadLimit struct {
	// Name labels the limit in the report.
	Name string
	// Fixed, when positive, is a fixed limit.
	Fixed int
	// Adaptive, when not nil, is an adaptive limiter's algorithm, from
	// adaptive.DefaultInitial between 1 and 1000 in flight.
	Adaptive adaptive.Algorithm
	// Window is the adaptive limiter's window. Zero means ten service
	// times.
	Window time.Duration
}

// DefaultOverloadLimits are the limits RunOverload compares when given
// none, for a backend of servers workers of service each: a fixed limit
// ten times too high, one of 40% of the workers, and the adaptive
// algorithms (AIMD with a latency objective of 1.5 service times, Gradient
// and Gradient2 with their defaults).
func DefaultOverloadLimits(servers int, service time.Duration) []OverloadLimit {
	return []OverloadLimit{
		{Name: fmt.Sprintf("fixed %d (too high)", 10*servers), Fixed: 10 * servers},
		{Name: fmt.Sprintf("fixed %d (too low)", max(1, servers*2/5)), Fixed: max(1, servers*2/5)},
		{Name: "adaptive aimd", Adaptive: adaptive.AIMD{Timeout: 3 * service / 2}},
		{Name: "adaptive gradient", Adaptive: adaptive.Gradient{}},
		{Name: "adaptive gradient2", Adaptive: adaptive.Gradient2{}},
	}
}

// OverloadReport is what RunOverload measured. Its fields are exported
// for encoding/json.
type OverloadReport struct {
	Servers  int              `json:"servers"`
	Service  string           `json:"service"`
	Capacity float64          `json:"capacity_per_second"`
	Load     float64          `json:"load"`
	Duration string           `json:"duration"`
	Warmup   string           `json:"warmup"`
	Seed     uint64           `json:"seed"`
	Bucket   string           `json:"bucket"`
	Arrivals int              `json:"arrivals"`
	Unloaded string           `json:"unloaded_latency"`
	Results  []OverloadResult `json:"results"`
}

// OverloadResult is one limit's figures, measured after the warm-up, and
// its series over the whole run, one point per bucket.
type OverloadResult struct {
	Name string `json:"name"`
	// P99 is the 99th percentile latency of the completed requests;
	// P99Ratio, its multiple of the unloaded latency.
	P99      string  `json:"p99"`
	P99Ratio float64 `json:"p99_ratio"`
	// Goodput is the completed requests per second; GoodputShare, its
	// share of the capacity.
	Goodput      float64 `json:"goodput_per_second"`
	GoodputShare float64 `json:"goodput_share"`
	// Refused is the share of arrivals refused.
	Refused float64 `json:"refused_share"`
	// FinalLimit is the limit at the end of the run.
	FinalLimit int `json:"final_limit"`
	// P99OverTime (seconds), GoodputOverTime (per second) and
	// LimitOverTime (the limit at each bucket's end) are the series.
	P99OverTime     []float64 `json:"p99_over_time"`
	GoodputOverTime []float64 `json:"goodput_over_time"`
	LimitOverTime   []int     `json:"limit_over_time"`
	p99             time.Duration
}

// P99Duration returns P99 as a time.Duration.
func (r OverloadResult) P99Duration() time.Duration { return r.p99 }

func (c *OverloadConfig) fill() error {
	if c.Servers == 0 {
		c.Servers = 50
	}
	if c.Service == 0 {
		c.Service = 10 * time.Millisecond
	}
	if c.Load == 0 {
		c.Load = 1.5
	}
	if c.Duration == 0 {
		c.Duration = time.Minute
	}
	if c.Warmup == 0 {
		c.Warmup = 20 * time.Second
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Bucket == 0 {
		c.Bucket = time.Second
	}
	if c.Limits == nil {
		c.Limits = DefaultOverloadLimits(c.Servers, c.Service)
	}
	switch {
	case c.Servers < 1 || c.Servers > 100_000 || c.Service <= 0:
		return errors.New("sim: overload: need 1 to 100000 servers and a positive service time")
	case !(c.Load > 0 && c.Load <= 100):
		return errors.New("sim: overload: load must be in (0, 100]")
	case c.Warmup < 0 || c.Warmup >= c.Duration || c.Bucket <= 0:
		return errors.New("sim: overload: need 0 <= warmup < duration and a positive bucket")
	case c.Duration/c.Bucket > 100_000:
		return errors.New("sim: overload: more than 100000 buckets")
	case float64(c.Servers)/c.Service.Seconds()*c.Load*c.Duration.Seconds() > 1e8:
		return errors.New("sim: overload: more than 100 million arrivals; shorten the run")
	}
	for _, l := range c.Limits {
		if (l.Fixed > 0) == (l.Adaptive != nil) {
			return fmt.Errorf("sim: overload: limit %q needs a Fixed limit or an Adaptive algorithm, one of them", l.Name)
		}
	}
	return nil
}

// RunOverload runs c's arrivals through each of its limits in front of
// its backend.
func RunOverload(c OverloadConfig) (*OverloadReport, error) {
	if err := c.fill(); err != nil {
		return nil, err
	}
	capacity := float64(c.Servers) / c.Service.Seconds()
	rep := &OverloadReport{
		Servers: c.Servers, Service: c.Service.String(), Capacity: capacity, Load: c.Load,
		Duration: c.Duration.String(), Warmup: c.Warmup.String(), Seed: c.Seed,
		Bucket: c.Bucket.String(), Unloaded: c.Service.String(),
	}
	for _, l := range c.Limits {
		res, arrivals, err := runOneOverload(c, l)
		if err != nil {
			return nil, err
		}
		rep.Arrivals = arrivals
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// overloadEpoch is the simulated clock's start; only differences count.
var overloadEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// limiter is a fixed or an adaptive limit as the simulation uses it.
type limiter struct {
	fixed, inflight int
	lim             *adaptive.Limiter
}

func newLimiter(c OverloadConfig, l OverloadLimit, clock *eventq.Clock) (*limiter, error) {
	if l.Adaptive == nil {
		return &limiter{fixed: l.Fixed}, nil
	}
	w := l.Window
	if w == 0 {
		w = 10 * c.Service
	}
	lim, err := adaptive.New(adaptive.Config{Algorithm: seeded(l.Adaptive, c.Seed), Clock: clock, Max: 1000, Window: w})
	if err != nil {
		return nil, fmt.Errorf("sim: overload: limit %q: %w", l.Name, err)
	}
	return &limiter{lim: lim}, nil
}

// seeded returns algo with the probe jitter of an adaptive.Gradient (given
// as a value or through a pointer) drawn from seed when it has no Seed of
// its own, rather than from the process's source; the caller's Gradient is
// not changed. Any other algorithm is returned as it is.
func seeded(algo adaptive.Algorithm, seed uint64) adaptive.Algorithm {
	var g adaptive.Gradient
	switch a := algo.(type) {
	case adaptive.Gradient:
		g = a
	case *adaptive.Gradient:
		if a == nil {
			return algo
		}
		g = *a
	default:
		return algo
	}
	if g.Seed == 0 {
		g.Seed = seed
	}
	return g
}

func (l *limiter) acquire(ctx context.Context) (adaptive.Token, bool) {
	if l.lim != nil {
		return l.lim.Acquire(ctx, adaptive.Default)
	}
	if l.inflight >= l.fixed {
		return adaptive.Token{}, false
	}
	l.inflight++
	return adaptive.Token{}, true
}

func (l *limiter) done(t adaptive.Token) {
	if l.lim != nil {
		t.Done(adaptive.Success)
		return
	}
	l.inflight--
}

func (l *limiter) limit() int {
	if l.lim != nil {
		return l.lim.Limit()
	}
	return l.fixed
}

// runOneOverload runs c's arrivals through limit l and measures.
func runOneOverload(c OverloadConfig, l OverloadLimit) (OverloadResult, int, error) {
	clock := eventq.NewClock(overloadEpoch)
	lim, err := newLimiter(c, l, clock)
	if err != nil {
		return OverloadResult{}, 0, err
	}
	rng := rand.New(rand.NewPCG(c.Seed, 2))
	rate := c.Load * float64(c.Servers) / c.Service.Seconds()
	gap := func() time.Duration { return time.Duration(rng.ExpFloat64() / rate * float64(time.Second)) }
	workers := eventq.NewWorkers(c.Servers)
	var pending eventq.Queue[pendingReq] // by completion
	nb := int((c.Duration + c.Bucket - 1) / c.Bucket)
	perBucket := make([][]time.Duration, nb)
	limits := make([]int, nb)
	// Room for every completion measured, so that appending never copies.
	lat := make([]time.Duration, 0, int(rate*(c.Duration-c.Warmup).Seconds())+1)
	arrivals, refused, measured := 0, 0, 0
	ctx := context.Background()
	next := gap()
	for next < c.Duration {
		if pending.Len() > 0 && pending.Next() <= next {
			at, ev := pending.Pop()
			clock.Set(at)
			lim.done(ev.tok)
			took := at - ev.arrived
			if b := int(at / c.Bucket); b < nb {
				perBucket[b] = append(perBucket[b], took)
			}
			if ev.arrived >= c.Warmup {
				lat = append(lat, took)
			}
			continue
		}
		now := next
		next += gap()
		clock.Set(now)
		arrivals++
		if b := int(now / c.Bucket); next >= c.Duration || int(next/c.Bucket) != b {
			// The bucket's last arrival: its limit is the bucket's. Read
			// once per bucket, not per arrival (an adaptive limit's
			// Limit takes its lock).
			limits[b] = lim.limit()
		}
		if now >= c.Warmup {
			measured++
		}
		tok, ok := lim.acquire(ctx)
		if !ok {
			if now >= c.Warmup {
				refused++
			}
			continue
		}
		pending.Push(workers.Serve(now, c.Service), pendingReq{arrived: now, tok: tok})
	}
	return overloadResult(c, l.Name, lat, perBucket, limits, lim.limit(), measured, refused), arrivals, nil
}

// overloadResult computes a limit's figures from its latencies.
func overloadResult(c OverloadConfig, name string, lat []time.Duration, perBucket [][]time.Duration, limits []int, final, measured, refused int) OverloadResult {
	slices.Sort(lat)
	res := OverloadResult{Name: name, FinalLimit: final, LimitOverTime: limits}
	if len(lat) > 0 {
		res.p99 = lat[len(lat)*99/100]
	}
	res.P99 = res.p99.String()
	res.P99Ratio = float64(res.p99) / float64(c.Service)
	res.Goodput = float64(len(lat)) / (c.Duration - c.Warmup).Seconds()
	res.GoodputShare = res.Goodput / (float64(c.Servers) / c.Service.Seconds())
	if measured > 0 {
		res.Refused = float64(refused) / float64(measured)
	}
	for _, b := range perBucket {
		slices.Sort(b)
		p := 0.0
		if len(b) > 0 {
			p = b[len(b)*99/100].Seconds()
		}
		res.P99OverTime = append(res.P99OverTime, p)
		res.GoodputOverTime = append(res.GoodputOverTime, float64(len(b))/c.Bucket.Seconds())
	}
	return res
}

// pendingReq is an admitted request in flight.
type pendingReq struct {
	arrived time.Duration
	tok     adaptive.Token
}

// WriteTable writes r as a table, one row per limit.
func (r *OverloadReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "backend: %d workers of %s (capacity %.0f/s, unloaded latency %s), offered %.2g× capacity\n%s simulated, the first %s left out; seed %d; %d arrivals\n\n",
		r.Servers, r.Service, r.Capacity, r.Unloaded, r.Load, r.Duration, r.Warmup, r.Seed, r.Arrivals)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "limit\tp99\tp99/unloaded\tgoodput/s\tof capacity\trefused\tfinal limit\t\n")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%.2f×\t%.0f\t%.1f%%\t%.1f%%\t%d\t\n",
			res.Name, res.p99.Round(100*time.Microsecond), res.P99Ratio, res.Goodput, 100*res.GoodputShare, 100*res.Refused, res.FinalLimit)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\ngoodput: requests completed per second; refused: arrivals refused at once (503), share of those after the warm-up.")
	return err
}

// overloadColors are the lines' colors, one per limit in order.
var overloadColors = []color.RGBA{
	{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	{R: 0x8c, G: 0x8c, B: 0x8c, A: 0xff}, // grey
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	{R: 0x2a, G: 0x9d, B: 0x3f, A: 0xff}, // green
	{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
}

// WriteChart draws r as three panels on a shared time axis: each limit's
// p99 latency, its goodput against the backend's capacity, and its limit
// on requests in flight, and writes the chart to w in format (SVG or PNG).
// Its output for a given report is the same every time.
func (r *OverloadReport) WriteChart(w io.Writer, format string) error {
	if len(r.Results) == 0 {
		return errors.New("sim: chart: no limits to draw")
	}
	plots, err := r.overloadPanels()
	if err != nil {
		return err
	}
	title := fmt.Sprintf("%d workers of %s (capacity %.0f/s) offered %.2g× capacity", r.Servers, r.Service, r.Capacity, r.Load)
	return writeStacked(w, format, 8*vg.Inch, 7*vg.Inch, title, plots)
}

// overloadPanels builds the latency, goodput and limit panels.
func (r *OverloadReport) overloadPanels() ([]*plot.Plot, error) {
	bucket, err := time.ParseDuration(r.Bucket)
	if err != nil || bucket <= 0 {
		return nil, fmt.Errorf("sim: chart: bucket %q", r.Bucket)
	}
	step := bucket.Seconds()
	series := []struct {
		title, unit string
		values      func(OverloadResult) []float64
	}{
		{"p99 latency per " + r.Bucket, "ms", func(o OverloadResult) []float64 {
			v := make([]float64, len(o.P99OverTime))
			for i, s := range o.P99OverTime {
				v[i] = s * 1000
			}
			return v
		}},
		{"goodput (the dashed line: capacity)", "per second", func(o OverloadResult) []float64 { return o.GoodputOverTime }},
		{"limit on requests in flight", "requests", func(o OverloadResult) []float64 {
			v := make([]float64, len(o.LimitOverTime))
			for i, n := range o.LimitOverTime {
				v[i] = float64(n)
			}
			return v
		}},
	}
	var plots []*plot.Plot
	for i, s := range series {
		p := plot.New()
		p.Title.Text = s.title
		p.Title.TextStyle.Font.Size = vg.Points(10)
		p.Y.Label.Text = s.unit
		p.Y.Min = 0
		if i == len(series)-1 {
			p.X.Label.Text = "time (s)"
		} else {
			p.X.Tick.Marker = unlabelled{}
		}
		p.Add(plotter.NewGrid())
		var top float64
		for j, res := range r.Results {
			vals := s.values(res)
			for _, v := range vals {
				top = max(top, v)
			}
			pts := make(plotter.XYs, len(vals))
			for k, v := range vals {
				pts[k] = plotter.XY{X: float64(k+1) * step, Y: v}
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return nil, fmt.Errorf("sim: chart: %w", err)
			}
			l.Color = overloadColors[j%len(overloadColors)]
			l.Width = vg.Points(1.2)
			p.Add(l)
			if i == 0 {
				p.Legend.Add(res.Name, l)
			}
		}
		if i == 1 {
			capLine, err := plotter.NewLine(plotter.XYs{{X: 0, Y: r.Capacity}, {X: step * float64(len(r.Results[0].GoodputOverTime)), Y: r.Capacity}})
			if err != nil {
				return nil, fmt.Errorf("sim: chart: %w", err)
			}
			capLine.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			capLine.Color = color.Black
			p.Add(capLine)
		}
		if i == 0 {
			p.Legend.Top = true
			p.Y.Max = 2.4 * top // room for the legend above the lines
		}
		plots = append(plots, p)
	}
	return plots, nil
}
