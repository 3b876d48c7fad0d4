package replay

import (
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestChartSave checks that a chart with bands and lines is written as a PNG
// of the chart's size, and that a band's color shows in it.
func TestChartSave(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "c.png")
	c := Chart{Title: "t", YLabel: "%", Duration: 30 * time.Minute, YMax: 20,
		Bands: []Band{{From: 10 * time.Minute, To: 20 * time.Minute, Label: "alert", Color: color.NRGBA{R: 255, A: 255}}},
		Lines: []Line{{Label: "share", Points: []Point{{At: 0, Y: 5}, {At: 30 * time.Minute, Y: 15}}}, {Label: "empty"}},
	}
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	b := img.Bounds()
	if b.Dx() < 800 || b.Dy() < 400 {
		t.Fatalf("chart is %dx%d", b.Dx(), b.Dy())
	}
	red := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 > 240 && g>>8 < 20 && bl>>8 < 20 {
				red++
			}
		}
	}
	// The band covers a third of the plot's width and its whole height.
	if red < b.Dx()*b.Dy()/20 {
		t.Errorf("the band's color covers %d pixels of %d", red, b.Dx()*b.Dy())
	}
}
