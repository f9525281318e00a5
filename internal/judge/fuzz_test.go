package judge

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/pytext"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/google/go-cmp/cmp"
)

func addSeeds(f *testing.F, dir string) {
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.txt"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
}

// FuzzParse feeds arbitrary judge answers to Parse: it must not panic, must
// fail only with ErrUnparseable, must keep every positive score in 1..5, and
// must ignore a leading closed thinking block.
func FuzzParse(f *testing.F) {
	addSeeds(f, "parse")
	f.Add("{\"scores\": {\"format\": \"9/5\", \"quality\": 2.5}}")
	f.Add("```json\n{'scores': {format: 4,},}\n```")
	f.Fuzz(func(t *testing.T, in string) {
		s, v, err := Parse(in)
		if err != nil {
			if !errors.Is(err, ErrUnparseable) {
				t.Fatalf("error %v is not ErrUnparseable", err)
			}
			return
		}
		for i, x := range s.Values() {
			if x > 5 {
				t.Fatalf("dimension %d = %d above 5", i, x)
			}
		}
		s2, v2, err2 := Parse("<think>x</think>" + in)
		if err2 != nil || s2 != s || !cmp.Equal(v, v2) {
			t.Fatalf("a leading thinking block changed the result: %v %v / %v %v (%v)", s, v, s2, v2, err2)
		}
	})
}

// FuzzExtractPrediction feeds arbitrary generations to the published
// prediction extraction: it must not panic, must return stripped text, must
// pass tag-free text through (stripped, or NoOutput), and must ignore a
// leading closed thinking block.
func FuzzExtractPrediction(f *testing.F) {
	addSeeds(f, "extract")
	f.Add("<think>a<predicted_observation>b")
	f.Add("</think></think><predicted_observation></predicted_observation>")
	f.Fuzz(func(t *testing.T, in string) {
		got := conversation.ExtractPrediction(in)
		if got != pytext.Strip(got) {
			t.Fatalf("result %q is not stripped", got)
		}
		if !strings.Contains(in, "<") {
			want := pytext.Strip(in)
			if want == "" {
				want = conversation.NoOutput
			}
			if got != want {
				t.Fatalf("tag-free input: got %q, want %q", got, want)
			}
		}
		if again := conversation.ExtractPrediction("<think>x</think>" + in); again != got {
			t.Fatalf("a leading thinking block changed the result: %q vs %q", got, again)
		}
	})
}

// FuzzRules feeds arbitrary predictions to the offline scorer against the
// example records of all domains: it must not panic and must keep every
// score in 1..5.
func FuzzRules(f *testing.F) {
	f.Add("root@host:/app# ls\nroot@host:/app# ")
	f.Add(`{"content": [{"type": "text", "text": "[1, 2"}], "isError": false}`)
	f.Add("\t[118] link 'Sales'\n\t\t[119] link 'Orders'")
	var recs []*trajectory.Record
	for _, d := range []string{"mcp", "search", "terminal", "swe", "android", "web", "os"} {
		rs, err := trajectory.ReadFile(filepath.Join("..", "..", "examples", "bench", d+"_test.jsonl"), false)
		if err != nil {
			f.Fatal(err)
		}
		recs = append(recs, rs...)
	}
	f.Fuzz(func(t *testing.T, pred string) {
		// One record per input, chosen by the input, keeps executions cheap.
		rec := recs[len(pred)%len(recs)]
		s, _ := Rules(rec, pred)
		for _, x := range s.Values() {
			if x < 1 || x > 5 {
				t.Fatalf("score %d outside 1..5 for %q", x, pred)
			}
		}
	})
}
