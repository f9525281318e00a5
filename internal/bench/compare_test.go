package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	base := genJudged(21, 1200)
	// A better run: every valid sample one point higher on quality.
	var better []*Judged
	for _, r := range base {
		c := *r
		if r.Scores != nil {
			s := *r.Scores
			if s.Quality > 0 && s.Quality < 5 {
				s.Quality++
			}
			c.Scores = &s
		}
		better = append(better, &c)
	}
	a := Score(base, &ScoreOptions{Label: "base", Resamples: 200})
	b := Score(better, &ScoreOptions{Label: "better", Resamples: 200})
	same := Score(base, &ScoreOptions{Label: "same", Resamples: 200, Seed: 9})
	c := Compare(a, b, same)
	if len(c.Labels) != 3 || c.Labels[1] != "better" {
		t.Fatalf("labels %v", c.Labels)
	}
	var quality, format *CompareRow
	for i := range c.Rows {
		r := &c.Rows[i]
		if r.Domain == "terminal" && r.Metric == "quality" {
			quality = r
		}
		if r.Domain == "terminal" && r.Metric == "format" {
			format = r
		}
	}
	if quality == nil || format == nil {
		t.Fatal("missing terminal rows")
	}
	if d := float64(quality.Deltas[1]); d <= 0 || math.Abs(d-float64(quality.Values[1]-quality.Values[0])) > 1e-12 {
		t.Errorf("quality delta %v", d)
	}
	if !quality.Separated[1] {
		t.Error("a one-point quality gain on ~150 samples should separate the intervals")
	}
	if format.Deltas[1] != 0 || format.Separated[1] || format.Separated[2] || quality.Separated[2] {
		t.Error("identical data must not separate")
	}
	last := c.Rows[len(c.Rows)-1]
	if last.Domain != "overall" || last.Metric != "sample_mean" {
		t.Errorf("last row %+v", last)
	}
	var buf bytes.Buffer
	if err := c.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"better", "Δ", "quality", "domain_mean", "*"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSeparated(t *testing.T) {
	n := Num(math.NaN())
	tests := []struct {
		a, b [2]Num
		want bool
	}{
		{[2]Num{1, 2}, [2]Num{3, 4}, true},
		{[2]Num{3, 4}, [2]Num{1, 2}, true},
		{[2]Num{1, 3}, [2]Num{2, 4}, false},
		{[2]Num{1, 2}, [2]Num{2, 4}, false},
		{[2]Num{n, n}, [2]Num{3, 4}, false},
	}
	for _, tt := range tests {
		if got := separated(tt.a, tt.b); got != tt.want {
			t.Errorf("separated(%v, %v) = %v", tt.a, tt.b, got)
		}
	}
}
