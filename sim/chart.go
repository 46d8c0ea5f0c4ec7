package sim

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart formats.
const (
	SVG = "svg"
	PNG = "png"
)

var (
	admittedColor = color.RGBA{R: 0x2a, G: 0x9d, B: 0x3f, A: 0xff}
	rejectedColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)

// FormatOf returns the chart format a file name asks for by its extension:
// SVG or PNG.
func FormatOf(name string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(name)); ext {
	case ".svg":
		return SVG, nil
	case ".png":
		return PNG, nil
	default:
		return "", fmt.Errorf("sim: chart %s: want a .svg or .png file, not %q", name, ext)
	}
}

// WriteChart draws r's admitted and rejected requests over time, one panel
// per algorithm stacked on a shared time axis, and writes the chart to w in
// format (SVG or PNG). Its output for a given report is the same every time.
func (r *Report) WriteChart(w io.Writer, format string) error {
	if len(r.Algorithms) == 0 {
		return fmt.Errorf("sim: chart: no algorithms to draw")
	}
	width := 8 * vg.Inch
	height := vg.Length(0.6+1.7*float64(len(r.Algorithms))) * vg.Inch
	plots, err := r.panels()
	if err != nil {
		return err
	}
	return writeStacked(w, format, width, height, fmt.Sprintf("%s — %d per %s, burst %d", r.Pattern, r.Rate, r.Period, r.Burst), plots)
}

// writeStacked draws plots one above the other on a shared time axis under
// title, on a white background (so the chart reads the same on a dark
// page), and writes the chart to w in format (SVG or PNG).
func writeStacked(w io.Writer, format string, width, height vg.Length, title string, plots []*plot.Plot) error {
	var c vg.CanvasWriterTo
	switch format {
	case SVG:
		c = vgsvg.New(width, height)
	case PNG:
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(96))}
	default:
		return fmt.Errorf("sim: chart: unknown format %q (want svg or png)", format)
	}
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	top := draw.Crop(dc, 0, 0, 0, -0.5*vg.Inch)
	font := plot.DefaultFont
	font.Size = vg.Points(12)
	dc.FillText(draw.TextStyle{Color: color.Black, Font: font, Handler: plot.DefaultTextHandler, XAlign: draw.XCenter},
		vg.Point{X: width / 2, Y: height - 0.3*vg.Inch}, title)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter, PadY: 2 * vg.Millimeter, PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: 2 * vg.Millimeter}
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, tiles, top)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	_, err := c.WriteTo(w)
	return err
}

// panels builds one plot per algorithm on a shared time axis, in seconds
// from the start (minutes when the run is long). It reads only r's exported
// fields, so a Report decoded from JSON draws the same chart.
func (r *Report) panels() ([]*plot.Plot, error) {
	unit, unitName := time.Second, "s"
	if d, _ := time.ParseDuration(r.Duration); d > 30*time.Minute {
		unit, unitName = time.Minute, "min"
	}
	bucket, _ := time.ParseDuration(r.Bucket)
	step := float64(bucket) / float64(unit)
	var ymax float64
	for _, a := range r.Algorithms {
		for i := range a.AdmittedOverTime {
			ymax = max(ymax, float64(a.AdmittedOverTime[i]), float64(a.RejectedOverTime[i]))
		}
	}
	ymax = max(ymax*1.1, 1)
	var plots []*plot.Plot
	for i, a := range r.Algorithms {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: %d admitted, %d rejected", a.Algorithm, a.Admitted, a.Rejected)
		p.Title.TextStyle.Font.Size = vg.Points(10)
		p.Y.Label.Text = "per " + r.Bucket
		p.X.Min, p.X.Max = 0, step*float64(len(a.AdmittedOverTime))
		p.Y.Min, p.Y.Max = 0, ymax
		if i == len(r.Algorithms)-1 {
			p.X.Label.Text = "time (" + unitName + ")"
		} else {
			p.X.Tick.Marker = unlabelled{} // the shared axis is labelled once, at the bottom
		}
		p.Add(plotter.NewGrid())
		adm, err := stepLine(a.AdmittedOverTime, step, admittedColor, true)
		if err != nil {
			return nil, err
		}
		rej, err := stepLine(a.RejectedOverTime, step, rejectedColor, false)
		if err != nil {
			return nil, err
		}
		p.Add(adm, rej)
		if i == 0 {
			p.Legend.Add("admitted", adm)
			p.Legend.Add("rejected", rej)
			p.Legend.Top = true
		}
		plots = append(plots, p)
	}
	return plots, nil
}

// stepLine draws counts per bucket as a step line, filled when fill is set.
func stepLine(counts []int64, step float64, c color.Color, fill bool) (*plotter.Line, error) {
	pts := make(plotter.XYs, len(counts)+1)
	for i, v := range counts {
		pts[i] = plotter.XY{X: float64(i) * step, Y: float64(v)}
	}
	if n := len(counts); n > 0 {
		pts[n] = plotter.XY{X: float64(n) * step, Y: float64(counts[n-1])}
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return nil, fmt.Errorf("sim: chart: %w", err)
	}
	l.StepStyle = plotter.PostStep
	l.Color = c
	l.Width = vg.Points(1)
	if fill {
		l.FillColor = color.NRGBA{R: 0x2a, G: 0x9d, B: 0x3f, A: 0x60}
	}
	return l, nil
}

// unlabelled is the default ticker without labels.
type unlabelled struct{}

// Ticks implements plot.Ticker.
func (unlabelled) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		ts[i].Label = ""
	}
	return ts
}
