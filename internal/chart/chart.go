// Package chart draws the project's two simple chart kinds — [Bars] with
// intervals and a reference line, and [Lines] over nominal categories — on
// a [Page] of panels, as SVG or PNG, with no bundled fonts.
//
// SVG text is left to the viewer's sans-serif font. PNG text uses
// x/image's 7×13 bitmap face (ASCII; a few common typographic characters
// are mapped to ASCII), and shapes are anti-aliased by x/image/vector. It
// replaced gonum/plot, whose bundled Liberation fonts alone were 4.4 MB of
// the binary, for two charts that need axes, bars, lines and labels only.
package chart

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"
)

// Page is a grid of panels, filled row by row.
type Page struct {
	// Width and Height are the page size in pixels.
	Width, Height int
	// Cols is the number of panels per row; 0 means 1.
	Cols int
	// Panels are drawn in order, each in an equal cell.
	Panels []Panel
}

// Panel is one chart of a page.
type Panel interface {
	draw(c canvas, r box)
}

// WriteSVG writes the page as a standalone SVG document.
func (p *Page) WriteSVG(w io.Writer) error {
	c := newSVG(p.Width, p.Height)
	p.draw(c)
	return c.finish(w)
}

// WritePNG writes the page as a PNG image on a white background.
func (p *Page) WritePNG(w io.Writer) error {
	c := newRaster(p.Width, p.Height)
	p.draw(c)
	return c.finish(w)
}

func (p *Page) draw(c canvas) {
	cols := max(p.Cols, 1)
	rows := (len(p.Panels) + cols - 1) / cols
	if rows == 0 {
		return
	}
	cw, ch := float64(p.Width)/float64(cols), float64(p.Height)/float64(rows)
	const pad = 12
	for i, pn := range p.Panels {
		x, y := float64(i%cols)*cw, float64(i/cols)*ch
		pn.draw(c, box{x + pad, y + pad, x + cw - pad, y + ch - pad})
	}
}

// Bars is a bar chart over named categories with an interval per bar and
// an optional horizontal reference line.
type Bars struct {
	Title, YLabel string
	// YMin and YMax fix the value axis.
	YMin, YMax float64
	// Labels name the bars; Values, Lo and Hi (the interval; nil for none)
	// have one entry per label.
	Labels         []string
	Values, Lo, Hi []float64
	// Color fills the bars; the zero value is a muted blue.
	Color color.RGBA
	// Ref, when not nil, is drawn dashed across the chart and named in a
	// legend.
	Ref *Ref
}

// Ref is a labelled reference value.
type Ref struct {
	Value float64
	Label string
	Color color.RGBA
}

// Lines draws one line per series over nominal categories, with a legend.
type Lines struct {
	Title, YLabel string
	// Labels are the categories along the x axis, drawn rotated.
	Labels []string
	Series []Series
	// Legend names the series on this panel.
	Legend bool
}

// Series is one line: a value per category.
type Series struct {
	Name   string
	Values []float64
	Color  color.RGBA
}

// box is a rectangle by its corners; y grows downward.
type box struct{ x0, y0, x1, y1 float64 }

type point struct{ x, y float64 }

// anchor is where a text's reference point lies along it.
type anchor int

const (
	anchorStart anchor = iota
	anchorMiddle
	anchorEnd
)

// textStyle says how one string is drawn.
type textStyle struct {
	size   float64 // pixels (SVG); the bitmap face has one size
	anchor anchor
	// vertical turns the text to read upward (rotated -90°).
	vertical bool
	bold     bool
	color    color.RGBA
}

// canvas is what a panel draws on: the SVG writer or the rasterizer.
type canvas interface {
	rect(b box, fill color.RGBA)
	polyline(pts []point, stroke color.RGBA, width float64, dash []float64)
	text(at point, s string, st textStyle)
}

var (
	black     = color.RGBA{0x22, 0x22, 0x22, 0xff}
	gridGray  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	axisGray  = color.RGBA{0x66, 0x66, 0x66, 0xff}
	barBlue   = color.RGBA{0x3b, 0x6e, 0xa8, 0xff}
	titleSize = 14.0
	labelSize = 12.0
	tickSize  = 11.0
)

// frame draws a panel's title, axis label, value grid and axes, and returns
// the plotting area with the function placing a value on it.
func frame(c canvas, r box, title, ylabel string, ymin, ymax float64, bottom float64) (area box, ypos func(float64) float64) {
	c.text(point{(r.x0 + r.x1) / 2, r.y0 + titleSize}, title, textStyle{size: titleSize, anchor: anchorMiddle, bold: true, color: black})
	area = box{r.x0 + 62, r.y0 + titleSize + 14, r.x1 - 8, r.y1 - bottom}
	c.text(point{r.x0 + labelSize, (area.y0 + area.y1) / 2}, ylabel, textStyle{size: labelSize, anchor: anchorMiddle, vertical: true, color: black})
	if ymax <= ymin {
		ymax = ymin + 1
	}
	ypos = func(v float64) float64 {
		v = min(max(v, ymin), ymax)
		return area.y1 - (v-ymin)/(ymax-ymin)*(area.y1-area.y0)
	}
	for _, t := range ticks(ymin, ymax) {
		y := ypos(t)
		c.polyline([]point{{area.x0, y}, {area.x1, y}}, gridGray, 1, nil)
		c.text(point{area.x0 - 6, y + 4}, formatTick(t), textStyle{size: tickSize, anchor: anchorEnd, color: black})
	}
	c.polyline([]point{{area.x0, area.y0}, {area.x0, area.y1}, {area.x1, area.y1}}, axisGray, 1, nil)
	return area, ypos
}

