package bench_test

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// The judge package implements the pipeline's interfaces without importing
// bench; this keeps the two in step.
var (
	_ bench.Rubric    = judge.Rubric{}
	_ bench.RuleJudge = judge.RuleScorer{}
)

// exampleJudged scores the examples/bench dataset with the offline rules
// scorer against a degraded "prediction" (the ground truth with its last
// line dropped), so the report tests run on realistic rows.
func exampleJudged(t *testing.T) []*bench.Judged {
	t.Helper()
	dir := filepath.Join("..", "..", "examples", "bench")
	files, err := trajectory.DataFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rows []*bench.Judged
	for _, f := range files {
		recs, err := trajectory.ReadFile(f, false)
		if err != nil {
			t.Fatal(err)
		}
		for i, rec := range recs {
			truth := rec.GroundTruth()
			pred := truth
			if k := strings.LastIndexByte(strings.TrimRight(truth, "\n "), '\n'); k > 0 && i%2 == 0 {
				pred = truth[:k]
			}
			j := &bench.Judged{Prediction: bench.Prediction{
				Sample: filepath.Base(f) + ":" + rec.ID.String() + ":" + string(rune('0'+rec.TurnIdx)) + ":" + string(rune('a'+i)),
				File:   filepath.Base(f), Line: i + 1, Task: rec.Task, Domain: rec.Domain(),
				ID: rec.ID.String(), TurnIdx: rec.TurnIdx, Prediction: pred,
			}, Judge: judge.RulesJudge}
			if i == 0 && rec.Domain() == "search" {
				j.Failure = bench.FailLength
			} else {
				s, v := judge.Rules(rec, pred)
				j.Scores, j.Total, j.Weaknesses = &s, s.Total(), v.Weaknesses
			}
			rows = append(rows, j)
		}
	}
	return rows
}

func TestWriteHTML(t *testing.T) {
	rows := exampleJudged(t)
	r := bench.Score(rows, &bench.ScoreOptions{Label: "rules on examples", Resamples: 100})
	var buf bytes.Buffer
	err := bench.WriteHTML(r, rows, &buf, &bench.HTMLOptions{Worst: 5, DataDir: filepath.Join("..", "..", "examples", "bench")})
	if err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	svg := regexp.MustCompile(`(?s)<figure[^>]*><svg .*?</svg>\s*</figure>`).FindString(page)
	if svg == "" {
		t.Fatal("no inline SVG chart")
	}
	// One bar per domain with its interval, labelled, and the overall line.
	for _, d := range r.Order {
		if !strings.Contains(svg, ">"+d+"</text>") {
			t.Errorf("chart lacks a label for domain %s", d)
		}
	}
	if n := strings.Count(svg, `fill="#3b6ea8"`); n != len(r.Order) {
		t.Errorf("chart has %d bars, want %d", n, len(r.Order))
	}
	if !strings.Contains(svg, "overall (domain mean)") || !strings.Contains(svg, `stroke-dasharray`) {
		t.Error("chart lacks the dashed overall line and its legend")
	}
	for _, want := range []string{
		"rules on examples", "leaderboard headline", "published script", "not the rubric judge",
		"Worst samples", "ground truth", "length 1", "**Environment Observation:**",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Count(page, `class="sample"`) != 5 {
		t.Errorf("want 5 worst samples, got %d", strings.Count(page, `class="sample"`))
	}
	if strings.Contains(page, "(record not available)") {
		t.Error("records were not loaded from the data dir")
	}
	if regexp.MustCompile(`(src|href)="https?:`).MatchString(page) {
		t.Error("page is not self-contained")
	}
}

func TestWriteTextRulesNote(t *testing.T) {
	rows := exampleJudged(t)
	r := bench.Score(rows, nil)
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"not the rubric judge", "search: length 1", "mcp", "os", "95% CI"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	t.Log("\n" + out)
}

func TestLoadRecords(t *testing.T) {
	rows := exampleJudged(t)
	recs, err := bench.LoadRecords(filepath.Join("..", "..", "examples", "bench"), rows[:3])
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[rows[2].Sample].TurnIdx != rows[2].TurnIdx {
		t.Errorf("loaded %d records", len(recs))
	}
	_, err = bench.LoadRecords("no-such-dir", rows[:1])
	if err == nil {
		t.Error("missing data dir must be an error")
	}
}

// TestLoadRecordsFromOneDataFile covers a run whose --data was a single
// file: the rows' files are that file, not files inside it.
func TestLoadRecordsFromOneDataFile(t *testing.T) {
	rows := exampleJudged(t)
	var want []*bench.Judged
	for _, r := range rows {
		if r.File == rows[0].File {
			want = append(want, r)
		}
	}
	recs, err := bench.LoadRecords(filepath.Join("..", "..", "examples", "bench", filepath.Base(rows[0].File)), rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(want) {
		t.Errorf("loaded %d records, want the %d of %s", len(recs), len(want), rows[0].File)
	}
}
