package sim

import (
	"cmp"
	"fmt"
	"io"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// AccuracyConfig describes an accuracy study of the sliding window counter:
// Requests arrivals from Keys keys over Duration, each key limited to Rate
// per Period, decided by the counter with each number of sub-windows in
// Buckets, by the layout a sliding_window rule of that limit gets by
// default, by the two-window counter, and by an exact sliding count, and
// judged by two measures (see Accuracy). Zero values mean 10,000,000 requests, 100,000 keys, one hour,
// 100 per minute, the Zipf population and buckets 1, 2, 4, 8 and 16.
type AccuracyConfig struct {
	Requests int
	Keys     int
	Duration time.Duration
	Rate     int
	Period   time.Duration
	Seed     uint64
	// Population is "zipf" (the default: Zipf, exponent S, zero meaning
	// 1.1) or "abusers" (Abusers, with Abusive and AbuseShare).
	Population string
	S          float64
	Abusive    float64
	AbuseShare float64
	// Buckets lists the numbers of sub-windows to measure, each from 1 to
	// sluice.MaxBuckets; nil means 1, 2, 4, 8, 16.
	Buckets []int
	// Moments pairs with Buckets: the i-th counter also keeps Moments[i]
	// means per sub-window (sluice.Limit.Moments, 0 to sluice.MaxMoments),
	// the limiter's own estimator. Nil, or an entry past its end, means 0.
	Moments []int
	// Progress, when not nil, is called now and then with the share of the
	// simulated time done, from 0 to 1.
	Progress func(done float64)
}

// Accuracy is the outcome of an accuracy study. It marshals to JSON as is.
//
// Two measures judge each counter against the exact sliding count of the
// same key, request by request, every request counted:
//
//   - Shared, Cloudflare's: one history for both, in which every request
//     counts, admitted or not (the counter runs with CountRejected, the
//     exact count counts every arrival in (t−Period, t]); a request is
//     wrong when the counter's estimate and the exact count are on
//     different sides of the limit. One error does not change the next
//     decision's history.
//   - Diverging: each keeps its own history of admitted requests, as two
//     limiters deployed side by side would; an early error changes every
//     later decision of its key.
type Accuracy struct {
	// Pattern describes the population.
	Pattern  string `json:"pattern"`
	Rate     int    `json:"rate"`
	Period   string `json:"period"`
	Duration string `json:"duration"`
	Seed     uint64 `json:"seed"`
	// Requests and Keys are the arrivals and the keys that sent any.
	Requests int64 `json:"requests"`
	Keys     int   `json:"keys"`
	// Errors are the baseline's (the two-window counter's) under the
	// diverging measure, as this study reported them before it had two.
	Errors
	// Classes is the keys by mean load (requests per period ÷ Rate), with
	// the baseline's diverging errors.
	Classes []LoadClass `json:"classes"`
	// Default is the layout a sliding_window rule of this limit gets when
	// it sets neither buckets nor moments (sluice.DefaultSlidingWindow):
	// DefaultBuckets sub-windows with DefaultMoments means where the rate
	// and the period allow them, else the two-window counter. Its Buckets
	// and Moments say which.
	Default CounterAccuracy `json:"default"`
	// Baseline is the two-window counter (buckets: 1, the default before
	// moments), which the others are compared with.
	Baseline CounterAccuracy `json:"baseline"`
	// Counters holds one entry per number of sub-windows, in
	// AccuracyConfig.Buckets order.
	Counters []CounterAccuracy `json:"counters"`
}

// CounterAccuracy is the error of the counter with Buckets sub-windows and
// Moments means per sub-window.
type CounterAccuracy struct {
	Buckets int    `json:"buckets"`
	Moments int    `json:"moments"`
	Limit   string `json:"limit"`
	// StateBytes is the size of one key's state in memory (unsafe.Sizeof).
	StateBytes int `json:"state_bytes"`
	// HeapBytes is the most heap one key's state held beyond StateBytes
	// (the buffer of a counter with moments; 0 for the others).
	HeapBytes int     `json:"heap_bytes"`
	Shared    Measure `json:"shared"`
	Diverging Measure `json:"diverging"`
}

// Measure is one measure's errors: requests the counter admitted and the
// exact count refused, the reverse, their percentages of all requests, and
// the errors per load class (in Accuracy.Classes order).
type Measure struct {
	Errors
	WrongPct float64     `json:"wrong_pct"`
	Classes  []LoadClass `json:"classes"`
	// ByPosition splits the errors by where in its sub-window the request
	// fell: element i counts those in the i-th tenth of it, that is those
	// at which between i and i+1 tenths of the oldest sub-window had left
	// the period. Element 0 of each pair is the wrongly admitted, 1 the
	// wrongly rejected.
	ByPosition [10][2]int64 `json:"by_position"`
	// ByMargin splits the errors by how far the exact count was from the
	// other decision, as a share of the rate: the units by which it was
	// over the limit (a wrong admission) or under it (a wrong refusal,
	// counting the request's own cost), in the classes of MarginBounds.
	ByMargin [][2]int64 `json:"by_margin"`
}

// MarginBounds are the upper bounds of Measure.ByMargin's classes, in
// percent of the rate: (0, 1%], (1%, 2%], (2%, 5%], (5%, 10%] and the
// rest. At 100 per period a class of 1% is one unit.
var MarginBounds = []float64{1, 2, 5, 10}

// LoadClass is the keys whose mean load (requests per period ÷ Rate) falls
// in [Low, High), and the errors on their requests.
type LoadClass struct {
	Low             float64 `json:"low"`
	High            float64 `json:"high"` // 0: no upper bound
	Keys            int     `json:"keys"`
	Requests        int64   `json:"requests"`
	Wrong           int64   `json:"wrong"`
	WrongPct        float64 `json:"wrong_pct"` // of this class's requests
	ShareOfAllWrong float64 `json:"share_of_all_wrong_pct"`
}

var classBounds = []float64{0, 0.1, 0.5, 0.9, 1.1, 2, 10}

// DefaultAccuracyBuckets are the numbers of sub-windows a study measures
// when AccuracyConfig.Buckets is nil.
var DefaultAccuracyBuckets = []int{1, 2, 4, 8, 16}

// RunAccuracy runs the study c describes.
func RunAccuracy(c AccuracyConfig) (*Accuracy, error) {
	c.Requests = positiveOr(c.Requests, 10_000_000)
	c.Keys = positiveOr(c.Keys, 100_000)
	if c.Duration <= 0 {
		c.Duration = time.Hour
	}
	load := float64(c.Requests) / c.Duration.Seconds()
	var p Pattern
	switch c.Population {
	case "", "zipf":
		p = Zipf{Keys: c.Keys, S: c.S, Load: load}
	case "abusers":
		p = Abusers{Keys: c.Keys, Abusive: c.Abusive, AbuseShare: c.AbuseShare, Load: load}
	default:
		return nil, fmt.Errorf("sim: unknown population %q (want zipf or abusers)", c.Population)
	}
	return runAccuracy(c, p)
}

// counterLane is one counter's states under both measures.
type counterLane struct {
	shared, diverging algorithm.States
	// per key: errors under each measure
	sharedWrong, divergingWrong []uint32
	acc                         CounterAccuracy
}

func runAccuracy(c AccuracyConfig, p Pattern) (*Accuracy, error) {
	cfg := Config{Rate: c.Rate, Period: c.Period, Duration: c.Duration, Seed: c.Seed,
		Algorithms: []sluice.Algorithm{sluice.SlidingWindow}}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	p = withDefaults(p, &cfg)
	buckets := c.Buckets
	if buckets == nil {
		buckets = DefaultAccuracyBuckets
	}
	keys := p.keys(&cfg)
	if len(c.Moments) > len(buckets) {
		return nil, fmt.Errorf("sim: %d moments for %d counters", len(c.Moments), len(buckets))
	}
	// The default's layout and the baseline's come first; a layout asked
	// for twice is run once and reported at each place.
	plain := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: cfg.Rate, Period: cfg.Period}
	def := sluice.DefaultSlidingWindow(plain)
	layouts := [][2]int{{max(int(def.Buckets), 1), int(def.Moments)}, {1, 0}}
	for i, k := range buckets {
		if k < 1 || k > sluice.MaxBuckets {
			return nil, fmt.Errorf("sim: buckets %d must be from 1 to %d", k, sluice.MaxBuckets)
		}
		d := 0
		if i < len(c.Moments) {
			d = c.Moments[i]
		}
		if d < 0 || d > sluice.MaxMoments {
			return nil, fmt.Errorf("sim: moments %d must be from 0 to %d", d, sluice.MaxMoments)
		}
		layouts = append(layouts, [2]int{k, d})
	}
	var lanes []*counterLane
	laneOf := make([]int, len(layouts)) // layouts[i] is run by lanes[laneOf[i]]
	for i, kd := range layouts {
		if j := slices.Index(layouts[:i], kd); j >= 0 {
			laneOf[i] = laneOf[j]
			continue
		}
		lim := plain
		lim.Buckets, lim.Moments = uint8(kd[0]), uint8(kd[1])
		if err := lim.Validate(); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		counted := lim
		counted.CountRejected = true
		l := &counterLane{
			shared: algorithm.NewStates(counted, keys), diverging: algorithm.NewStates(lim, keys),
			sharedWrong: make([]uint32, keys), divergingWrong: make([]uint32, keys),
		}
		l.acc = CounterAccuracy{Buckets: kd[0], Moments: kd[1], Limit: lim.String(), StateBytes: l.shared.Size()}
		laneOf[i] = len(lanes)
		lanes = append(lanes, l)
	}
	// The exact sliding counts: of every arrival (the shared history) and
	// of the arrivals the exact count admitted (its own diverging one).
	all, admitted := make([]window, keys), make([]window, keys)
	requests := make([]uint32, keys)
	per, rate := int64(cfg.Period), int64(cfg.Rate)
	start, end := p.span(&cfg)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5109ce))
	var n int64
	for e := range p.events(&cfg, rng) {
		if int64(e.Cost) > rate {
			return nil, fmt.Errorf("sim: arrival %d costs %d, more than the rate %d", n+1, e.Cost, rate)
		}
		n++
		requests[e.Key]++
		cut := e.At - per
		// margin: the units of the exact count and this request over the
		// rate (≤ 0: admitted).
		sharedMargin := all[e.Key].count(cut) + int64(e.Cost) - rate
		sharedOK := sharedMargin <= 0
		all[e.Key].add(e.At, per, per, e.Cost)
		divergingMargin := admitted[e.Key].count(cut) + int64(e.Cost) - rate
		divergingOK := divergingMargin <= 0
		if divergingOK {
			admitted[e.Key].add(e.At, per, per, e.Cost)
		}
		for _, l := range lanes {
			g := per / int64(l.acc.Buckets)
			pos := int(floorMod(e.At, g) * 10 / g)
			res, heap := l.shared.Take(int(e.Key), e.At, int(e.Cost))
			l.acc.HeapBytes = max(l.acc.HeapBytes, heap)
			if judge(&l.acc.Shared, l.sharedWrong, e.Key, res.Allowed, sharedOK) {
				tally(&l.acc.Shared, pos, res.Allowed, sharedMargin, rate)
			}
			res, _ = l.diverging.Take(int(e.Key), e.At, int(e.Cost))
			if judge(&l.acc.Diverging, l.divergingWrong, e.Key, res.Allowed, divergingOK) {
				tally(&l.acc.Diverging, pos, res.Allowed, divergingMargin, rate)
			}
		}
		if c.Progress != nil && n&(1<<16-1) == 0 {
			c.Progress(float64(e.At-start) / float64(end-start))
		}
	}
	if c.Progress != nil {
		c.Progress(1)
	}
	a := &Accuracy{Pattern: p.Name(), Rate: cfg.Rate, Period: cfg.Period.String(),
		Duration: time.Duration(end - start).String(), Seed: cfg.Seed, Requests: n}
	// Each key's class by its mean load.
	periods := float64(end-start) / float64(per)
	class := make([]int8, keys)
	base := make([]LoadClass, len(classBounds))
	for i, lo := range classBounds {
		base[i].Low = lo
		if i+1 < len(classBounds) {
			base[i].High = classBounds[i+1]
		}
	}
	for k, r := range requests {
		if r == 0 {
			class[k] = -1
			continue
		}
		a.Keys++
		load := float64(r) / periods / float64(rate)
		i := len(classBounds) - 1
		for i > 0 && load < classBounds[i] {
			i--
		}
		class[k] = int8(i)
		base[i].Keys++
		base[i].Requests += int64(r)
	}
	for _, l := range lanes {
		finish(&l.acc.Shared, l.sharedWrong, class, base, n)
		finish(&l.acc.Diverging, l.divergingWrong, class, base, n)
	}
	a.Default, a.Baseline = lanes[laneOf[0]].acc, lanes[laneOf[1]].acc
	for _, i := range laneOf[2:] {
		a.Counters = append(a.Counters, lanes[i].acc)
	}
	a.Errors, a.Classes = a.Baseline.Diverging.Errors, a.Baseline.Diverging.Classes
	return a, nil
}

