package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// TestRewardScoreWithJudge scores a file through the CLI against a judge
// server speaking the OpenAI protocol, then runs again to resume.
func TestRewardScoreWithJudge(t *testing.T) {
	judgeSrv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: "<final_evaluation>```json\n{\"scores\": {\"format\": 5, \"factuality\": 4, \"consistency\": 4, \"realism\": 4, \"quality\": 3}}\n```</final_evaluation>"}
	})
	defer judgeSrv.Close()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "items.jsonl"), filepath.Join(dir, "results.jsonl")
	items := []reward.Item{
		{ID: "a", DataSource: "agentworld/terminal", Response: "<predicted_observation>$ ls\na.txt\n$</predicted_observation>", GroundTruth: "$ ls\na.txt\n$"},
		{ID: "b", DataSource: "agentworld/terminal", Response: "<think>only thinking", GroundTruth: "$ ls\na.txt\n$"},
	}
	var b strings.Builder
	for _, it := range items {
		line, _ := json.Marshal(it)
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"reward", "score", "--in", in, "--out", out, "--judge-url", judgeSrv.URL, "--judge-model", "claude-judge", "--policy-model", "Qwen3.5-35B-A3B", "--json"}
	stdout, _, err := runCLI(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Summary reward.FileSummary `json:"summary"`
		Stats   reward.Stats       `json:"stats"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if got.Summary.Scored != 2 || got.Summary.Failed != 1 || got.Stats.JudgeCalls != 1 {
		t.Errorf("%+v", got)
	}
	res, _ := os.ReadFile(out)
	// 4 of 5 on average: rubric 20; the rule passes: 0.9·20 + 0.1·25.
	if !strings.Contains(string(res), `"score":20.5`) || !strings.Contains(string(res), `"reason":"no answer`) {
		t.Errorf("results:\n%s", res)
	}
	stdout, _, err = runCLI(t, args...)
	if err != nil || !strings.Contains(stdout, `"resumed": 2`) {
		t.Errorf("resume: %v %s", err, stdout)
	}
}

func TestRewardFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"reward", "score", "--in", "x", "--out", "y", "--judge-url", "http://127.0.0.1:1/v1"}, "--judge-url needs --judge-model"},
		{[]string{"reward", "score", "--in", "x", "--out", "y", "--judge-url", "http://127.0.0.1:1/v1", "--judge-model", "qwen3-235b", "--policy-model", "Qwen/Qwen3.5-35B-A3B"}, "same family"},
		{[]string{"reward", "score", "--in", "x", "--out", "y", "--mix", "mean"}, "reward mix"},
		{[]string{"reward", "score", "--out", "y"}, "--in"},
		{[]string{"reward", "score", "--in", "x", "--out", "y", "--rubric-weight", "9", "--rule-weight", "1"}, "--rubric-weight 9 and --rule-weight 1"},
		{[]string{"reward", "serve", "--addr", "127.0.0.1:0", "--rubric-weight", "0.9", "--rule-weight", "0.2"}, "--rubric-weight 0.9 and --rule-weight 0.2"},
		// drop cannot be said on /get_reward, /slime, /verify: refused at
		// startup, before anything listens.
		{[]string{"reward", "serve", "--addr", "127.0.0.1:0", "--on-judge-failure", "drop"}, "--on-judge-failure drop: the judge-failure policy drop leaves items without a score, which /get_reward"},
	} {
		_, _, err := runCLI(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
	}
}
