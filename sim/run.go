package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// Config is the contract every algorithm enforces in a simulation, and how
// the simulation runs.
type Config struct {
	// Rate per Period is the nominal limit of every algorithm; Burst is the
	// bucket size of the token and leaky buckets (the windows ignore it).
	// Zero values mean 100 per minute with a burst of 20.
	Rate   int
	Period time.Duration
	Burst  int
	// Duration is the simulated time of a generated pattern; a replay lasts
	// as long as its file. Zero means ten periods.
	Duration time.Duration
	// Seed seeds the random numbers (PCG): the same seed, the same run.
	Seed uint64
	// Algorithms are the algorithms to report, in order; nil means all five.
	// The sliding log always runs, as the reference.
	Algorithms []sluice.Algorithm
	// Queue adds the leaky bucket as a queue (NGINX limit_req with burst and
	// no nodelay; package queue) after the algorithms, reported as
	// "leaky_queue": it admits exactly what the leaky meter admits, but each
	// admitted request leaves when the queue ahead of it has drained, and is
	// counted then, so its timeline and maxima show the smoothed output.
	Queue bool
	// Buckets is the number of time buckets of the timeline that charts
	// draw. Zero means 120.
	Buckets int
	// Progress, when not nil, is called now and then with the share of the
	// simulated time done, from 0 to 1. It is called from Run's goroutine.
	Progress func(done float64)
}

func (c *Config) defaults() error {
	c.Rate = cmp.Or(c.Rate, 100)
	c.Period = cmp.Or(c.Period, time.Minute)
	c.Burst = cmp.Or(c.Burst, 20)
	c.Duration = cmp.Or(c.Duration, 10*c.Period)
	c.Buckets = positiveOr(c.Buckets, 120)
	if c.Algorithms == nil {
		c.Algorithms = sluice.Algorithms()
	}
	if c.Duration < 0 || c.Duration > sluice.MaxPeriod {
		return fmt.Errorf("sim: duration %v must be positive and at most %v", c.Duration, sluice.MaxPeriod)
	}
	for _, a := range c.Algorithms {
		if err := c.limit(a).Validate(); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
	}
	return c.limit(sluice.SlidingLog).Validate()
}

// limit returns the contract as a Limit of algorithm a.
func (c *Config) limit(a sluice.Algorithm) sluice.Limit {
	return sluice.Limit{Algorithm: a, Rate: c.Rate, Period: c.Period, Burst: c.Burst}
}

// Report is the outcome of a simulation. It marshals to JSON as is.
type Report struct {
	// Pattern describes the arrivals, with every default filled in.
	Pattern string `json:"pattern"`
	// Rate, Period and Burst are the contract.
	Rate   int    `json:"rate"`
	Period string `json:"period"`
	Burst  int    `json:"burst"`
	Seed   uint64 `json:"seed"`
	// Start is the first simulated instant; Duration the simulated time.
	Start    time.Time `json:"start"`
	Duration string    `json:"duration"`
	// Requests is the number of arrivals; Keys the number of keys seen.
	Requests int64 `json:"requests"`
	Keys     int   `json:"keys"`
	// Bucket is the width of one timeline bucket.
	Bucket string `json:"bucket"`
	// Algorithms holds one entry per algorithm, in Config.Algorithms order.
	Algorithms []AlgorithmReport `json:"algorithms"`
}

// Errors counts the requests an algorithm decided otherwise than an exact
// reference on the same arrivals: WronglyAdmitted those it admitted and
// the reference refused, WronglyRejected the reverse, and each as a
// percentage of all requests. Embedded, its fields are its holder's in
// JSON. The zero value counts none.
type Errors struct {
	WronglyAdmitted    int64   `json:"wrongly_admitted"`
	WronglyRejected    int64   `json:"wrongly_rejected"`
	WronglyAdmittedPct float64 `json:"wrongly_admitted_pct"`
	WronglyRejectedPct float64 `json:"wrongly_rejected_pct"`
}

