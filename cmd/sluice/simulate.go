package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/progress"
	"github.com/sluicehq/sluice/internal/safefile"
	"github.com/sluicehq/sluice/sim"
)

// simulateUsage and accuracyUsage are simulate's -h.
var (
	simulateUsage = usage{
		synopsis: "sluice simulate [flags]\n       sluice simulate accuracy [flags]\n       sluice simulate overload [flags]",
		about: `Simulate runs a traffic pattern through every algorithm on a simulated clock
and compares what each admits; "simulate accuracy" measures the sliding
window's error against the exact sliding log (sluice simulate accuracy -h);
"simulate overload" puts fixed and adaptive limits on requests in flight in
front of a backend past its capacity (sluice simulate overload -h).`,
		examples: []string{
			"sluice simulate -pattern boundary",
			"sluice simulate -pattern bursts -chart bursts.svg",
		},
	}
	accuracyUsage = usage{
		synopsis: "sluice simulate accuracy [flags]",
		about: `Accuracy replays a population of keys through the sliding window counter,
with each number of sub-windows in -buckets (k, or k:d for a counter that
also keeps d means per sub-window, sliding_window's moments), and the exact
sliding count. Two lines come first: "default", the layout a sliding_window
rule of -rate per -period gets when it sets neither buckets nor moments (16
sub-windows with 2 means where the rate is at most 10,000 and 16 divides the
period, else the two-window counter), and "baseline", the two-window counter
(buckets: 1). It reports how many requests each counter admits or refuses
wrongly under two measures: shared (Cloudflare's: one history, every
request counted) and diverging (each keeps its own admitted history), by
key load; and, for the shared measure, by where in its sub-window each
wrong request fell and by how far the exact count was from the other
decision. Populations: zipf (heavy-tailed rates, exponent -s) and abusers
(most keys far below their limit, a share -abusive of them sending
-abuse-share of the requests far above it).`,
		examples: []string{
			"sluice simulate accuracy -requests 1000000 -keys 10000",
			"sluice simulate accuracy -population abusers -buckets 1,4",
			"sluice simulate accuracy -buckets 1,8,8:4,16:2",
		},
	}
	overloadUsage = usage{
		synopsis: "sluice simulate overload [flags]",
		about: `Overload offers a backend of -servers workers of -service each (a FIFO queue
in front: latency grows with concurrency past its capacity, as Little's law
says) -load times its capacity, and compares a fixed limit on requests in
flight set too high, one set too low, and the adaptive limits (AIMD with a
latency objective, Gradient, Gradient2): p99 latency, goodput, refusals.`,
		examples: []string{
			"sluice simulate overload",
			"sluice simulate overload -load 3 -chart overload.png",
		},
	}
)

