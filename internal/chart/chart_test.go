package chart

import (
	"bytes"
	"encoding/xml"
	"image"
	"image/color"
	"image/png"
	"io"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/testkit"
)

var red = color.RGBA{0xc0, 0x39, 0x2b, 0xff}

// examplePage has both kinds of panel, with a label that needs escaping and
// characters the bitmap face lacks.
func examplePage() *Page {
	return &Page{Width: 800, Height: 360, Cols: 2, Panels: []Panel{
		&Bars{Title: "score by domain (0-100)", YLabel: "score", YMax: 100,
			Labels: []string{"os", "web", "a<b&c"}, Values: []float64{62.5, 40, 0},
			Lo: []float64{55, 31, 0}, Hi: []float64{70, 49, 0},
			Ref: &Ref{Value: 50, Label: "overall 50.00", Color: red}},
		&Lines{Title: "turns – per trajectory", YLabel: "% of trajectories", Labels: []string{"1", "2–3", "4–7"}, Legend: true,
			Series: []Series{{Name: "os", Values: []float64{10, 60, 30}, Color: color.RGBA{31, 119, 180, 255}},
				{Name: "web", Values: []float64{0, 100, 0}, Color: color.RGBA{255, 127, 14, 255}}}},
	}}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name), got)
}

// TestWriteSVG pins the SVG of the example page and checks it is
// well-formed XML.
func TestWriteSVG(t *testing.T) {
	var buf bytes.Buffer
	if err := examplePage().WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
	golden(t, "page.svg", buf.Bytes())
}

// TestWritePNG checks the raster page where its content must be: a white
// background, each bar in its colour up to its value, the dashed reference
// line, and text drawn in the title band.
func TestWritePNG(t *testing.T) {
	var buf bytes.Buffer
	if err := examplePage().WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b != image.Rect(0, 0, 800, 360) {
		t.Fatalf("bounds %v", b)
	}
	at := func(x, y int) color.RGBA {
		r, g, b, a := img.At(x, y).RGBA()
		return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
	}
	white := color.RGBA{0xff, 0xff, 0xff, 0xff}
	if got := at(2, 2); got != white {
		t.Errorf("background %v, want white", got)
	}
	// The bars panel: cell 0..400, padded 12, plot area from x 74 to 380,
	// y from 52 to 320; three slots of 102 px.
	area := box{12 + 62, 12 + 14 + 14, 400 - 12 - 8, 360 - 12 - 28}
	slot := (area.x1 - area.x0) / 3
	ypos := func(v float64) int { return int(area.y1 - v/100*(area.y1-area.y0)) }
	bar0 := int(area.x0 + slot*0.5)
	if got := at(bar0+8, ypos(20)); got != barBlue {
		t.Errorf("inside the first bar: %v, want %v", got, barBlue)
	}
	if got := at(bar0+8, ypos(80)+3); got == barBlue {
		t.Errorf("above the first bar: %v, want background", got)
	}
	refY := ypos(50)
	found := false
	for y := refY - 1; y <= refY+1; y++ {
		if c := at(int(area.x0)+2, y); c.R > 0xa0 && c.G < 0x80 {
			found = true
		}
	}
	if !found {
		t.Errorf("no reference line at y=%d", refY)
	}
	dark := 0
	for y := 12; y < 12+16; y++ {
		for x := 100; x < 300; x++ {
			if c := at(x, y); c.R < 0x80 {
				dark++
			}
		}
	}
	if dark < 50 {
		t.Errorf("title band has %d dark pixels: no title drawn", dark)
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 100, []float64{0, 20, 40, 60, 80, 100}},
		{0, 1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0, 35, []float64{0, 10, 20, 30}},
	} {
		if d := cmp.Diff(tc.want, ticks(tc.lo, tc.hi)); d != "" {
			t.Errorf("ticks(%v, %v) (-want +got):\n%s", tc.lo, tc.hi, d)
		}
	}
	for v, want := range map[float64]float64{0: 1, 48: 50, 100: 100, 3.2: 4, 0.37: 0.4} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}
