package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/trajectory"
)

const fixedVerdict = "<final_evaluation>```json\n{\"scores\":{\"format\":5,\"factuality\":4,\"consistency\":4,\"realism\":5,\"quality\":4}}\n```</final_evaluation>"

// TestBenchRunWithOfficialPrompts: with --prompts the judge gets the text
// of the checkout in the official structure, run.json and the report name
// it with each file's SHA-256, a checkout that differs from the pinned
// commit is warned about, and compare refuses to set such a run beside one
// judged with agentworld's text.
func TestBenchRunWithOfficialPrompts(t *testing.T) {
	prompts := testkit.WriteOfficialPrompts(t, testkit.OfficialTemplates)
	const gen = "<predicted_observation>\n**Environment Observation:**\nok\n</predicted_observation>"
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		if r.Model == "judge" {
			return fakellm.Reply{Content: fixedVerdict}
		}
		return fakellm.Reply{Content: gen}
	})
	defer srv.Close()
	data := filepath.Join("..", "..", "examples", "bench", "terminal_test.jsonl")
	official, own := filepath.Join(t.TempDir(), "official"), filepath.Join(t.TempDir(), "own")
	stdout, stderr, err := runBenchCLI(t, "bench", "run", "--data", data, "--model-url", srv.URL, "--model", "wm",
		"--judge-url", srv.URL, "--judge-model", "judge", "--out", official, "--prompts", prompts)
	if err != nil {
		t.Fatalf("bench run: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "warning: --prompts") || !strings.Contains(stderr, "differ from the official commit "+judge.OfficialCommit) {
		t.Errorf("no warning about unpinned files:\n%s", stderr)
	}
	if !strings.Contains(stdout, "judge prompts: official (sha256 ") || !strings.Contains(stdout, "prompts/web/judge_system_prompt.txt") {
		t.Errorf("report does not name the official text and its files:\n%s", stdout)
	}

	// Every judge request is what judge.Messages builds with the checkout.
	p, err := judge.LoadPrompts(prompts)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := trajectory.ReadFile(data, false)
	if err != nil {
		t.Fatal(err)
	}
	var judged []fakellm.Message
	for _, r := range srv.Requests() {
		if r.Model == "judge" && strings.Contains(r.Messages[1].Content, recs[0].CurrentPrompt) && strings.HasPrefix(r.Messages[1].Content, "# Current Turn:") {
			judged = r.Messages
		}
	}
	want, _ := judge.Messages(p, recs[0], conversation.ExtractPrediction(gen))
	if len(judged) != 2 || cmp.Diff(want[1].Content, judged[1].Content) != "" || want[0].Content != judged[0].Content ||
		want[0].Content != "You judge terminal observations.\nBe fair.\n" {
		t.Errorf("judge request of the first turn differs:\n%s", cmp.Diff(want, judged))
	}

	var meta struct {
		Judge struct {
			Prompts struct {
				Label    string `json:"label"`
				Files    []struct{ Path, SHA256 string }
				Unpinned []string `json:"unpinned"`
			} `json:"prompts"`
		} `json:"judge"`
	}
	b, err := os.ReadFile(filepath.Join(official, bench.RunFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if len(meta.Judge.Prompts.Files) != 8 || len(meta.Judge.Prompts.Unpinned) != 8 || !strings.HasPrefix(meta.Judge.Prompts.Label, "official") {
		t.Errorf("run.json prompts: %+v", meta.Judge.Prompts)
	}
	sum, _ := judge.HashFile(filepath.Join(prompts, "prompts", "mcp", "judge_system_prompt.txt"))
	if !strings.Contains(string(b), sum) {
		t.Error("run.json lacks the SHA-256 of prompts/mcp/judge_system_prompt.txt")
	}

	// The same run with agentworld's text says so, and compare refuses to
	// mix them unless told.
	stdout, stderr, err = runBenchCLI(t, "bench", "run", "--data", data, "--model-url", srv.URL, "--model", "wm",
		"--judge-url", srv.URL, "--judge-model", "judge", "--out", own)
	if err != nil {
		t.Fatalf("bench run: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "judge prompts: "+judge.OwnLabel) {
		t.Errorf("report of a run with our text:\n%s", stdout)
	}
	if out, _, _ := runBenchCLI(t, "bench", "score", "--judged", filepath.Join(own, bench.JudgedFile), "--json"); !strings.Contains(out, `"judge_prompts": [
    "agentworld (not the official text)"
  ]`) {
		t.Errorf("score --json:\n%s", out)
	}
	if _, _, err := runBenchCLI(t, "bench", "compare", own, official); err == nil || !strings.Contains(err.Error(), "different judge texts") {
		t.Errorf("compare of our text against the official one: %v", err)
	}
	if out, _, err := runBenchCLI(t, "bench", "compare", "--mixed-judges", own, official); err != nil || !strings.Contains(out, "different texts") {
		t.Errorf("compare --mixed-judges: %v\n%s", err, out)
	}
	// Resuming a run directory with another text is refused.
	if _, _, err := runBenchCLI(t, "bench", "run", "--data", data, "--model-url", srv.URL, "--model", "wm",
		"--judge-url", srv.URL, "--judge-model", "judge", "--out", official); err == nil || !strings.Contains(err.Error(), "judge prompts official") {
		t.Errorf("resume with another text: %v", err)
	}
}

// TestPromptsFlagBadInput: a checkout without a domain's file or with an
// unknown placeholder is refused before anything runs, naming the file.
func TestPromptsFlagBadInput(t *testing.T) {
	missing := testkit.WriteOfficialPrompts(t, testkit.OfficialTemplates)
	if err := os.Remove(filepath.Join(missing, "prompts", "android", "judge_system_prompt.txt")); err != nil {
		t.Fatal(err)
	}
	unknown := testkit.WriteOfficialPrompts(t, strings.Replace(testkit.OfficialTemplates, "{ground_truth}\n\nRate", "{truth}\n\nRate", 1))
	data := filepath.Join("..", "..", "examples", "bench", "terminal_test.jsonl")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "judge", "--predictions", "p.jsonl", "--data", data, "--judge-url", "http://127.0.0.1:1", "--judge-model", "j", "--prompts", missing}, filepath.Join("prompts", "android", "judge_system_prompt.txt")},
		{[]string{"bench", "run", "--data", data, "--model-url", "http://127.0.0.1:1", "--model", "m", "--judge-url", "http://127.0.0.1:1", "--judge-model", "j", "--out", t.TempDir(), "--prompts", unknown}, "task_configs.py:19: JUDGE_USER_PROMPT: unknown placeholder {truth}"},
		{[]string{"bench", "run", "--data", data, "--model-url", "http://127.0.0.1:1", "--model", "m", "--judge", "rules", "--out", t.TempDir(), "--prompts", unknown}, "rules scorer"},
		{[]string{"reward", "score", "--in", "x.jsonl", "--out", filepath.Join(t.TempDir(), "r.jsonl"), "--prompts", missing}, "needs --judge-url"},
		{[]string{"reward", "score", "--in", "x.jsonl", "--out", filepath.Join(t.TempDir(), "r.jsonl"), "--judge-url", "http://127.0.0.1:1", "--judge-model", "j", "--prompts", missing}, filepath.Join("prompts", "android", "judge_system_prompt.txt")},
	} {
		_, _, err := runBenchCLI(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to name %q", strings.Join(tt.args[:2], " "), err, tt.want)
		}
	}
}

