package chart

import (
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
	"golang.org/x/image/vector"
)

// rasterCanvas draws into an RGBA image: shapes through an anti-aliasing
// rasterizer, text with the 7×13 bitmap face.
type rasterCanvas struct {
	img *image.RGBA
	z   vector.Rasterizer
}

func newRaster(w, h int) *rasterCanvas {
	c := &rasterCanvas{img: image.NewRGBA(image.Rect(0, 0, w, h))}
	draw.Draw(c.img, c.img.Bounds(), image.White, image.Point{}, draw.Src)
	return c
}

func (c *rasterCanvas) finish(w io.Writer) error {
	return png.Encode(w, c.img)
}

// fillPath fills the polygons (each a closed list of points) in one pass:
// where they overlap the coverage saturates rather than cancels, since
// every polygon is wound the same way (see segment).
func (c *rasterCanvas) fillPath(polys [][]point, fill color.RGBA) {
	bb := image.Rectangle{Min: image.Pt(math.MaxInt32, math.MaxInt32), Max: image.Pt(math.MinInt32, math.MinInt32)}
	for _, p := range polys {
		for _, pt := range p {
			bb.Min.X, bb.Min.Y = min(bb.Min.X, int(math.Floor(pt.x))), min(bb.Min.Y, int(math.Floor(pt.y)))
			bb.Max.X, bb.Max.Y = max(bb.Max.X, int(math.Ceil(pt.x))+1), max(bb.Max.Y, int(math.Ceil(pt.y))+1)
		}
	}
	bb = bb.Intersect(c.img.Bounds())
	if bb.Empty() {
		return
	}
	c.z.Reset(bb.Dx(), bb.Dy())
	c.z.DrawOp = draw.Over
	ox, oy := float64(bb.Min.X), float64(bb.Min.Y)
	for _, p := range polys {
		if len(p) < 3 {
			continue
		}
		c.z.MoveTo(float32(p[0].x-ox), float32(p[0].y-oy))
		for _, pt := range p[1:] {
			c.z.LineTo(float32(pt.x-ox), float32(pt.y-oy))
		}
		c.z.ClosePath()
	}
	c.z.Draw(c.img, bb, image.NewUniform(fill), image.Point{})
}

func (c *rasterCanvas) rect(b box, fill color.RGBA) {
	c.fillPath([][]point{{{b.x0, b.y0}, {b.x1, b.y0}, {b.x1, b.y1}, {b.x0, b.y1}}}, fill)
}

func (c *rasterCanvas) polyline(pts []point, stroke color.RGBA, width float64, dash []float64) {
	var polys [][]point
	for i := 1; i < len(pts); i++ {
		for _, s := range dashes(pts[i-1], pts[i], dash) {
			polys = append(polys, segment(s[0], s[1], width))
		}
		if i > 1 && len(dash) == 0 { // a square at each joint hides the notch
			p, h := pts[i-1], width/2
			polys = append(polys, []point{{p.x - h, p.y - h}, {p.x + h, p.y - h}, {p.x + h, p.y + h}, {p.x - h, p.y + h}})
		}
	}
	c.fillPath(polys, stroke)
}

// segment is the quadrilateral of a line from a to b, width wide. Its
// winding does not depend on the direction of the line.
func segment(a, b point, width float64) []point {
	dx, dy := b.x-a.x, b.y-a.y
	l := math.Hypot(dx, dy)
	if l == 0 {
		return nil
	}
	nx, ny := -dy/l*width/2, dx/l*width/2
	return []point{{a.x + nx, a.y + ny}, {b.x + nx, b.y + ny}, {b.x - nx, b.y - ny}, {a.x - nx, a.y - ny}}
}

// dashes cuts the line from a to b into the drawn pieces of the pattern
// (on, off, on, …); no pattern draws it whole. The pattern restarts on each
// line, which is all a straight reference line needs.
func dashes(a, b point, pattern []float64) [][2]point {
	if len(pattern) == 0 {
		return [][2]point{{a, b}}
	}
	l := math.Hypot(b.x-a.x, b.y-a.y)
	at := func(t float64) point { return point{a.x + (b.x-a.x)*t/l, a.y + (b.y-a.y)*t/l} }
	var out [][2]point
	for t, i := 0.0, 0; t < l; i++ {
		d := pattern[i%len(pattern)]
		if d <= 0 {
			d = 1
		}
		if i%2 == 0 {
			out = append(out, [2]point{at(t), at(min(t+d, l))})
		}
		t += d
	}
	return out
}

// asciiFor replaces characters the bitmap face lacks with their nearest
// ASCII spelling.
var asciiFor = strings.NewReplacer("–", "-", "—", "-", "−", "-", "×", "x", "…", "...", "≥", ">=", "≤", "<=", "·", ".")

func (c *rasterCanvas) text(at point, s string, st textStyle) {
	s = asciiFor.Replace(s)
	if s == "" {
		return
	}
	face := basicfont.Face7x13
	w := font.MeasureString(face, s).Ceil()
	h := face.Ascent + face.Descent
	// The text is drawn into a mask first so that a vertical label can be
	// turned a quarter, pixel for pixel.
	mask := image.NewAlpha(image.Rect(0, 0, w+1, h))
	d := font.Drawer{Dst: mask, Src: image.Opaque, Face: face, Dot: fixed.P(0, face.Ascent)}
	d.DrawString(s)
	if st.bold {
		d.Dot = fixed.P(1, face.Ascent)
		d.DrawString(s)
	}
	shift := 0
	switch st.anchor {
	case anchorMiddle:
		shift = w / 2
	case anchorEnd:
		shift = w
	}
	x0, y0 := int(math.Round(at.x)), int(math.Round(at.y))
	src := image.NewUniform(st.color)
	for my := 0; my < h; my++ {
		for mx := 0; mx <= w; mx++ {
			if mask.AlphaAt(mx, my).A == 0 {
				continue
			}
			// Offsets from the reference point on the baseline.
			u, v := mx-shift, my-face.Ascent
			px, py := x0+u, y0+v
			if st.vertical { // reading upward: along the text is up
				px, py = x0+v, y0-u
			}
			if image.Pt(px, py).In(c.img.Rect) {
				draw.DrawMask(c.img, image.Rect(px, py, px+1, py+1), src, image.Point{}, mask, image.Pt(mx, my), draw.Over)
			}
		}
	}
}
