package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sim"
)

// simulate runs `sluice simulate [accuracy] [flags]`: it parses the flags,
// calls package sim and prints what it returns.
func simulate(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "accuracy" {
		return accuracy(args[1:], stdout, stderr)
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
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: sluice simulate [flags]\n       sluice simulate accuracy [flags]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitFlag(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice simulate: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *algs != "" {
		for name := range strings.SplitSeq(*algs, ",") {
			a, err := sluice.ParseAlgorithm(strings.TrimSpace(name))
			if err != nil {
				fmt.Fprintln(stderr, "sluice simulate:", err)
				return 2
			}
			c.Algorithms = append(c.Algorithms, a)
		}
	}
	var p sim.Pattern
	switch *pattern {
	case "steady":
		p = sim.Steady{Load: *load, Keys: *keys}
	case "bursts":
		p = sim.Bursts{Load: *load, On: *on, Off: *off}
	case "boundary":
		p = sim.Boundary{}
	case "ramp":
		p = sim.Ramp{To: *load}
	case "zipf":
		p = sim.Zipf{Keys: *keys, Load: *load}
	case "replay":
		if *file == "" {
			fmt.Fprintln(stderr, "sluice simulate: -pattern replay needs -file")
			return 2
		}
		f, err := os.Open(*file)
		if err != nil {
			fmt.Fprintln(stderr, "sluice simulate:", err)
			return 1
		}
		p, err = sim.ReadReplay(f, *file)
		f.Close()
		if err != nil {
			fmt.Fprintln(stderr, "sluice simulate:", err)
			return 1
		}
	default:
		fmt.Fprintf(stderr, "sluice simulate: unknown pattern %q (want steady, bursts, boundary, ramp, zipf or replay)\n", *pattern)
		return 2
	}
	c.Progress = progress(stdout, stderr)
	rep, err := sim.Run(c, p)
	if err != nil {
		fmt.Fprintln(stderr, "sluice simulate:", err)
		return 1
	}
	if *charts != "" {
		for name := range strings.SplitSeq(*charts, ",") {
			if err := writeChart(rep, name); err != nil {
				fmt.Fprintln(stderr, "sluice simulate:", err)
				return 1
			}
		}
	}
	return print(stdout, stderr, *asJSON, rep, rep.WriteTable)
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
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return exitFlag(err)
	}
	c.Progress = progress(stdout, stderr)
	a, err := sim.RunAccuracy(c)
	if err != nil {
		fmt.Fprintln(stderr, "sluice simulate accuracy:", err)
		return 1
	}
	return print(stdout, stderr, *asJSON, a, a.WriteTable)
}

func exitFlag(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
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

func writeChart(rep *sim.Report, name string) error {
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

// progress returns a progress callback that draws on stderr, or nil when
// stdout is not a terminal (a pipe, a file, a test's buffer).
func progress(stdout, stderr io.Writer) func(float64) {
	f, ok := stdout.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	start := time.Now()
	last := -1
	return func(done float64) {
		pct := int(done * 100)
		if pct == last || time.Since(start) < 500*time.Millisecond && done < 1 {
			return
		}
		last = pct
		const width = 30
		n := pct * width / 100
		fmt.Fprintf(stderr, "\rsimulating [%s%s] %3d%%", strings.Repeat("#", n), strings.Repeat(".", width-n), pct)
		if done >= 1 {
			fmt.Fprint(stderr, "\r\033[K")
		}
	}
}
