package sim

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice"
)

// AccuracyConfig describes a Cloudflare-style accuracy study: Requests
// arrivals from Keys keys with Zipf-distributed rates (exponent S) over
// Duration, each key limited to Rate per Period, decided by the sliding
// window counter and by an exact log. Zero values mean 10,000,000
// requests, 100,000 keys, S 1.1, one hour, 100 per minute.
type AccuracyConfig struct {
	Requests int
	Keys     int
	S        float64
	Duration time.Duration
	Rate     int
	Period   time.Duration
	Seed     uint64
	// Progress is passed on to Config.Progress.
	Progress func(done float64)
}

// Accuracy is the outcome of an accuracy study. It marshals to JSON as is.
type Accuracy struct {
	// Pattern describes the population.
	Pattern string `json:"pattern"`
	// Requests and Keys are the arrivals and the keys that sent any.
	Requests int64 `json:"requests"`
	Keys     int   `json:"keys"`
	// WronglyAdmitted counts requests the sliding window admitted and the
	// log rejected; WronglyRejected the reverse; the percentages are of all
	// requests.
	WronglyAdmitted    int64   `json:"wrongly_admitted"`
	WronglyRejected    int64   `json:"wrongly_rejected"`
	WronglyAdmittedPct float64 `json:"wrongly_admitted_pct"`
	WronglyRejectedPct float64 `json:"wrongly_rejected_pct"`
	// Classes breaks the errors down by how loaded each key was: its
	// requests per period on average, as a share of the limit.
	Classes []LoadClass `json:"classes"`
	// Report is the full simulation report of both algorithms.
	Report *Report `json:"report"`
}

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

// RunAccuracy runs the study c describes.
func RunAccuracy(c AccuracyConfig) (*Accuracy, error) {
	c.Requests = positiveOr(c.Requests, 10_000_000)
	c.Keys = positiveOr(c.Keys, 100_000)
	if c.Duration <= 0 {
		c.Duration = time.Hour
	}
	cfg := Config{
		Rate: c.Rate, Period: c.Period, Burst: 1, Duration: c.Duration, Seed: c.Seed,
		Algorithms: []sluice.Algorithm{sluice.SlidingWindow, sluice.SlidingLog},
		Progress:   c.Progress,
	}
	load := float64(c.Requests) / c.Duration.Seconds()
	r, err := simulate(cfg, Zipf{Keys: c.Keys, S: c.S, Load: load})
	if err != nil {
		return nil, err
	}
	sw := r.report.Algorithms[0]
	a := &Accuracy{
		Pattern: r.report.Pattern, Requests: r.report.Requests, Keys: r.report.Keys,
		WronglyAdmitted: sw.WronglyAdmitted, WronglyRejected: sw.WronglyRejected,
		WronglyAdmittedPct: sw.WronglyAdmittedPct, WronglyRejectedPct: sw.WronglyRejectedPct,
		Report: r.report,
	}
	periods := float64(r.span) / float64(r.period)
	for i, lo := range classBounds {
		cl := LoadClass{Low: lo}
		if i+1 < len(classBounds) {
			cl.High = classBounds[i+1]
		}
		a.Classes = append(a.Classes, cl)
	}
	total := sw.WronglyAdmitted + sw.WronglyRejected
	wrong := r.lanes[0].wrong
	for k, n := range r.requests {
		if n == 0 {
			continue
		}
		load := float64(n) / periods / float64(r.report.Rate)
		i := len(classBounds) - 1
		for i > 0 && load < classBounds[i] {
			i--
		}
		cl := &a.Classes[i]
		cl.Keys++
		cl.Requests += int64(n)
		cl.Wrong += int64(wrong[k])
	}
	for i := range a.Classes {
		cl := &a.Classes[i]
		if cl.Requests > 0 {
			cl.WrongPct = 100 * float64(cl.Wrong) / float64(cl.Requests)
		}
		if total > 0 {
			cl.ShareOfAllWrong = 100 * float64(cl.Wrong) / float64(total)
		}
	}
	return a, nil
}

// WriteTable writes the study's result for a terminal.
func (a *Accuracy) WriteTable(w io.Writer) error {
	r := a.Report
	fmt.Fprintf(w, "sliding window counter vs exact sliding log, %d per %s\npopulation: %s, %s, seed %d\nrequests: %d from %d keys\n\n",
		r.Rate, r.Period, a.Pattern, r.Duration, r.Seed, a.Requests, a.Keys)
	fmt.Fprintf(w, "wrongly admitted: %d (%.4f%%)\nwrongly rejected: %d (%.4f%%)\nwrong in all:     %d (%.4f%%)\n\n",
		a.WronglyAdmitted, a.WronglyAdmittedPct, a.WronglyRejected, a.WronglyRejectedPct,
		a.WronglyAdmitted+a.WronglyRejected, a.WronglyAdmittedPct+a.WronglyRejectedPct)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "key load (requests per period ÷ rate)\tkeys\trequests\twrong\twrong %% of class\tshare of all wrong\t\n")
	for _, c := range a.Classes {
		name := fmt.Sprintf("%g–%g", c.Low, c.High)
		if c.High == 0 {
			name = fmt.Sprintf("≥ %g", c.Low)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.4f%%\t%.1f%%\t\n", name, c.Keys, c.Requests, c.Wrong, c.WrongPct, c.ShareOfAllWrong)
	}
	return tw.Flush()
}