// simulate runs `sluice simulate [accuracy] [flags]`: it parses the flags,
// calls package sim and prints what it returns.
func simulate(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "accuracy" {
		return accuracy(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "overload" {
		return overload(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("sluice simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c sim.Config
	fs.IntVar(&c.Rate, "rate", 100, "the contract: `N` requests per period")
	fs.DurationVar(&c.Period, "period", time.Minute, "the contract's period")
	fs.IntVar(&c.Burst, "burst", 20, "the buckets' burst")
	fs.DurationVar(&c.Duration, "duration", 0, "simulated time of a generated pattern (default ten periods)")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed")
	fs.IntVar(&c.Buckets, "buckets", 120, "time buckets in the chart")
	pattern := fs.String("pattern", "steady", "arrivals: steady, bursts, boundary, ramp, zipf or replay")
	load := fs.Float64("load", 0, "offered load in requests per second (steady, bursts, zipf: in all; ramp: at the end); 0 picks a default from the contract")
	keys := fs.Int("keys", 0, "keys (steady, zipf)")
	on := fs.Duration("on", 0, "bursts: length of a burst (default period/6)")
	off := fs.Duration("off", 0, "bursts: pause between bursts (default period/2)")
	file := fs.String("file", "", "replay: the file of arrivals (timestamp,key[,cost] per line)")
	algs := fs.String("algorithms", "", "comma-separated algorithms to report (default all five)")
	fs.BoolVar(&c.Queue, "queue", false, "also run the leaky bucket as a queue (NGINX burst without nodelay), counted when requests leave it")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	charts := fs.String("chart", "", "write a chart to these comma-separated .svg and .png files")
	if code, done := parseCommandLine(fs, args, stdout, stderr, simulateUsage, 0); done {
		return code
	}
	if err := positiveFlags(fs, "rate", "period", "burst"); err != nil {
		fmt.Fprintln(stderr, "sluice simulate:", err)
		return 2
	}
	if *algs != "" {
		for name := range strings.SplitSeq(*algs, ",") {
			a, err := sluice.ParseAlgorithm(strings.TrimSpace(name))
			if err != nil {
				fmt.Fprintln(stderr, "sluice simulate:", err)
				return 2
			}
			if !slices.Contains(c.Algorithms, a) { // gcra is token_bucket: one row
				c.Algorithms = append(c.Algorithms, a)
			}
		}
	}
	if err := unusedPatternFlag(fs, *pattern); err != nil {
		fmt.Fprintln(stderr, "sluice simulate:", err)
		return 2
	}
	p, code, err := simPattern(*pattern, *load, *keys, *on, *off, *file)
	if err != nil {
		fmt.Fprintln(stderr, "sluice simulate:", err)
		return code
	}
	c.Progress = progress.OnTerminal(stderr, "simulating")
	rep, err := sim.Run(c, p)
	return printCharted(stdout, stderr, "sluice simulate:", rep, err, *charts, *asJSON)
}

// positiveFlags refuses a flag of names that is given and not positive: a
// zero would otherwise be read as "the default" (-rate 0 as 100).
func positiveFlags(fs *flag.FlagSet, names ...string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil || !slices.Contains(names, f.Name) {
			return
		}
		if v := f.Value.String(); strings.HasPrefix(v, "-") || strings.Trim(v, "0.smh") == "" {
			err = fmt.Errorf("-%s %s: must be positive", f.Name, v)
		}
	})
	return err
}

// patternFlags are the pattern flags of sluice simulate, and patternUses
// the ones each pattern reads.
var (
	patternFlags = []string{"duration", "file", "keys", "load", "off", "on"}
	patternUses  = map[string][]string{
		"steady": {"duration", "load", "keys"}, "bursts": {"duration", "load", "on", "off"}, "boundary": {"duration"},
		"ramp": {"duration", "load"}, "zipf": {"duration", "load", "keys"}, "replay": {"file"}, // a replay lasts as long as its file
	}
)

// unusedPatternFlag returns the error of the first pattern flag given on
// fs that pattern does not read (it would be ignored), or nil; an unknown
// pattern is simPattern's to refuse.
func unusedPatternFlag(fs *flag.FlagSet, pattern string) error {
	uses, ok := patternUses[pattern]
	if !ok {
		return nil
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && slices.Contains(patternFlags, f.Name) && !slices.Contains(uses, f.Name) {
			err = fmt.Errorf("-%s: -pattern %s does not use it", f.Name, pattern)
		}
	})
	return err
}

// maxReplayBytes bounds a -file of arrivals: a replay is held in memory
// whole, about its own size again in events.
const maxReplayBytes = 256 << 20

// replayReadTimeout bounds reading a -file of arrivals.
const replayReadTimeout = 30 * time.Second

// simPattern is the arrival pattern the flags name, and the exit status of
// an error: 2 for a pattern that does not exist or lacks its -file, 1 for a
// replay file that cannot be read (not a regular file, over
// maxReplayBytes, or a bad line).
func simPattern(name string, load float64, keys int, on, off time.Duration, file string) (sim.Pattern, int, error) {
	switch name {
	case "steady":
		return sim.Steady{Load: load, Keys: keys}, 0, nil
	case "bursts":
		return sim.Bursts{Load: load, On: on, Off: off}, 0, nil
	case "boundary":
		return sim.Boundary{}, 0, nil
	case "ramp":
		return sim.Ramp{To: load}, 0, nil
	case "zipf":
		return sim.Zipf{Keys: keys, Load: load}, 0, nil
	case "replay":
		if file == "" {
			return nil, 2, errors.New("-pattern replay needs -file")
		}
		ctx, cancel := context.WithTimeout(context.Background(), replayReadTimeout)
		defer cancel()
		b, err := safefile.Read(ctx, file, maxReplayBytes)
		if err != nil {
			return nil, 1, err
		}
		p, err := sim.ReadReplay(bytes.NewReader(b), file)
		if err != nil {
			return nil, 1, err
		}
		return p, 0, nil
	}
	return nil, 2, fmt.Errorf("unknown pattern %q (want steady, bursts, boundary, ramp, zipf or replay)", name)
}

// accuracy runs `sluice simulate accuracy`.
func accuracy(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice simulate accuracy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c sim.AccuracyConfig
	fs.IntVar(&c.Requests, "requests", 10_000_000, "requests in all")
	fs.IntVar(&c.Keys, "keys", 100_000, "keys")
	fs.Float64Var(&c.S, "s", 1.1, "Zipf exponent of the keys' rates (above 1; larger is more skewed)")
	fs.DurationVar(&c.Duration, "duration", time.Hour, "simulated time")
	fs.IntVar(&c.Rate, "rate", 100, "the limit: `N` requests per period per key")
	fs.DurationVar(&c.Period, "period", time.Minute, "the limit's period")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed")
	fs.StringVar(&c.Population, "population", "zipf", "the keys' rates: zipf or abusers")
	fs.Float64Var(&c.Abusive, "abusive", 0.001, "abusers: the share of keys that abuse")
	fs.Float64Var(&c.AbuseShare, "abuse-share", 0.3, "abusers: the share of requests the abusive keys send")
	buckets := fs.String("buckets", "1,2,4,8,16", "the counters, comma-separated: each k sub-windows (1 to 16), or k:d with d means per sub-window (1 to 8)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if code, done := parseCommandLine(fs, args, stdout, stderr, accuracyUsage, 0); done {
		return code
	}
	var unused string
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "s" && c.Population == "abusers",
			(f.Name == "abusive" || f.Name == "abuse-share") && c.Population != "abusers":
			unused = f.Name
		}
	})
	if unused != "" {
		fmt.Fprintf(stderr, "sluice simulate accuracy: -%s: -population %s does not use it\n", unused, c.Population)
		return 2
	}
	for _, f := range strings.Split(*buckets, ",") {
		ks, ds, hasD := strings.Cut(strings.TrimSpace(f), ":")
		k, err := strconv.Atoi(ks)
		d := 0
		if hasD && err == nil {
			d, err = strconv.Atoi(ds)
			if d < 1 || d > sluice.MaxMoments {
				err = strconv.ErrRange
			}
		}
		if err != nil || k < 1 || k > sluice.MaxBuckets || len(c.Buckets) >= sluice.MaxBuckets {
			fmt.Fprintf(stderr, "sluice simulate accuracy: -buckets %q: want at most %d counters, each k from 1 to %d or k:d with d from 1 to %d\n", *buckets, sluice.MaxBuckets, sluice.MaxBuckets, sluice.MaxMoments)
			return 2
		}
		c.Buckets = append(c.Buckets, k)
		c.Moments = append(c.Moments, d)
	}
	if err := positiveFlags(fs, "rate", "period"); err != nil {
		fmt.Fprintln(stderr, "sluice simulate accuracy:", err)
		return 2
	}
	c.Progress = progress.OnTerminal(stderr, "simulating")
	a, err := sim.RunAccuracy(c)
	if err != nil {
		fmt.Fprintln(stderr, "sluice simulate accuracy:", err)
		return 1
	}
	return print(stdout, stderr, *asJSON, a, a.WriteTable)
}

