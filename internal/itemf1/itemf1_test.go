package itemf1

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The cases are computed by hand: P = matched/predicted, R =
// matched/expected, F1 = 2PR/(P+R).
func TestComputeHandCases(t *testing.T) {
	for _, tc := range []struct {
		name            string
		pred, gold      []string
		p, r, f1        float64
		matched, np, ng int
	}{
		{"exact", []string{"Oslo", "Bergen"}, []string{"bergen", "oslo"}, 1, 1, 1, 2, 2, 2},
		{"half right", []string{"Oslo", "Paris"}, []string{"Oslo", "Bergen"}, 0.5, 0.5, 0.5, 1, 2, 2},
		// P = 1/3, R = 1/2, F1 = 2*(1/6)/(5/6) = 0.4
		{"three for two", []string{"a1", "b2", "c3"}, []string{"a1", "z9"}, 1.0 / 3, 0.5, 0.4, 1, 3, 2},
		// P = 2/2, R = 2/4, F1 = 2*0.5/1.5 = 2/3
		{"partial recall", []string{"w", "x"}, []string{"w", "x", "y", "z"}, 1, 0.5, 2.0 / 3, 2, 2, 4},
		{"none right", []string{"q"}, []string{"r"}, 0, 0, 0, 0, 1, 1},
		{"empty answer", nil, []string{"r"}, 0, 0, 0, 0, 0, 1},
		{"both empty", nil, nil, 1, 1, 1, 0, 0, 0},
		// repeats and blanks count once / not at all: P = 1/1, R = 1/2
		{"padding", []string{"The Oslo", "oslo", " ", "OSLO."}, []string{"Oslo", "Bergen"}, 1, 0.5, 2.0 / 3, 1, 1, 2},
		{"numbers", []string{"EUR 18,400", "2.1 kg"}, []string{"eur 18400", "2.1 KG"}, 1, 1, 1, 2, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Compute(tc.pred, tc.gold)
			near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
			if !near(s.Precision, tc.p) || !near(s.Recall, tc.r) || !near(s.F1, tc.f1) {
				t.Errorf("P/R/F1 = %.4f/%.4f/%.4f, want %.4f/%.4f/%.4f", s.Precision, s.Recall, s.F1, tc.p, tc.r, tc.f1)
			}
			if s.Matched != tc.matched || s.Predicted != tc.np || s.Expected != tc.ng {
				t.Errorf("counts = %d/%d/%d, want %d/%d/%d", s.Matched, s.Predicted, s.Expected, tc.matched, tc.np, tc.ng)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"The Lumen 3!":            "lumen 3",
		"  Tarnow,   Poland ":     "tarnow poland",
		"18,400":                  "18400",
		"x.y":                     "x y",
		"Ærøskøbing":              "ærøskøbing",
		"an apple and THE banana": "apple and banana",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestItems(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`["x", "y z"]`, []string{"x", "y z"}},
		{"- Oslo\n- Bergen\n\n3. Tromsø", []string{"Oslo", "Bergen", "Tromsø"}},
		{"Oslo, Bergen and Tromsø", []string{"Oslo", "Bergen", "Tromsø"}},
		{"Tarnow, Poland; Krakow, Poland", []string{"Tarnow, Poland", "Krakow, Poland"}},
		{"Marks and Spencer", []string{"Marks and Spencer"}},
		{"", nil},
	} {
		if diff := cmp.Diff(tc.want, Items(tc.in)); diff != "" {
			t.Errorf("Items(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestScoreAnswer(t *testing.T) {
	s := ScoreAnswer("Oslo, Bergen and Paris", []string{"Oslo", "Bergen"})
	if s.Matched != 2 || s.Predicted != 3 || math.Abs(s.F1-0.8) > 1e-9 {
		t.Errorf("score = %+v, want 2 of 3 matched, F1 0.8", s)
	}
}

func FuzzItems(f *testing.F) {
	for _, s := range []string{"a, b and c", "[\"x\"]", "- a\n- b", "1) x", "18,400; 2.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items := Items(s)
		sc := Compute(items, items)
		if sc.F1 != 1 && sc.Expected > 0 {
			t.Fatalf("an answer scored against itself: %+v", sc)
		}
		if sc.F1 < 0 || sc.F1 > 1 {
			t.Fatalf("F1 out of range: %+v", sc)
		}
	})
}
