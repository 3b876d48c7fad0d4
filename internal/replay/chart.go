package replay

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteChart draws the success rate of each policy over scenario time, one
// point per 10 s of call start time, and the load phases as shaded bands,
// into a PNG file at path.
func WriteChart(path string, rep *Report) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: success rate over time (scenario time, %s buckets)", rep.Scenario, fmtDuration(bucketWidth))
	p.X.Label.Text = "scenario time (minutes)"
	p.Y.Label.Text = "calls that succeeded (%)"
	p.Y.Min, p.Y.Max = 0, 105
	p.X.Min, p.X.Max = 0, rep.Duration.Minutes()
	p.Add(plotter.NewGrid())
	for _, ph := range rep.Phases {
		band, err := plotter.NewPolygon(plotter.XYs{
			{X: ph.From.Minutes(), Y: 0}, {X: ph.To.Minutes(), Y: 0},
			{X: ph.To.Minutes(), Y: 105}, {X: ph.From.Minutes(), Y: 105},
		})
		if err != nil {
			return err
		}
		band.Color = color.RGBA{R: 255, G: 200, B: 120, A: 90}
		band.Width = 0
		p.Add(band)
		p.Legend.Add(fmt.Sprintf("load x%s", trimFloat(ph.Multiplier)), band)
	}
	n := 0
	for _, r := range rep.Results {
		if r.Skipped != "" || len(r.Series) == 0 {
			continue
		}
		xys := make(plotter.XYs, 0, len(r.Series))
		for _, b := range r.Series {
			if b.Requests == 0 {
				continue
			}
			mid := b.Start + bucketWidth/2
			xys = append(xys, plotter.XY{X: mid.Minutes(), Y: 100 * ratio(b.Succeeded, b.Requests)})
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(n)
		line.Dashes = plotutil.Dashes(n)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(r.Policy, line)
		n++
	}
	p.Legend.Top, p.Legend.Left = false, true
	p.Legend.YOffs = vg.Points(12)
	p.Legend.XOffs = vg.Points(8)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return p.Save(9*vg.Inch, 4.5*vg.Inch, path)
}