// overload runs `sluice simulate overload`.
func overload(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice simulate overload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c sim.OverloadConfig
	fs.IntVar(&c.Servers, "servers", 50, "the backend's workers")
	fs.DurationVar(&c.Service, "service", 10*time.Millisecond, "the time a worker takes per request (the unloaded latency)")
	fs.Float64Var(&c.Load, "load", 1.5, "offered load, a multiple of the capacity (servers/service)")
	fs.DurationVar(&c.Duration, "duration", time.Minute, "simulated time")
	fs.DurationVar(&c.Warmup, "warmup", 20*time.Second, "the start left out of the figures")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed")
	high := fs.Int("fixed-high", 0, "the fixed limit set too high (default ten times -servers)")
	low := fs.Int("fixed-low", 0, "the fixed limit set too low (default 40% of -servers)")
	objective := fs.Duration("objective", 0, "AIMD's latency objective (default 1.5 × -service)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	charts := fs.String("chart", "", "write a chart to these comma-separated .svg and .png files")
	if code, done := parseCommandLine(fs, args, stdout, stderr, overloadUsage, 0); done {
		return code
	}
	if c.Servers > 0 && c.Service > 0 {
		c.Limits = sim.DefaultOverloadLimits(c.Servers, c.Service)
		if *high > 0 {
			c.Limits[0] = sim.OverloadLimit{Name: fmt.Sprintf("fixed %d", *high), Fixed: *high}
		}
		if *low > 0 {
			c.Limits[1] = sim.OverloadLimit{Name: fmt.Sprintf("fixed %d", *low), Fixed: *low}
		}
		if *objective > 0 {
			c.Limits[2].Adaptive = adaptive.AIMD{Timeout: *objective}
		}
	}
	rep, err := sim.RunOverload(c)
	return printCharted(stdout, stderr, "sluice simulate overload:", rep, err, *charts, *asJSON)
}

// print writes v as JSON or as a table.
func print(stdout, stderr io.Writer, asJSON bool, v any, table func(io.Writer) error) int {
	var err error
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(v)
	} else {
		err = table(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "sluice simulate:", err)
		return 1
	}
	return 0
}

