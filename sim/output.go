package sim

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes r as a table, one row per algorithm, for a terminal.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "pattern: %s\ncontract: %d per %s, burst %d; %s simulated from %s; seed %d\nrequests: %d from %d key(s)\n\n",
		r.Pattern, r.Rate, r.Period, r.Burst, r.Duration, r.Start.Format("2006-01-02T15:04:05Z07:00"), r.Seed, r.Requests, r.Keys)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "algorithm\tadmitted\trejected\tmax/%s\tmax/1s\twrongly admitted\twrongly rejected\tbytes/key\t\n", r.Period)
	for _, a := range r.Algorithms {
		mem := fmt.Sprintf("%.0f", a.BytesPerKey)
		if float64(a.MaxBytesPerKey) != a.BytesPerKey {
			mem = fmt.Sprintf("%.0f (max %d)", a.BytesPerKey, a.MaxBytesPerKey)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d (%.3f%%)\t%d (%.3f%%)\t%s\t\n",
			a.Algorithm, a.Admitted, a.Rejected, a.MaxInPeriod, a.MaxInSecond,
			a.WronglyAdmitted, a.WronglyAdmittedPct, a.WronglyRejected, a.WronglyRejectedPct, mem)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nmax/%s and max/1s: most units admitted to one key in any rolling window of that length.\n"+
		"wrongly admitted/rejected: decisions that differ from the exact sliding log on the same arrivals.\n"+
		"bytes/key: unsafe.Sizeof of the state, plus the heap of the sliding log's entries (mean of each key's peak).\n", r.Period)
	return err
}
