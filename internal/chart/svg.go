package chart

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image/color"
	"io"
	"strconv"
	"strings"
)

// svgCanvas writes SVG elements as they are drawn.
type svgCanvas struct {
	buf bytes.Buffer
}

func newSVG(w, h int) *svgCanvas {
	c := &svgCanvas{}
	fmt.Fprintf(&c.buf, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="system-ui, sans-serif">
<rect width="100%%" height="100%%" fill="#ffffff"/>
`, w, h, w, h)
	return c
}

func (c *svgCanvas) finish(w io.Writer) error {
	c.buf.WriteString("</svg>\n")
	_, err := w.Write(c.buf.Bytes())
	return err
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func (c *svgCanvas) rect(b box, fill color.RGBA) {
	fmt.Fprintf(&c.buf, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"%s/>`+"\n",
		num(b.x0), num(b.y0), num(b.x1-b.x0), num(b.y1-b.y0), hexColor(fill), opacity("fill-opacity", fill))
}

func (c *svgCanvas) polyline(pts []point, stroke color.RGBA, width float64, dash []float64) {
	if len(pts) < 2 {
		return
	}
	var p strings.Builder
	for i, pt := range pts {
		if i > 0 {
			p.WriteByte(' ')
		}
		p.WriteString(num(pt.x) + "," + num(pt.y))
	}
	extra := ""
	if len(dash) > 0 {
		ds := make([]string, len(dash))
		for i, d := range dash {
			ds[i] = num(d)
		}
		extra = ` stroke-dasharray="` + strings.Join(ds, " ") + `"`
	}
	fmt.Fprintf(&c.buf, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round"%s%s/>`+"\n",
		p.String(), hexColor(stroke), num(width), extra, opacity("stroke-opacity", stroke))
}

func (c *svgCanvas) text(at point, s string, st textStyle) {
	if s == "" {
		return
	}
	attrs := fmt.Sprintf(`x="%s" y="%s" font-size="%s" fill="%s"`, num(at.x), num(at.y), num(st.size), hexColor(st.color))
	switch st.anchor {
	case anchorMiddle:
		attrs += ` text-anchor="middle"`
	case anchorEnd:
		attrs += ` text-anchor="end"`
	}
	if st.bold {
		attrs += ` font-weight="bold"`
	}
	if st.vertical {
		attrs += fmt.Sprintf(` transform="rotate(-90 %s %s)"`, num(at.x), num(at.y))
	}
	var esc bytes.Buffer
	_ = xml.EscapeText(&esc, []byte(s))
	fmt.Fprintf(&c.buf, "<text %s>%s</text>\n", attrs, esc.String())
}

// opacity is the attribute for a colour that is not opaque, else "".
func opacity(attr string, c color.RGBA) string {
	if c.A == 0xff {
		return ""
	}
	return fmt.Sprintf(` %s="%s"`, attr, strconv.FormatFloat(float64(c.A)/255, 'f', 2, 64))
}
