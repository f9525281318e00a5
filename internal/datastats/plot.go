package datastats

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strings"

	"github.com/agentworld/agentworld/internal/chart"
)

// domainColors gives each domain line a stable colour.
var domainColors = []color.RGBA{
	color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255},
	color.RGBA{227, 119, 194, 255}, color.RGBA{127, 127, 127, 255}, color.RGBA{188, 189, 34, 255},
	color.RGBA{23, 190, 207, 255},
}

// WritePlot renders the statistics as a 3×2 grid of charts (OL, Nov, Jac, R
// histograms, turns per trajectory, category shares), one line per domain,
// each as a share of that domain's turns. format is "png" or "svg".
func (c *CorpusStats) WritePlot(w io.Writer, format string) error {
	names := c.DomainNames()
	type panel struct {
		title, xlabel string
		labels        []string
		values        func(*DomainStats) []float64
	}
	share := func(d *Dist) []float64 {
		out := make([]float64, len(d.Hist))
		for i, n := range d.Hist {
			out[i] = pct(n, d.N)
		}
		return out
	}
	// turn bins: 1, 2–3, 4–7, …, 64+ (the tail folded into the last)
	turnLabels := make([]string, 7)
	for i := range turnLabels {
		lo, hi := 1<<i, 1<<(i+1)-1
		switch {
		case i == len(turnLabels)-1:
			turnLabels[i] = fmt.Sprintf("%d+", lo)
		case lo == hi:
			turnLabels[i] = fmt.Sprint(lo)
		default:
			turnLabels[i] = fmt.Sprintf("%d–%d", lo, hi)
		}
	}
	turnShares := func(d *DomainStats) []float64 {
		all := share(d.Turns)[1:] // bin 0 (no turns) cannot occur
		out := append([]float64(nil), all[:len(turnLabels)]...)
		for _, v := range all[len(turnLabels):] {
			out[len(out)-1] += v
		}
		return out
	}
	panels := []panel{
		{"OL (echo of the action)", "OL", FracBinLabels(), func(d *DomainStats) []float64 { return share(d.OL) }},
		{"Nov (new information)", "Nov", FracBinLabels(), func(d *DomainStats) []float64 { return share(d.Nov) }},
		{"Jac (Jaccard)", "Jac", FracBinLabels(), func(d *DomainStats) []float64 { return share(d.Jac) }},
		{"R (length ratio, log2 bins)", "R", RBinLabels(), func(d *DomainStats) []float64 { return share(d.R) }},
		{"turns per trajectory", "turns", turnLabels, turnShares},
		{"category shares", "category", c.Categories, func(d *DomainStats) []float64 {
			out := make([]float64, len(c.Categories))
			for i, cat := range c.Categories {
				out[i] = pct(d.Categories[cat], d.OL.N)
			}
			return out
		}},
	}
	page := chart.Page{Width: 1152, Height: 1344, Cols: 2}
	for i, p := range panels {
		pl := &chart.Lines{Title: p.title, YLabel: "% of turns", Labels: p.labels, Legend: i == 0}
		if p.xlabel == "turns" {
			pl.YLabel = "% of trajectories"
		}
		for j, n := range names {
			pl.Series = append(pl.Series, chart.Series{Name: n, Values: p.values(c.Domains[n]), Color: domainColors[j%len(domainColors)]})
		}
		page.Panels = append(page.Panels, pl)
	}
	switch strings.ToLower(format) {
	case "png":
		return page.WritePNG(w)
	case "svg":
		return page.WriteSVG(w)
	}
	return fmt.Errorf("plot format %q: want png or svg", format)
}

// PlotFormat picks png or svg from a file name.
func PlotFormat(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png", ".svg":
		return ext[1:], nil
	default:
		return "", fmt.Errorf("plot file %s: use a .png or .svg name", path)
	}
}