// TestBenchJudgeModes: bench run --judge-mode turing --both-orders reports
// the detection rate, position bias and flip rate; compare refuses to set
// it beside a pointwise run; a pairwise mode with the rules scorer is
// refused.
func TestBenchJudgeModes(t *testing.T) {
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		if r.Model == "judge" {
			return fakellm.Reply{Content: "Both look plausible. \\boxed{A}"}
		}
		return fakellm.Reply{Content: "<predicted_observation>ok</predicted_observation>"}
	})
	defer srv.Close()
	data := filepath.Join("..", "..", "examples", "bench")
	turing, point := filepath.Join(t.TempDir(), "turing"), filepath.Join(t.TempDir(), "point")
	stdout, stderr, err := runBenchCLI(t, "bench", "run", "--data", data, "--model-url", srv.URL, "--model", "wm",
		"--judge-url", srv.URL, "--judge-model", "judge", "--out", turing, "--judge-mode", "turing", "--both-orders")
	if err != nil {
		t.Fatalf("bench run: %v\n%s", err, stderr)
	}
	for _, want := range []string{"Turing test", "overall", "50.00", "100.00", "judge prompts: " + judge.OwnLabel} {
		if !strings.Contains(stdout, want) {
			t.Errorf("turing report lacks %q:\n%s", want, stdout)
		}
	}
	b, _ := os.ReadFile(filepath.Join(turing, bench.RunFile))
	if !strings.Contains(string(b), `"mode": "turing"`) || !strings.Contains(string(b), `"both_orders": true`) {
		t.Errorf("run.json:\n%s", b)
	}
	if _, stderr, err := runBenchCLI(t, "bench", "run", "--data", data, "--model-url", srv.URL, "--model", "wm",
		"--judge", "rules", "--out", point); err != nil {
		t.Fatalf("bench run: %v\n%s", err, stderr)
	}
	if _, _, err := runBenchCLI(t, "bench", "compare", "--mixed-judges", point, turing); err == nil || !strings.Contains(err.Error(), "different judge modes") {
		t.Errorf("compare across modes: %v", err)
	}
	if _, _, err := runBenchCLI(t, "bench", "run", "--data", data, "--model-url", srv.URL, "--model", "wm",
		"--judge", "rules", "--out", t.TempDir(), "--judge-mode", "turing"); err == nil || !strings.Contains(err.Error(), "needs an LLM judge") {
		t.Errorf("turing with the rules scorer: %v", err)
	}
	if _, _, err := runBenchCLI(t, "bench", "run", "--data", data, "--model-url", srv.URL, "--model", "wm",
		"--judge-url", srv.URL, "--judge-model", "judge", "--out", t.TempDir(), "--judge-mode", "duel"); err == nil || !strings.Contains(err.Error(), "unknown judge mode") {
		t.Errorf("unknown mode: %v", err)
	}
}

