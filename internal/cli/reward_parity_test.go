package cli

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/parquet-go/parquet-go"
	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/trainset"
)

// parityJudge answers as the model under test ("wm"), with a prediction
// unique to the request, and as a judge ("judge") with a valid verdict.
func parityJudge(r *fakellm.Request) fakellm.Reply {
	if r.Model == "judge" {
		return fakellm.Reply{Content: "```json\n{\"scores\": {\"format\": 4, \"factuality\": 3, \"consistency\": 4, \"realism\": 4, \"quality\": 3}}\n```"}
	}
	h := sha256.Sum256([]byte(r.Messages[len(r.Messages)-1].Content))
	return fakellm.Reply{Content: "<think>x</think><predicted_observation>PRED-" + hex.EncodeToString(h[:6]) + "</predicted_observation>"}
}

// chatML renders messages as Qwen's chat template does, with the
// generation prompt: the text OpenRLHF sends as a prompt.
func chatML(msgs []expand.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
	}
	return b.String() + "<|im_start|>assistant\n"
}

// TestRewardJudgesWhatBenchJudges is the RL reward's acceptance: a
// multi-turn AgentWorldBench sample, converted to trajectories and exported
// as an RL row, then sent to the reward server the way each trainer sends
// it, makes a judge request equal byte for byte to the one `bench run`
// makes for the same record and prediction.
//
// It holds with agentworld's judge text and with a prompts directory in
// the official layout (--prompts on both sides).
func TestRewardJudgesWhatBenchJudges(t *testing.T) {
	srv := fakellm.New(parityJudge)
	defer srv.Close()
	for _, tc := range []struct{ name, prompts string }{
		{"own text", ""},
		{"official layout", testkit.WriteOfficialPrompts(t, testkit.OfficialTemplates)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.Reset()
			rewardParity(t, srv, tc.prompts)
		})
	}
}

