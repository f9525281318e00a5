package rejection

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/trajectory"
)

func TestSummarize(t *testing.T) {
	scoredBeam := func(seq int64, domain string, beam int, v float64, rule, kept, chosen bool) Candidate {
		r := &reward.Result{Score: &v}
		r.Components.RuleChecks = []reward.Check{{Name: "deterministic", Pass: rule}}
		if rule {
			r.Components.Rule = reward.RuleScale
		}
		return Candidate{ID: "x", Seq: seq, Domain: domain, Beam: beam, Reward: r, Kept: kept, Chosen: chosen}
	}
	cands := []Candidate{
		scoredBeam(0, "terminal", 1, 25, true, true, true),
		scoredBeam(0, "terminal", 2, 4, false, false, false),
		scoredBeam(1, "terminal", 1, 12.5, false, false, false),
		{ID: "y", Seq: 1, Domain: "terminal", Beam: 2, Error: "refused"},
		scoredBeam(2, "mcp", 1, 20, false, true, false),
		scoredBeam(2, "mcp", 2, 19.9, false, false, false),
	}
	var buf bytes.Buffer
	for _, c := range cands {
		b, err := trajectory.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	path := filepath.Join(t.TempDir(), CandidatesFile)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Summarize(path, DefaultPolicy, 2, TargetTeacher)
	if err != nil {
		t.Fatal(err)
	}
	h := func(bins map[int]int64) []int64 {
		out := make([]int64, HistogramBins)
		for i, v := range bins {
			out[i] = v
		}
		return out
	}
	// The mcp beam kept at 20 is factually wrong (its deterministic check
	// failed): its teacher target differs from the truth.
	want := Counts{Samples: 3, Kept: 2, KeepRate: 2.0 / 3, Beams: 6, KeptBeams: 2, FailedBeams: 1, Pairs: 1, RulePass: 1, KeptDiffer: 1, KeptTargetsDiffer: 1,
		Histogram: h(map[int]int64{9: 1, 1: 1, 5: 1, 8: 1, 7: 1}), KeptHistogram: h(map[int]int64{9: 1, 8: 1}), BestHistogram: h(map[int]int64{9: 1, 5: 1, 8: 1})}
	if diff := cmp.Diff(want, s.Total); diff != "" {
		t.Errorf("total (-want +got):\n%s", diff)
	}
	if d := s.Domains["terminal"]; d == nil || d.Samples != 2 || d.Kept != 1 || d.KeepRate != 0.5 || d.FailedBeams != 1 {
		t.Errorf("terminal %+v", d)
	}
	s.Judge = "rules"
	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"judge rules (offline rules judge", "input → kept: 3 → 2 samples (66.7%)", Published, "mcp ", "terminal ",
		"1 of 2 kept differ from the real observation after volatile masking"} {
		if !strings.Contains(text.String(), must) {
			t.Errorf("summary text lacks %q:\n%s", must, text.String())
		}
	}
	// With the real observation as the target, no target differs.
	s, err = Summarize(path, DefaultPolicy, 2, TargetReal)
	if err != nil || s.Total.KeptDiffer != 1 || s.Total.KeptTargetsDiffer != 0 || s.Target != TargetReal {
		t.Errorf("--target real: %+v %v", s.Total, err)
	}
}
