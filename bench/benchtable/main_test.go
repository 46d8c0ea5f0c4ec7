package main

import (
	"strings"
	"testing"
)

// sample is go test's output for three runs of two rows (one of which
// also failed once), a skipped row and a failed one, with the lines go test
// prints around them.
const sample = `goos: linux
cpu: AMD EPYC
BenchmarkX/case/a-2         	   20000	      1000 ns/op	  12000 ops/s	       0 allocs/op
BenchmarkX/case/b-2         	   20000	      3000 ns/op	   4000 ops/s	       2 allocs/op
--- SKIP: BenchmarkX/case/c-2
    x_test.go:12: not measured: redis-server not found in PATH
BenchmarkX/case/a-2         	   20000	      1200 ns/op	  11000 ops/s	       0 allocs/op
BenchmarkX/case/b-2         	   20000	      2000 ns/op	   4500 ops/s	       2 allocs/op
--- FAIL: BenchmarkX/case/d
    x_test.go:40: server counted 3 calls for 4 decisions
    x_test.go:41: more
BenchmarkX/case/a-2         	   20000	      1100 ns/op	  13000 ops/s	       0 allocs/op
BenchmarkX/case/b-2         	   20000	      2500 ns/op	   5000 ops/s	       2 allocs/op
--- FAIL: BenchmarkX/case/b-2
    x_test.go:40: redis-server counted 0 calls for 1 decisions
BenchmarkY/case/a-2         	   20000	         1 ns/op
PASS
`

func render(t *testing.T, tb table) []string {
	t.Helper()
	if err := tb.read(strings.NewReader(sample)); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := tb.write(&out); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
}

func TestCellsAreMediansWithTheirRange(t *testing.T) {
	lines := render(t, table{prefix: "BenchmarkX/case/", cols: []string{"ns/op", "ops/s", "allocs/op"}, first: "target"})
	want := []string{
		"| target | runs | ns/op | ops/s | allocs/op |",
		"|---|---:|---:|---:|---:|",
		"| a | 3 | 1100 (1000–1200) | 12.0k (11.0k–13.0k) | 0.00 |",
		"| b | 3 (+1 without figures) | 2500 (2000–3000) | 4500 (4000–5000) | 2.00 |",
		"| c | 0 | skipped: not measured: redis-server not found in PATH | | |",
		"| d | 0 | failed: server counted 3 calls for 4 decisions | | |",
		"",
		"- b: 1 run(s) failed: redis-server counted 0 calls for 1 decisions",
	}
	if got := strings.Join(lines, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

func TestRefColumnDividesTheFirstMetricByTheRefRowsRunByRun(t *testing.T) {
	lines := render(t, table{prefix: "BenchmarkX/case/", cols: []string{"ns/op"}, ref: "a", first: "row"})
	if lines[0] != "| row | runs | ns/op | ÷ a |" {
		t.Errorf("heading %q", lines[0])
	}
	// b over a run by run: 3000/1000, 2000/1200, 2500/1100.
	if want := "| b | 3 (+1 without figures) | 2500 (2000–3000) | 2.27 (1.67–3.00) |"; lines[3] != want {
		t.Errorf("row b: got %q, want %q", lines[3], want)
	}
}

func TestRefRatioOfRowsWithDifferentRunCountsIsOfMedians(t *testing.T) {
	if got, want := refRatio([]float64{2, 4}, []float64{1, 2, 3}), "1.50 (of medians)"; got != want {
		t.Errorf("refRatio = %q, want %q", got, want)
	}
}

func TestOnlyThePrefixsBenchmarksAreRows(t *testing.T) {
	lines := render(t, table{prefix: "BenchmarkY/", cols: []string{"ns/op"}, first: "row"})
	if len(lines) != 3 || lines[2] != "| case/a | 1 | 1.00 |" {
		t.Errorf("got %q", lines)
	}
}

func TestMedianOfAnEvenCountIsTheMeanOfTheMiddleTwo(t *testing.T) {
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median = %v, want 2.5", got)
	}
}