func rewardParity(t *testing.T, srv *fakellm.Server, prompts string) {
	var promptArgs []string
	if prompts != "" {
		promptArgs = []string{"--prompts", prompts}
	}
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	if _, stderr, err := runBenchCLI(t, append([]string{"bench", "run", "--data", "../../examples/bench", "--model-url", srv.URL, "--model", "wm",
		"--judge-url", srv.URL, "--judge-model", "judge", "--out", runDir}, promptArgs...)...); err != nil {
		t.Fatalf("bench run: %v\n%s", err, stderr)
	}
	// The bench judge request of every prediction, by the prediction text.
	benchReq := map[string][]byte{}
	for _, r := range srv.Requests() {
		if r.Model != "judge" {
			continue
		}
		user := r.Messages[len(r.Messages)-1].Content
		i := strings.Index(user, "PRED-")
		b, _ := json.Marshal(r.Body)
		benchReq[user[i:i+len("PRED-")+12]] = b
	}
	type key struct {
		domain, id string
		turn       int
	}
	generation := map[key]string{}
	f, err := os.Open(filepath.Join(runDir, bench.PredictionsFile))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var p bench.Prediction
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		generation[key{p.Domain, p.ID, p.TurnIdx}] = p.Generation
	}
	f.Close()

	// The same data as RL rows, one turn per trajectory: several seeds
	// draw different turns.
	files, _ := filepath.Glob(filepath.Join("..", "..", "examples", "bench", "*_test.jsonl"))
	traj := filepath.Join(dir, "traj.jsonl")
	if _, stderr, err := runCLI(t, append([]string{"data", "convert", "--from", "bench", "-o", traj}, files...)...); err != nil {
		t.Fatalf("data convert: %v\n%s", err, stderr)
	}
	var rows []trainset.RLRow
	seen := map[key]bool{}
	for seed := range 12 {
		out := filepath.Join(dir, fmt.Sprintf("rl%d.parquet", seed))
		if _, stderr, err := runCLI(t, "data", "export", "--mode", "rl", "--seed", fmt.Sprint(seed), "-o", out, traj); err != nil {
			t.Fatalf("data export: %v\n%s", err, stderr)
		}
		got, err := parquet.ReadFile[trainset.RLRow](out)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range got {
			k := key{row.ExtraInfo.Domain, row.ExtraInfo.TrajectoryID, int(row.ExtraInfo.Turn)}
			if _, ok := generation[k]; ok && row.ExtraInfo.Turn >= 2 && !seen[k] {
				seen[k] = true
				rows = append(rows, row)
			}
		}
	}
	t.Logf("%d multi-turn RL rows matched to bench records", len(rows))
	if len(rows) < 4 {
		t.Fatalf("%d multi-turn RL rows match a bench record, want at least 4", len(rows))
	}

	// The reward server as `reward serve` builds it, against the same
	// judge; a fresh one per request, so no verdict comes from the cache.
	var rf rewardFlags
	cmd := &cobra.Command{}
	rf.register(cmd)
	if err := cmd.ParseFlags(append([]string{"--judge-url", srv.URL, "--judge-model", "judge"}, promptArgs...)); err != nil {
		t.Fatal(err)
	}
	newServer := func() *httptest.Server {
		s, err := rf.scorer(cmd, nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := reward.NewHandler(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		return httptest.NewServer(h)
	}

	for _, row := range rows {
		k := key{row.ExtraInfo.Domain, row.ExtraInfo.TrajectoryID, int(row.ExtraInfo.Turn)}
		gen := generation[k]
		pred := gen[strings.Index(gen, "PRED-"):][:len("PRED-")+12]
		want, ok := benchReq[pred]
		if !ok {
			t.Fatalf("%v: no bench judge request for %s", k, pred)
		}
		truth := row.RewardModel.GroundTruth
		label, _ := json.Marshal(map[string]string{"ground_truth": truth, "data_source": row.DataSource})
		var withoutSystem []map[string]string
		for _, m := range row.Prompt[1:] {
			withoutSystem = append(withoutSystem, map[string]string{"role": m.Role, "content": m.Content})
		}
		extra, _ := json.Marshal(row.ExtraInfo)
		routes := []struct {
			name, path string
			body       any
		}{
			// The native batch API (the Python shims): the prompt as messages.
			{"batch messages", reward.BatchPath, map[string]any{"items": []any{map[string]any{
				"id": "x", "data_source": row.DataSource, "prompt": row.Prompt, "response": gen, "ground_truth": truth}}}},
			// verl's compute_score has extra_info, not the prompt.
			{"batch extra_info (verl)", reward.BatchPath, map[string]any{"items": []any{map[string]any{
				"id": "x", "data_source": row.DataSource, "response": gen, "ground_truth": truth, "extra_info": json.RawMessage(extra)}}}},
			// OpenRLHF: the prompt rendered by the chat template, the query
			// prompt and response together.
			{"openrlhf", reward.GetRewardPath, map[string]any{"query": []string{chatML(row.Prompt) + gen},
				"prompts": []string{chatML(row.Prompt)}, "labels": []string{string(label)}}},
			// slime: the prompt as messages, or rendered.
			{"slime messages", reward.SlimePath, map[string]any{"prompt": row.Prompt, "response": gen, "label": string(label)}},
			{"slime text", reward.SlimePath, map[string]any{"prompt": chatML(row.Prompt), "response": gen, "label": string(label)}},
			// NeMo Gym: Responses API input items and output.
			{"nemo gym", reward.VerifyPath, map[string]any{
				"responses_create_params": map[string]any{"input": withoutSystem},
				"response": map[string]any{"output": []any{map[string]any{"type": "message", "role": "assistant",
					"content": []any{map[string]any{"type": "output_text", "text": gen}}}}},
				"ground_truth": truth, "data_source": row.DataSource}},
		}
		for _, rt := range routes {
			before := srv.Count()
			b, _ := json.Marshal(rt.body)
			rsrv := newServer()
			resp, err := rsrv.Client().Post(rsrv.URL+rt.path, "application/json", strings.NewReader(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			rsrv.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%v %s: status %d", k, rt.name, resp.StatusCode)
			}
			reqs := srv.Requests()
			if len(reqs) != before+1 {
				t.Fatalf("%v %s: %d judge calls, want 1", k, rt.name, len(reqs)-before)
			}
			got, _ := json.Marshal(reqs[len(reqs)-1].Body)
			if string(got) != string(want) {
				t.Errorf("%v %s: judge request differs from bench's:\n%s", k, rt.name, cmp.Diff(string(want), string(got)))
			}
		}
	}
}
