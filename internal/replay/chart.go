package replay

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Chart is a line chart over scenario time, with shaded bands for what
// happened when (load phases, alerts firing). Save draws it as a PNG.
type Chart struct {
	Title, YLabel string
	// Duration is the x axis's extent, from scenario time zero.
	Duration time.Duration
	// YMax is the y axis's top; its bottom is 0.
	YMax  float64
	Bands []Band
	Lines []Line
}

// Band shades [From, To) of scenario time.
type Band struct {
	From, To time.Duration
	Label    string
	Color    color.Color
}

// Line is one series: its points' X in scenario time, Y in the chart's unit.
type Line struct {
	Label  string
	Points []Point
}

// Point is one sample of a Line.
type Point struct {
	At time.Duration
	Y  float64
}

// Save draws the chart into a PNG file at path, making its folder.
func (c Chart) Save(path string) error {
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = "scenario time (minutes)"
	p.Y.Label.Text = c.YLabel
	p.Y.Min, p.Y.Max = 0, c.YMax
	p.X.Min, p.X.Max = 0, c.Duration.Minutes()
	p.Add(plotter.NewGrid())
	for _, b := range c.Bands {
		band, err := plotter.NewPolygon(plotter.XYs{
			{X: b.From.Minutes(), Y: 0}, {X: b.To.Minutes(), Y: 0},
			{X: b.To.Minutes(), Y: c.YMax}, {X: b.From.Minutes(), Y: c.YMax},
		})
		if err != nil {
			return err
		}
		band.Color = b.Color
		band.Width = 0
		p.Add(band)
		if b.Label != "" {
			p.Legend.Add(b.Label, band)
		}
	}
	for n, l := range c.Lines {
		if len(l.Points) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(l.Points))
		for i, pt := range l.Points {
			xys[i] = plotter.XY{X: pt.At.Minutes(), Y: pt.Y}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(n)
		line.Dashes = plotutil.Dashes(n)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(l.Label, line)
	}
	p.Legend.Top, p.Legend.Left = false, true
	p.Legend.YOffs = vg.Points(12)
	p.Legend.XOffs = vg.Points(8)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return p.Save(9*vg.Inch, 4.5*vg.Inch, path)
}

// WriteChart draws the success rate of each policy over scenario time, one
// point per 10 s of call start time, and the load phases and the span of the
// faults as shaded bands, into a PNG file at path.
func WriteChart(path string, rep *Report) error {
	c := Chart{
		Title:    fmt.Sprintf("%s: success rate over time (scenario time, %s buckets)", rep.Scenario, fmtDuration(bucketWidth)),
		YLabel:   "calls that succeeded (%)",
		Duration: rep.Duration,
		YMax:     105,
	}
	for _, ph := range rep.Phases {
		c.Bands = append(c.Bands, Band{From: ph.From, To: ph.To, Label: fmt.Sprintf("load x%s", trimFloat(ph.Multiplier)),
			Color: color.NRGBA{R: 255, G: 200, B: 120, A: 90}})
	}
	if f := rep.Fault; f.To > 0 {
		c.Bands = append(c.Bands, Band{From: f.From, To: f.To, Label: "faults", Color: color.NRGBA{R: 230, G: 120, B: 120, A: 50}})
	}
	for _, r := range rep.Results {
		if r.Skipped != "" || len(r.Series) == 0 {
			continue
		}
		l := Line{Label: r.Policy}
		for _, b := range r.Series {
			if b.Requests == 0 {
				continue
			}
			l.Points = append(l.Points, Point{At: b.Start + bucketWidth/2, Y: 100 * ratio(b.Succeeded, b.Requests)})
		}
		c.Lines = append(c.Lines, l)
	}
	return c.Save(path)
}