// chartWriter is a report that draws its chart: sim.Report and
// sim.OverloadReport.
type chartWriter interface {
	WriteChart(w io.Writer, format string) error
}

// chartedReport is a report that draws its chart and prints its table:
// sim.Report and sim.OverloadReport.
type chartedReport interface {
	chartWriter
	WriteTable(w io.Writer) error
}

// printCharted ends a simulation that draws charts: err (the run's), else
// an error writing the charts (-chart), is printed after prefix (exit 1);
// otherwise rep is printed as print does.
func printCharted(stdout, stderr io.Writer, prefix string, rep chartedReport, err error, charts string, asJSON bool) int {
	if err == nil {
		err = writeCharts(rep, charts, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, prefix, err)
		return 1
	}
	return print(stdout, stderr, asJSON, rep, rep.WriteTable)
}

// writeCharts writes rep's chart to each file of the comma-separated list
// (-chart), in the format its extension names, and says on stderr where
// each went; an empty item is skipped.
func writeCharts(rep chartWriter, list string, stderr io.Writer) error {
	for name := range strings.SplitSeq(list, ",") {
		if name == "" {
			continue
		}
		if err := writeChart(rep, name); err != nil {
			return err
		}
		where, err := filepath.Abs(name)
		if err != nil {
			where = name
		}
		fmt.Fprintln(stderr, "chart written to", where)
	}
	return nil
}

// writeChart writes rep's chart to the file name, in the format its
// extension names.
func writeChart(rep chartWriter, name string) error {
	format, err := sim.FormatOf(name)
	if err != nil {
		return err
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := rep.WriteChart(f, format); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