// name names the counter in a table's heading: "buckets 8", or "buckets 8
// moments 4".
func (c CounterAccuracy) name() string {
	if c.Moments > 0 {
		return fmt.Sprintf("buckets %d moments %d", c.Buckets, c.Moments)
	}
	return fmt.Sprintf("buckets %d", c.Buckets)
}

// line is one counter of a table: the default, the baseline or one of
// the Counters.
type line struct {
	role string // "default", "baseline" or ""
	c    CounterAccuracy
}

// heading names l in a table's heading: "default (buckets 16 moments 2)",
// "baseline (buckets 1)" or the counter's name.
func (l line) heading() string {
	if l.role == "" {
		return l.c.name()
	}
	return l.role + " (" + l.c.name() + ")"
}

// lines are the table's counters: the default, the baseline, then the
// Counters.
func (a *Accuracy) lines() []line {
	ls := []line{{"default", a.Default}, {"baseline", a.Baseline}}
	for _, c := range a.Counters {
		ls = append(ls, line{"", c})
	}
	return ls
}

// defaultLayout says which layout the default is at this limit.
func (a *Accuracy) defaultLayout() string {
	if a.Default.Moments > 0 {
		return fmt.Sprintf("%d sub-windows with %d means each", a.Default.Buckets, a.Default.Moments)
	}
	return fmt.Sprintf("the two-window counter: a rate above %d per period, or a period that %d sub-windows do not divide in whole microseconds, keeps it", sluice.MaxMomentsRate, sluice.DefaultBuckets)
}

