package main

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// writePlot draws latency and message rate against message size, Tachyon
// beside each anchor, as one SVG of two panels.
func writePlot(file string, res []Result, anchors map[string][]Result) error {
	lat := newPanel("One-way latency", "latency (µs)")
	rate := newPanel("Message rate, window of 64", "million messages/s")
	colors := []color.Color{
		color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	}
	all := []struct {
		name string
		res  []Result
	}{{"Tachyon", res}}
	for _, n := range sortedNames(anchors) {
		all = append(all, struct {
			name string
			res  []Result
		}{n, anchors[n]})
	}
	for i, s := range all {
		c := colors[i%len(colors)]
		if err := addLine(lat, s.name, s.res, "latency", c); err != nil {
			return err
		}
		if err := addLine(rate, s.name, s.res, "msgrate", c); err != nil {
			return err
		}
	}
	const w, h = 18 * vg.Centimeter, 11 * vg.Centimeter
	canvas := vgsvg.New(w, 2*h)
	dc := draw.New(canvas)
	top := draw.Crop(dc, 0, 0, h, 0)
	bottom := draw.Crop(dc, 0, 0, 0, -h)
	lat.Draw(top)
	rate.Draw(bottom)
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func newPanel(title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "message size (bytes)"
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// addLine adds the kind series of res; size 0 cannot sit on a log axis and
// is left out.
func addLine(p *plot.Plot, name string, res []Result, kind string, c color.Color) error {
	var pts plotter.XYs
	for _, r := range res {
		if r.Kind == kind && r.Size > 0 {
			pts = append(pts, plotter.XY{X: float64(r.Size), Y: r.Value})
		}
	}
	if len(pts) == 0 {
		return nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return fmt.Errorf("plot %s %s: %w", name, kind, err)
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}