// judge counts the decision ok against the reference's, want, and
// reports whether they differ.
func (e *Errors) judge(ok, want bool) bool {
	switch {
	case ok == want:
		return false
	case ok:
		e.WronglyAdmitted++
	default:
		e.WronglyRejected++
	}
	return true
}

// percent sets the percentages, of n requests; none when n is 0.
func (e *Errors) percent(n int64) {
	if n > 0 {
		e.WronglyAdmittedPct = 100 * float64(e.WronglyAdmitted) / float64(n)
		e.WronglyRejectedPct = 100 * float64(e.WronglyRejected) / float64(n)
	}
}

// AlgorithmReport is what one algorithm did in a simulation.
type AlgorithmReport struct {
	// Algorithm is the algorithm's name, such as "token_bucket".
	Algorithm string `json:"algorithm"`
	// Limit is the algorithm's Limit, as sluice.Limit.String writes it.
	Limit string `json:"limit"`
	// Admitted and Rejected count requests (not cost units).
	Admitted int64 `json:"admitted"`
	Rejected int64 `json:"rejected"`
	// MaxInPeriod is the most units admitted to one key in any rolling
	// window (t−Period, t]; MaxInSecond the most in any span (t−1s, t].
	MaxInPeriod int64 `json:"max_in_period"`
	MaxInSecond int64 `json:"max_in_second"`
	// Errors are this algorithm's against the sliding log run on the
	// same arrivals.
	Errors
	// BytesPerKey is the size of one key's state: unsafe.Sizeof of the
	// algorithm's state type, plus, for the sliding log, the heap its ring
	// of entries holds (SlidingLog.Bytes). For the log it is the mean over
	// the keys seen of the most bytes each held at once, and MaxBytesPerKey
	// the largest; for the others both are the state's fixed size.
	BytesPerKey    float64 `json:"bytes_per_key"`
	MaxBytesPerKey int64   `json:"max_bytes_per_key"`
	// AdmittedOverTime and RejectedOverTime count requests per timeline
	// bucket (Report.Bucket wide), from Report.Start.
	AdmittedOverTime []int64 `json:"admitted_over_time"`
	RejectedOverTime []int64 `json:"rejected_over_time"`
}

// window keeps the instants of the units admitted to one key in the last
// span, oldest first, in a ring that grows as needed.
type window struct {
	buf  []int64
	head int
	n    int
}

func (w *window) at(i int) int64 { return w.buf[(w.head+i)&(len(w.buf)-1)] }

// add records cost units at now, forgets those at or before now−span, and
// returns how many units lie in (now−p, now] and in (now−1s, now].
func (w *window) add(now, span, p int64, cost int32) (inP, inSec int64) {
	for w.n > 0 && w.buf[w.head] <= now-span {
		w.head = (w.head + 1) & (len(w.buf) - 1)
		w.n--
	}
	if need := w.n + int(cost); need > len(w.buf) {
		size := max(len(w.buf), 8)
		for size < need {
			size *= 2
		}
		buf := make([]int64, size)
		for i := range w.n {
			buf[i] = w.at(i)
		}
		w.buf, w.head = buf, 0
	}
	for range cost {
		w.buf[(w.head+w.n)&(len(w.buf)-1)] = now
		w.n++
	}
	return w.count(now - p), w.count(now - int64(time.Second))
}

// count returns the number of units after cut.
func (w *window) count(cut int64) int64 {
	if w.n == 0 || w.at(0) > cut {
		return int64(w.n)
	}
	return int64(w.n - sort.Search(w.n, func(i int) bool { return w.at(i) > cut }))
}

// lane is one algorithm's states and tallies.
type lane struct {
	alg    sluice.Algorithm
	lim    sluice.Limit
	states algorithm.States // one per key, under lim
	win    []window
	peak   []int32  // per key: the most heap bytes its state held (a sliding log's entries)
	exact  bool     // the reference: an exact log, decided on win
	wrong  []uint32 // per key: disagreements with the log
	queue  bool     // leaky bucket as a queue: count admissions when they leave
	rep    AlgorithmReport
}