// TestTemplateImportOfficial: template import --official adds the
// checkout's world-model system prompts as a version named after its
// commit, which bench then renders rows under like any other.
func TestTemplateImportOfficial(t *testing.T) {
	checkout := testkit.WriteOfficialPrompts(t, testkit.OfficialTemplates)
	lib := t.TempDir()
	out, stderr, err := runBenchCLI(t, "template", "import", "--official", checkout, "--template-dir", lib)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(out, "added official-0123456") || !strings.Contains(out, "prompts/mcp/system_prompt.txt") || !strings.Contains(stderr, "differ from the official commit") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, stderr)
	}
	if out, _, err := runBenchCLI(t, "template", "import", "--official", checkout, "--template-dir", lib); err != nil || !strings.Contains(out, "already in the library as official-0123456") {
		t.Errorf("second import: %v\n%s", err, out)
	}
	if out, _, err := runBenchCLI(t, "template", "list", "--template-dir", lib); err != nil || !strings.Contains(out, "official-0123456") {
		t.Errorf("list: %v\n%s", err, out)
	}
	if out, _, err := runBenchCLI(t, "template", "show", "official-0123456", "terminal", "--template-dir", lib); err != nil || !strings.Contains(out, "You simulate the terminal environment.") {
		t.Errorf("show: %v\n%s", err, out)
	}
	if _, _, err := runBenchCLI(t, "template", "import", "--template-dir", lib); err == nil {
		t.Error("import without --official accepted")
	}
}