// judge counts the counter's decision ok on a request of key against the
// exact one, want, and reports whether they differ.
func judge(m *Measure, wrong []uint32, key uint32, ok, want bool) bool {
	if !m.judge(ok, want) {
		return false
	}
	wrong[key]++
	return true
}

// tally counts a wrong decision, admitted or not, at position pos (tenths
// of its sub-window) with the exact count margin units over the rate.
func tally(m *Measure, pos int, admitted bool, margin, rate int64) {
	side, d := 0, margin // a wrong admission: the exact count was margin ≥ 1 over
	if !admitted {
		side, d = 1, 1-margin // a wrong refusal: 1−margin ≥ 1 units to spare
	}
	m.ByPosition[pos][side]++
	if m.ByMargin == nil {
		m.ByMargin = make([][2]int64, len(MarginBounds)+1)
	}
	pct := 100 * float64(d) / float64(rate)
	i, _ := slices.BinarySearch(MarginBounds, pct)
	m.ByMargin[i][side]++
}

// floorMod returns a mod b in [0, b), for b > 0.
func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// finish computes m's percentages of n requests and its errors per class.
func finish(m *Measure, wrong []uint32, class []int8, base []LoadClass, n int64) {
	m.percent(n)
	m.WrongPct = m.WronglyAdmittedPct + m.WronglyRejectedPct
	if m.ByMargin == nil {
		m.ByMargin = make([][2]int64, len(MarginBounds)+1)
	}
	m.Classes = slices.Clone(base)
	for k, w := range wrong {
		if w > 0 {
			m.Classes[class[k]].Wrong += int64(w)
		}
	}
	total := m.WronglyAdmitted + m.WronglyRejected
	for i := range m.Classes {
		cl := &m.Classes[i]
		if cl.Requests > 0 {
			cl.WrongPct = 100 * float64(cl.Wrong) / float64(cl.Requests)
		}
		if total > 0 {
			cl.ShareOfAllWrong = 100 * float64(cl.Wrong) / float64(total)
		}
	}
}