func (b *Bars) draw(c canvas, r box) {
	area, ypos := frame(c, r, b.Title, b.YLabel, b.YMin, b.YMax, 28)
	n := len(b.Labels)
	if n == 0 {
		return
	}
	fill := b.Color
	if fill == (color.RGBA{}) {
		fill = barBlue
	}
	slot := (area.x1 - area.x0) / float64(n)
	bw := min(slot*0.6, 40)
	for i, label := range b.Labels {
		cx := area.x0 + slot*(float64(i)+0.5)
		v := b.Values[i]
		c.rect(box{cx - bw/2, ypos(v), cx + bw/2, ypos(b.YMin)}, fill)
		if i < len(b.Lo) && i < len(b.Hi) {
			lo, hi := ypos(b.Lo[i]), ypos(b.Hi[i])
			c.polyline([]point{{cx, lo}, {cx, hi}}, black, 1.5, nil)
			c.polyline([]point{{cx - 6, lo}, {cx + 6, lo}}, black, 1.5, nil)
			c.polyline([]point{{cx - 6, hi}, {cx + 6, hi}}, black, 1.5, nil)
		}
		c.text(point{cx, area.y1 + 16}, label, textStyle{size: labelSize, anchor: anchorMiddle, color: black})
	}
	if b.Ref != nil {
		y := ypos(b.Ref.Value)
		dash := []float64{6, 4}
		c.polyline([]point{{area.x0, y}, {area.x1, y}}, b.Ref.Color, 1.5, dash)
		legend(c, area, []Series{{Name: b.Ref.Label, Color: b.Ref.Color}}, dash)
	}
}

func (l *Lines) draw(c canvas, r box) {
	ymax := 0.0
	for _, s := range l.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				ymax = max(ymax, v)
			}
		}
	}
	ymax = niceCeil(ymax)
	longest := 0
	for _, lb := range l.Labels {
		longest = max(longest, len([]rune(lb)))
	}
	area, ypos := frame(c, r, l.Title, l.YLabel, 0, ymax, 12+7*float64(min(longest, 14)))
	n := len(l.Labels)
	if n == 0 {
		return
	}
	slot := (area.x1 - area.x0) / float64(n)
	xpos := func(i int) float64 { return area.x0 + slot*(float64(i)+0.5) }
	for i, lb := range l.Labels {
		c.text(point{xpos(i) + 4, area.y1 + 6}, lb, textStyle{size: tickSize, anchor: anchorEnd, vertical: true, color: black})
	}
	for _, s := range l.Series {
		pts := make([]point, 0, len(s.Values))
		for i, v := range s.Values {
			if i < n && !math.IsNaN(v) {
				pts = append(pts, point{xpos(i), ypos(v)})
			}
		}
		c.polyline(pts, s.Color, 2, nil)
	}
	if l.Legend {
		legend(c, area, l.Series, nil)
	}
}

// legend names series in the top right corner of area, on a white box.
func legend(c canvas, area box, series []Series, dash []float64) {
	if len(series) == 0 {
		return
	}
	width := 0
	for _, s := range series {
		width = max(width, len([]rune(s.Name)))
	}
	w := 34 + 7*float64(width)
	lb := box{area.x1 - w - 6, area.y0 + 4, area.x1 - 6, area.y0 + 8 + 16*float64(len(series))}
	c.rect(lb, color.RGBA{0xff, 0xff, 0xff, 0xff})
	for i, s := range series {
		y := lb.y0 + 12 + 16*float64(i)
		c.polyline([]point{{lb.x0 + 6, y - 4}, {lb.x0 + 26, y - 4}}, s.Color, 2, dash)
		c.text(point{lb.x0 + 30, y}, s.Name, textStyle{size: tickSize, color: black})
	}
}

// ticks are round values from lo to hi, about five of them.
func ticks(lo, hi float64) []float64 {
	step := niceStep((hi - lo) / 5)
	var out []float64
	for i := math.Ceil(lo / step); i*step <= hi+step*1e-9; i++ {
		// Rounded to nine decimals so that 3 × 0.2 is 0.6.
		out = append(out, math.Round(i*step*1e9)/1e9)
	}
	return out
}

// niceStep rounds d up to 1, 2 or 5 times a power of ten.
func niceStep(d float64) float64 {
	if d <= 0 || math.IsNaN(d) || math.IsInf(d, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(d)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= d {
			return m * p
		}
	}
	return 10 * p
}

// niceCeil is the first tick at or above v of an axis from 0 (1 for v <= 0).
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	step := niceStep(v / 5)
	return math.Ceil(v/step-1e-9) * step
}

func formatTick(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".")
}

func hexColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }
