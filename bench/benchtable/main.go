// Command benchtable turns the output of `go test -bench` into one markdown
// table: a row per benchmark under a name prefix (in the order they first
// ran), a column per metric, each cell the median of the runs with their
// range. bench-all.sh writes every table of BENCHMARKS.md's generated
// section with it.
//
//	benchtable -prefix 'BenchmarkLimiters/hotkey/' -cols 'ns/op,allocs/op' \
//	  -ref sluice-tokenbucket <bench.txt
//
// A benchmark that was skipped or failed gets a row that says so, with the
// first line of its message (a row "not measured: redis-server not found"
// rather than no row). With -ref, a last column divides each row's first
// metric by the ref row's, run by run (the i-th run of each: the same round
// when each round is one go test process), median and range.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	prefix := flag.String("prefix", "Benchmark", "the benchmarks of the table: names starting with this; the rest of the name is the row's")
	cols := flag.String("cols", "ns/op", "comma-separated metrics (units as go test prints them: ns/op, allocs/op, ops/s, …)")
	labels := flag.String("labels", "", "comma-separated column headings, one per metric (default: the units)")
	ref := flag.String("ref", "", "a row: add a column with each row's first metric divided by this row's, run by run")
	first := flag.String("first", "row", "heading of the first column")
	flag.Parse()
	t := table{prefix: *prefix, cols: strings.Split(*cols, ","), ref: *ref, first: *first}
	if *labels != "" {
		t.labels = strings.Split(*labels, ",")
		if len(t.labels) != len(t.cols) {
			fmt.Fprintln(os.Stderr, "benchtable: -labels needs one heading per metric of -cols")
			os.Exit(2)
		}
	}
	if err := t.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	if err := t.write(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

// table gathers the runs of the benchmarks under prefix.
type table struct {
	prefix, ref, first string
	cols, labels       []string
	order              []string                        // rows, in the order they first appeared
	runs               map[string]map[string][]float64 // row → unit → one value per run
	notes              map[string]string               // row → why a run has no figures (skipped, failed): the first message
	unfinished         map[string]int                  // row → runs skipped or failed
}

// procsSuffix is the -GOMAXPROCS suffix go test adds to a benchmark's name.
var procsSuffix = regexp.MustCompile(`-\d+$`)

// statusLine is go test's line for a benchmark that was skipped or failed;
// the next line holds its message ("    file_test.go:12: message").
var statusLine = regexp.MustCompile(`^\s*--- (SKIP|FAIL): (\S+)`)

// messageLine is the message under a statusLine.
var messageLine = regexp.MustCompile(`^\s+\S+\.go:\d+: (.*)$`)

// read reads go test's output: result lines, and skipped or failed
// benchmarks with the message after them.
func (t *table) read(r io.Reader) error {
	t.runs = map[string]map[string][]float64{}
	t.notes = map[string]string{}
	t.unfinished = map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	pending := "" // the row of the last status line, waiting for its message
	for sc.Scan() {
		line := sc.Text()
		if pending != "" {
			if m := messageLine.FindStringSubmatch(line); m != nil && !strings.Contains(t.notes[pending], ": ") {
				t.notes[pending] += ": " + m[1]
			}
			pending = ""
		}
		if m := statusLine.FindStringSubmatch(line); m != nil {
			if row, ok := t.row(m[2]); ok {
				t.add(row)
				t.unfinished[row]++
				if _, seen := t.notes[row]; !seen {
					t.notes[row] = map[string]string{"SKIP": "skipped", "FAIL": "failed"}[m[1]]
				}
				pending = row
			}
			continue
		}
		t.result(line)
	}
	return sc.Err()
}

// result records the metrics of one result line:
// "BenchmarkX/y-2  20000  1234 ns/op  5.0 p99-µs".
func (t *table) result(line string) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
		return
	}
	row, ok := t.row(f[0])
	if !ok {
		return
	}
	if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
		return
	}
	t.add(row)
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			continue
		}
		if t.runs[row] == nil {
			t.runs[row] = map[string][]float64{}
		}
		t.runs[row][f[i+1]] = append(t.runs[row][f[i+1]], v)
	}
}

// row returns the row of a benchmark's full name, and whether it is one of
// the table's.
func (t *table) row(name string) (string, bool) {
	rest, ok := strings.CutPrefix(procsSuffix.ReplaceAllString(name, ""), t.prefix)
	return rest, ok && rest != ""
}

// add appends row to the order when it is new.
func (t *table) add(row string) {
	if !slices.Contains(t.order, row) {
		t.order = append(t.order, row)
	}
}

// write prints the table in markdown.
func (t *table) write(w io.Writer) error {
	heads := t.labels
	if heads == nil {
		heads = t.cols
	}
	head := "| " + t.first + " | runs | " + strings.Join(heads, " | ") + " |"
	rule := "|---|---:|" + strings.Repeat("---:|", len(t.cols))
	if t.ref != "" {
		head += " ÷ " + t.ref + " |"
		rule += "---:|"
	}
	lines := []string{head, rule}
	if len(t.order) == 0 {
		lines = append(lines, "| (no result: see the log) |")
	}
	var notes []string // of the rows with figures and a run without
	for _, row := range t.order {
		lines = append(lines, t.line(row))
		if t.runs[row] != nil && t.unfinished[row] > 0 {
			notes = append(notes, fmt.Sprintf("- %s: %d run(s) %s", row, t.unfinished[row], t.notes[row]))
		}
	}
	if notes != nil {
		lines = append(append(lines, ""), notes...)
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// line is one row of the table.
func (t *table) line(row string) string {
	runs := t.runs[row]
	if runs == nil {
		empty := len(t.cols) - 1 // cells after the note's
		if t.ref != "" {
			empty++
		}
		return "| " + row + " | 0 | " + strings.TrimSpace(t.notes[row]) + " |" + strings.Repeat(" |", empty)
	}
	n := strconv.Itoa(maxRuns(runs))
	if u := t.unfinished[row]; u > 0 {
		n += fmt.Sprintf(" (+%d without figures)", u)
	}
	cells := []string{row, n}
	for _, c := range t.cols {
		cells = append(cells, cell(runs[c]))
	}
	if t.ref != "" {
		cells = append(cells, refRatio(runs[t.cols[0]], t.runs[t.ref][t.cols[0]]))
	}
	return "| " + strings.Join(cells, " | ") + " |"
}

// refRatio is the cell of the -ref column: vs over ref run by run (the
// i-th run of each, made in the same round) as a median with its range,
// when both have as many runs; else the ratio of their medians.
func refRatio(vs, ref []float64) string {
	if len(vs) == 0 || len(ref) == 0 {
		return "–"
	}
	if len(vs) != len(ref) {
		if m := median(ref); m > 0 {
			return strconv.FormatFloat(median(vs)/m, 'f', 2, 64) + " (of medians)"
		}
		return "–"
	}
	ratios := make([]float64, len(vs))
	for i := range vs {
		if ref[i] <= 0 {
			return "–"
		}
		ratios[i] = vs[i] / ref[i]
	}
	s := slices.Sorted(slices.Values(ratios))
	r := strconv.FormatFloat(median(s), 'f', 2, 64)
	if lo, hi := strconv.FormatFloat(s[0], 'f', 2, 64), strconv.FormatFloat(s[len(s)-1], 'f', 2, 64); lo != hi {
		r += " (" + lo + "–" + hi + ")"
	}
	return r
}

// maxRuns is the number of runs of a row: the most values of any metric.
func maxRuns(runs map[string][]float64) int {
	n := 0
	for _, vs := range runs {
		n = max(n, len(vs))
	}
	return n
}

// cell is the median of vs, with the range of vs when the runs differ.
func cell(vs []float64) string {
	if len(vs) == 0 {
		return "–"
	}
	s := slices.Sorted(slices.Values(vs))
	m := num(median(s))
	if lo, hi := num(s[0]), num(s[len(s)-1]); lo != hi {
		m += " (" + lo + "–" + hi + ")"
	}
	return m
}

// median returns the median of vs (the mean of the middle two for an even
// count), 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// num prints v with three significant figures or more: 12.3k, 456, 45.6,
// 4.56, 0.456, 0.
func num(v float64) string {
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 10000:
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + "k"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1 || a == 0:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