// WriteTable writes the study's result for a terminal: the error of each
// counter under both measures, then by key load.
func (a *Accuracy) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "sliding window counter vs the exact sliding count, %d per %s\npopulation: %s, %s, seed %d\nrequests: %d from %d keys\n\n",
		a.Rate, a.Period, a.Pattern, a.Duration, a.Seed, a.Requests, a.Keys)
	fmt.Fprintf(w, "shared: one history, every request counted (Cloudflare's measure)\ndiverging: each keeps its own admitted history (an early error changes later decisions)\n")
	fmt.Fprintf(w, "default: what a sliding_window rule of this limit gets when it sets neither buckets nor moments: %s\nbaseline: the two-window counter (buckets: 1)\n\n", a.defaultLayout())
	lines := a.lines()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "counter\tbuckets\tmoments\tstate bytes\tshared: wrongly admitted\twrongly rejected\twrong in all\tdiverging: wrongly admitted\twrongly rejected\twrong in all\t\n")
	for _, l := range lines {
		c, s, d := l.c, l.c.Shared, l.c.Diverging
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.4f%%\t%d\t%d\t%.4f%%\t\n", cmp.Or(l.role, "-buckets"), c.Buckets, c.Moments, c.StateBytes+c.HeapBytes,
			s.WronglyAdmitted, s.WronglyRejected, s.WrongPct, d.WronglyAdmitted, d.WronglyRejected, d.WrongPct)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range []struct {
		name string
		of   func(CounterAccuracy) Measure
	}{
		{"shared", func(c CounterAccuracy) Measure { return c.Shared }},
		{"diverging", func(c CounterAccuracy) Measure { return c.Diverging }},
	} {
		fmt.Fprintf(w, "\nwrong, %% of the class's requests, %s measure, by key load (requests per period ÷ rate)\n", m.name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := []string{"key load", "keys", "requests"}
		for _, l := range lines {
			head = append(head, l.heading())
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(head, "\t"))
		for i, cl := range a.Baseline.Shared.Classes {
			name := fmt.Sprintf("%g–%g", cl.Low, cl.High)
			if cl.High == 0 {
				name = fmt.Sprintf("≥ %g", cl.Low)
			}
			row := []string{name, fmt.Sprint(cl.Keys), fmt.Sprint(cl.Requests)}
			for _, l := range lines {
				row = append(row, fmt.Sprintf("%.4f%%", m.of(l.c).Classes[i].WrongPct))
			}
			fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nshared measure, wrongly admitted / wrongly rejected, by where in its sub-window the request fell (tenths)\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"tenth"}
	for _, l := range lines {
		head = append(head, l.heading())
	}
	fmt.Fprintf(tw, "%s\t\n", strings.Join(head, "\t"))
	for i := range 10 {
		row := []string{fmt.Sprint(i + 1)}
		for _, l := range lines {
			p := l.c.Shared.ByPosition[i]
			row = append(row, fmt.Sprintf("%d / %d", p[0], p[1]))
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nshared measure, wrongly admitted / wrongly rejected, by how far the exact count was from the other decision (%% of the rate)\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head[0] = "margin"
	fmt.Fprintf(tw, "%s\t\n", strings.Join(head, "\t"))
	lo := 0.0
	for i := range len(MarginBounds) + 1 {
		name := fmt.Sprintf("> %g%%", lo)
		if i < len(MarginBounds) {
			name = fmt.Sprintf("%g–%g%%", lo, MarginBounds[i])
			lo = MarginBounds[i]
		}
		row := []string{name}
		for _, l := range lines {
			p := l.c.Shared.ByMargin[i]
			row = append(row, fmt.Sprintf("%d / %d", p[0], p[1]))
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// Abusers is a population built as Cloudflare describes the traffic its
// rate limits see: most sources far below their limit, a few abusive ones
// far above. A Poisson stream of Load requests per second in all; a share
// Abusive of the Keys keys (keys 0 up) send AbuseShare of the requests,
// their rates log-uniform over a range of 16 to 1; the others send the
// rest, their rates exponentially distributed. Zero Keys means 1000, zero Abusive 0.001 (at least one
// key), zero AbuseShare 0.3, zero Load Keys/20 times the contract's rate.
//
// At the study's defaults (10,000,000 requests in an hour from 100,000 keys,
// 100 per minute) the 100 abusive keys send 5 times the limit on average
// (from about 1 to 15 times), the others 1.2% of it on average.
type Abusers struct {
	Keys       int
	Abusive    float64
	AbuseShare float64
	Load       float64
}

// Name implements Pattern.
func (p Abusers) Name() string {
	return fmt.Sprintf("abusers: %d keys, %.4g%% abusive sending %.4g%% of %.4g/s", p.Keys, 100*p.Abusive, 100*p.AbuseShare, p.Load)
}

func (p Abusers) withDefaults(c *Config) Abusers {
	p.Keys = positiveOr(p.Keys, 1000)
	p.Abusive = cmp.Or(p.Abusive, 0.001)
	p.AbuseShare = cmp.Or(p.AbuseShare, 0.3)
	p.Load = cmp.Or(p.Load, float64(p.Keys)/20*c.perSecond())
	return p
}

// abusive returns the number of abusive keys, at least one and fewer than
// Keys when Keys > 1.
func (p Abusers) abusive() int {
	return min(max(int(p.Abusive*float64(p.Keys)+0.5), 1), max(p.Keys-1, 1))
}

func (p Abusers) keys(c *Config) int            { return p.withDefaults(c).Keys }
func (p Abusers) span(c *Config) (int64, int64) { return genSpan(c) }
func (p Abusers) events(c *Config, rng *rand.Rand) iter.Seq[Event] {
	p = p.withDefaults(c)
	start, end := p.span(c)
	// Cumulative weights: each key's share of the load.
	na := p.abusive()
	cum := make([]float64, p.Keys)
	var sumA, sumL float64
	w := make([]float64, p.Keys)
	for k := range w {
		if k < na {
			w[k] = math.Exp((rng.Float64()*2 - 1) * math.Log(4))
			sumA += w[k]
		} else {
			w[k] = rng.ExpFloat64()
			sumL += w[k]
		}
	}
	share := p.AbuseShare
	if na == p.Keys {
		share = 1
	}
	var acc float64
	for k := range w {
		if k < na {
			acc += share * w[k] / sumA
		} else {
			acc += (1 - share) * w[k] / sumL
		}
		cum[k] = acc
	}
	return func(yield func(Event) bool) {
		poisson(rng, start, end, p.Load, nil, func(t int64) bool {
			u := rng.Float64() * acc
			k, _ := slices.BinarySearch(cum, u)
			return yield(Event{At: t, Key: uint32(min(k, p.Keys-1)), Cost: 1})
		})
	}
}
