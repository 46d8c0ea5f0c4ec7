package sim

import (
	"bytes"
	"encoding/xml"
	"flag"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// svgTexts returns the text of every <text> element of an SVG, in order,
// failing the test if the SVG is not well-formed XML.
func svgTexts(t *testing.T, svg []byte) []string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	var texts []string
	in := false
	for {
		tok, err := d.Token()
		if err != nil {
			if err == io.EOF {
				return texts
			}
			t.Fatalf("SVG does not parse as XML: %v", err)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			in = x.Name.Local == "text"
			if in {
				texts = append(texts, "")
			}
		case xml.CharData:
			if in {
				texts[len(texts)-1] += string(x)
			}
		case xml.EndElement:
			in = false
		}
	}
}

// TestChartGolden guards the chart's layout. The SVG's bytes depend on the
// plotting library's rendering details, so the golden file holds a
// structural summary instead: every text the chart shows, in drawing order
// (the title, one panel title per algorithm, the axis labels and ticks,
// the legend). Run with -update to rewrite it after a deliberate change.
func TestChartGolden(t *testing.T) {
	r, err := Run(Config{Seed: 1, Duration: 5 * time.Minute, Buckets: 30}, Boundary{})
	if err != nil {
		t.Fatal(err)
	}
	var svg bytes.Buffer
	if err := r.WriteChart(&svg, SVG); err != nil {
		t.Fatal(err)
	}
	texts := svgTexts(t, svg.Bytes())
	panels := 0
	for _, s := range texts {
		if strings.Contains(s, " admitted, ") {
			panels++
		}
	}
	if panels != len(r.Algorithms) {
		t.Errorf("chart has %d panels, want %d", panels, len(r.Algorithms))
	}
	if n := strings.Count(strings.Join(texts, "\n"), "time (s)"); n != 1 {
		t.Errorf("the shared time axis is labelled %d times, want once", n)
	}
	got := strings.Join(texts, "\n") + "\n"
	golden := filepath.Join("testdata", "chart.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestChartGolden -update)", err)
	}
	if got != string(want) {
		t.Errorf("chart texts differ from %s:\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
}

func TestChartPNG(t *testing.T) {
	r, err := Run(Config{Seed: 1, Algorithms: nil}, Bursts{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.WriteChart(&b, PNG); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if w := img.Bounds().Dx(); w != 768 {
		t.Errorf("PNG is %d pixels wide, want 768 (8 in at 96 dpi)", w)
	}
	if err := r.WriteChart(&b, "gif"); err == nil {
		t.Error("WriteChart(gif) succeeded, want an error")
	}
}

func TestFormatOf(t *testing.T) {
	for name, want := range map[string]string{"a.svg": SVG, "B.PNG": PNG, "c.jpg": ""} {
		got, err := FormatOf(name)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("FormatOf(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
}
