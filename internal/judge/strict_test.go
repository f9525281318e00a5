package judge

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/score"
)

// TestParseStrict pins what a reward accepts as a verdict: all five
// dimensions, each within 1..5 once converted as Parse converts it; the
// rest is an unparseable answer, where Parse stays lenient.
func TestParseStrict(t *testing.T) {
	all := func(v string) string {
		return `{"scores": {"format": ` + v + `, "factuality": 4, "consistency": 4, "realism": 4, "quality": 4}}`
	}
	tests := []struct {
		name string
		in   string
		want score.Scores // zero: an error
	}{
		{"five in range", all("5"), score.Scores{Format: 5, Factuality: 4, Consistency: 4, Realism: 4, Quality: 4}},
		{"string and float converted", `{"scores": {"format": "3/5", "factuality": 2.5, "consistency": 3.5, "realism": true, "quality": " 2 "}}`,
			score.Scores{Format: 3, Factuality: 2, Consistency: 4, Realism: 1, Quality: 2}},
		{"four at 0 and format 5", `{"scores": {"format": 5, "factuality": 0, "consistency": 0, "realism": 0, "quality": 0}}`, score.Scores{}},
		{"a dimension missing", `{"scores": {"format": 5, "factuality": 5, "consistency": 5, "realism": 5}}`, score.Scores{}},
		{"negative", all("-3"), score.Scores{}},
		{"above the scale", all("7"), score.Scores{}},
		{"float rounding above", all("5.6"), score.Scores{}},
		{"null", all("null"), score.Scores{}},
		{"word", all(`"five"`), score.Scores{}},
		{"no scores", `{"verdict": 5}`, score.Scores{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := ParseStrict(tt.in)
			if tt.want == (score.Scores{}) {
				if !errors.Is(err, ErrUnparseable) {
					t.Fatalf("ParseStrict(%s) = %+v, %v; want an ErrUnparseable", tt.in, got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("scores (-want +got):\n%s", d)
			}
			// Parse agrees on every verdict ParseStrict accepts.
			lenient, _, _ := Parse(tt.in)
			if lenient != got {
				t.Errorf("Parse = %+v, ParseStrict = %+v", lenient, got)
			}
		})
	}
	// Parse keeps its published leniency on the same inputs.
	if s, _, err := Parse(all("7")); err != nil || s.Format != 5 {
		t.Errorf("Parse of a 7: %+v, %v; want it clamped to 5", s, err)
	}
}

// FuzzParseStrict: never a panic, only ErrUnparseable, every accepted
// dimension in 1..5, and agreement with Parse whenever it accepts.
func FuzzParseStrict(f *testing.F) {
	addSeeds(f, "parse")
	f.Add(`{"scores": {"format": 5, "factuality": 0, "consistency": 9, "realism": 4, "quality": "4/5"}}`)
	f.Fuzz(func(t *testing.T, in string) {
		s, _, err := ParseStrict(in)
		if err != nil {
			if !errors.Is(err, ErrUnparseable) {
				t.Fatalf("error %v is not ErrUnparseable", err)
			}
			return
		}
		for i, x := range s.Values() {
			if x < 1 || x > 5 {
				t.Fatalf("dimension %d = %d outside 1..5", i, x)
			}
		}
		if lenient, _, err := Parse(in); err != nil || lenient != s {
			t.Fatalf("Parse = %+v, %v; ParseStrict = %+v", lenient, err, s)
		}
	})
}