// newQueueLane returns the leaky bucket as a queue.
func newQueueLane(c *Config, keys, buckets int) *lane {
	l := newLane(sluice.LeakyBucket, c, keys, buckets)
	l.queue = true
	l.rep.Algorithm = "leaky_queue"
	l.rep.Limit += " (queue: delays instead of rejecting, up to burst−1 waiting)"
	return l
}

func newLane(a sluice.Algorithm, c *Config, keys, buckets int) *lane {
	l := &lane{alg: a, lim: c.limit(a), win: make([]window, keys), wrong: make([]uint32, keys)}
	l.states = algorithm.NewStates(l.lim, keys) // valid: Config.defaults validated c.limit(a)
	l.peak = make([]int32, keys)
	l.rep = AlgorithmReport{
		Algorithm:        a.String(),
		Limit:            l.lim.String(),
		AdmittedOverTime: make([]int64, buckets),
		RejectedOverTime: make([]int64, buckets),
	}
	return l
}

// departure returns when a request admitted at `at` leaves the queue:
// NGINX's delay, excess·1000/rate milliseconds, with delay=0 (every request
// beyond the first waits its turn).
func (l *lane) departure(key uint32, at int64) int64 {
	x := l.states.At(int(key)).(*algorithm.LeakyBucket).Excess
	if x <= 0 {
		return at
	}
	_, milli := l.states.Limit() // the leaky bucket's milli-rate
	return at + x*1000/milli*int64(time.Millisecond)
}

// take decides e under this lane's algorithm.
func (l *lane) take(e Event) bool {
	if l.exact {
		return l.win[e.Key].count(e.At-int64(l.lim.Period))+int64(e.Cost) <= int64(l.lim.Rate)
	}
	res, bytes := l.states.Take(int(e.Key), e.At, int(e.Cost))
	l.peak[e.Key] = max(l.peak[e.Key], int32(bytes))
	return res.Allowed
}

// run is a finished simulation with its per-key tallies.
type run struct {
	report   *Report
	lanes    []*lane // in Config.Algorithms order
	requests []uint32
	span     time.Duration
	period   time.Duration // Config.Period, defaults applied
}

// Run plays p's arrivals through every algorithm of c and reports what each
// did. It fails on an invalid contract or an arrival whose cost exceeds an
// algorithm's capacity.
func Run(c Config, p Pattern) (*Report, error) {
	r, err := simulate(c, p)
	if err != nil {
		return nil, err
	}
	return r.report, nil
}

// simulate is Run's work in three steps: the lanes, one per algorithm
// and the reference log (lanesFor); every arrival through every lane
// (play); the report (report).
func simulate(c Config, p Pattern) (*run, error) {
	if p == nil {
		return nil, errors.New("sim: no pattern")
	}
	if err := c.defaults(); err != nil {
		return nil, err
	}
	p = withDefaults(p, &c)
	keys := p.keys(&c)
	start, end := p.span(&c)
	span := end - start
	bucket := max((span+int64(c.Buckets)-1)/int64(c.Buckets), 1)
	nb := int((span + bucket - 1) / bucket)
	lanes, all, capacity := lanesFor(&c, keys, nb)
	g := &game{c: &c, all: all, capacity: capacity, start: start, span: span, bucket: bucket, nb: nb,
		winSpan: max(int64(c.Period), int64(time.Second)), per: int64(c.Period), requests: make([]uint32, keys)}
	if err := g.play(p); err != nil {
		return nil, err
	}
	rep := g.report(p, lanes)
	return &run{report: rep, lanes: lanes, requests: g.requests, span: time.Duration(span), period: c.Period}, nil
}

// lanesFor returns the lanes of c's algorithms (and its queue), the same
// lanes with the reference first (all: the reference decides first), and
// the largest cost every lane can admit at once.
func lanesFor(c *Config, keys, nb int) (lanes, all []*lane, capacity int64) {
	capacity = int64(math.MaxInt32) // an Event's cost is an int32
	for _, a := range c.Algorithms {
		l := newLane(a, c, keys, nb)
		lanes = append(lanes, l)
		capacity = min(capacity, int64(l.lim.Capacity()))
	}
	if c.Queue {
		q := newQueueLane(c, keys, nb)
		lanes = append(lanes, q)
		capacity = min(capacity, int64(q.lim.Capacity()))
	}
	// The reference is an exact log, one instant per admitted unit, kept in
	// its window tally (which holds at least a period): the sliding log
	// merges units above LogEntries per period, so it is not exact.
	ref := newLane(sluice.SlidingLog, c, keys, nb)
	ref.exact = true
	all = append([]*lane{ref}, lanes...)
	return lanes, all, min(capacity, int64(c.Rate))
}

