package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/labels"
	"github.com/agentworld/agentworld/internal/score"
)

// writeJudgedRun writes a run directory whose judged rows score every
// dimension of every sample at level (1..5).
func writeJudgedRun(t *testing.T, dir, model, judge string, level int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range 6 {
		j := bench.Judged{Prediction: bench.Prediction{Sample: fmt.Sprintf("s%d", i), Task: "terminal", Domain: "terminal", ID: fmt.Sprint(i), TurnIdx: 1, Model: model, Prediction: "ok"},
			Judge: judge, Scores: &score.Scores{Format: level, Factuality: level, Consistency: level, Realism: level, Quality: level}}
		line, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(filepath.Join(dir, bench.JudgedFile), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBenchAgree(t *testing.T) {
	root := t.TempDir()
	var runs []string
	levels := map[string][]int{"gpt-judge": {5, 4, 3, 2}, "claude-judge": {5, 3, 4, 2}}
	for _, j := range []string{"gpt-judge", "claude-judge"} {
		for mi, lv := range levels[j] {
			dir := filepath.Join(root, fmt.Sprintf("%s-m%d", j, mi))
			writeJudgedRun(t, dir, fmt.Sprintf("qwen-m%d", mi), j, lv)
			runs = append(runs, dir)
		}
	}
	db := filepath.Join(root, "labels.db")
	d, err := labels.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		l := labels.Label{Run: "x", Sample: fmt.Sprintf("s%d", i), Model: "qwen-m0", Scores: score.Scores{Format: 5, Factuality: 5 - i%2, Consistency: 5, Realism: 4, Quality: 5}}
		if err := d.Add(context.Background(), &l); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	stdout, stderr, err := runCLI(t, append([]string{"bench", "agree", "--labels", db, "--resamples", "50"}, runs...)...)
	if err != nil {
		t.Fatalf("bench agree: %v\n%s", err, stderr)
	}
	// Four models, one swap of the middle two: ρ = 1 − 6·2/60 = 0.8,
	// τ = (5 − 1)/6 ≈ 0.667.
	for _, want := range []string{"claude-judge vs gpt-judge", "0.800", "0.667", "Agreement with people (6 label(s)", "Rankings"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if _, _, err := runCLI(t, "bench", "agree", filepath.Join(root, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing run: err = %v", err)
	}
}