// game is one run's arrivals played through its lanes.
type game struct {
	c                   *Config
	all                 []*lane // the reference first
	capacity            int64
	start, span, bucket int64
	nb                  int
	winSpan, per        int64
	requests            []uint32 // per key
	n                   int64    // arrivals played
}

// play sends every arrival of p through every lane, counting what each
// admits and where it disagrees with the reference.
func (g *game) play(p Pattern) error {
	rng := rand.New(rand.NewPCG(g.c.Seed, 0x5109ce))
	for e := range p.events(g.c, rng) {
		if int64(e.Cost) > g.capacity {
			return fmt.Errorf("sim: arrival %d costs %d, more than every algorithm can admit at once (%d)", g.n+1, e.Cost, g.capacity)
		}
		g.n++
		g.requests[e.Key]++
		b := min(int((e.At-g.start)/g.bucket), g.nb-1)
		var refOK bool
		for i, l := range g.all {
			ok := l.take(e)
			if i == 0 {
				refOK = ok
			}
			g.count(l, e, b, ok, refOK)
		}
		if g.c.Progress != nil && g.n&(1<<16-1) == 0 {
			g.c.Progress(float64(e.At-g.start) / float64(g.span))
		}
	}
	if g.c.Progress != nil {
		g.c.Progress(1)
	}
	return nil
}

// count records lane l's decision ok on arrival e (in bucket b), against
// the reference's refOK.
func (g *game) count(l *lane, e Event, b int, ok, refOK bool) {
	if ok {
		l.rep.Admitted++
		at, ab := e.At, b
		if l.queue {
			at = l.departure(e.Key, e.At)
			ab = min(int((at-g.start)/g.bucket), g.nb-1)
		}
		l.rep.AdmittedOverTime[ab]++
		inP, inSec := l.win[e.Key].add(at, g.winSpan, g.per, e.Cost)
		l.rep.MaxInPeriod = max(l.rep.MaxInPeriod, inP)
		l.rep.MaxInSecond = max(l.rep.MaxInSecond, inSec)
	} else {
		l.rep.Rejected++
		l.rep.RejectedOverTime[b]++
	}
	if l.rep.judge(ok, refOK) {
		l.wrong[e.Key]++
	}
}

// report is the run's Report: the contract, the arrivals, and each lane's
// counts and bytes per key.
func (g *game) report(p Pattern, lanes []*lane) *Report {
	c := g.c
	rep := &Report{
		Pattern:  p.Name(),
		Rate:     c.Rate,
		Period:   c.Period.String(),
		Burst:    c.Burst,
		Seed:     c.Seed,
		Start:    time.Unix(0, g.start).UTC(),
		Duration: time.Duration(g.span).String(),
		Requests: g.n,
		Bucket:   time.Duration(g.bucket).String(),
	}
	for _, v := range g.requests {
		if v > 0 {
			rep.Keys++
		}
	}
	for _, l := range lanes {
		l.rep.percent(g.n)
		size := int64(l.states.Size())
		l.rep.BytesPerKey, l.rep.MaxBytesPerKey = float64(size), size
		var sum, most int64
		for k, pk := range l.peak {
			if g.requests[k] > 0 {
				sum += int64(pk)
				most = max(most, int64(pk))
			}
		}
		if sum > 0 { // a state that holds heap: a sliding log
			l.rep.BytesPerKey = float64(size) + float64(sum)/float64(rep.Keys)
		}
		l.rep.MaxBytesPerKey = size + most
		rep.Algorithms = append(rep.Algorithms, l.rep)
	}
	return rep
}
