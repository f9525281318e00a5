package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// TestGroupOfEightForks: one reset, eight forks. Every member's first
// policy request is the same bytes, every world-model request repeats the
// root's prompt byte for byte before its own action, rewards come from the
// world's reward section, and token fields arrive in the output exactly as
// the policy server wrote them.
func TestGroupOfEightForks(t *testing.T) {
	m, model := fakeWorld(t)
	var n atomic.Int64
	pol := newFakePolicy(t, func(msgs []Message) string {
		for _, m := range msgs {
			if m.Role == "tool" {
				return ""
			}
		}
		return fmt.Sprintf(`{"key":"WS-%d"}`, n.Add(1))
	})
	dir := t.TempDir()
	tasks := []Task{{ID: "triage", World: "tracker", Instruction: "Find a closed issue."}}
	res, err := Run(context.Background(), Embedded{M: m}, tasks, dir, &Options{
		Policy:    &Policy{URL: pol.srv.URL + "/s/{session_id}/v1", Model: "pol"},
		GroupSize: 8, MaxInFlight: 8,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 8 || res.Failed != 0 || res.Resumed != 0 {
		t.Fatalf("result %+v", res)
	}
	rows, err := readRows(filepath.Join(dir, EpisodesFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 8 {
		t.Fatalf("%d rows, want 8", len(rows))
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].SampleIdx < rows[j].SampleIdx })
	parent := rows[0].ForkParent
	seen := map[string]bool{}
	passes := 0
	for i, r := range rows {
		if r.SampleIdx != i || r.GroupID != "triage" || r.TaskID != "triage" {
			t.Errorf("row %d: group %q sample %d", i, r.GroupID, r.SampleIdx)
		}
		if r.ForkParent == "" || r.ForkParent != parent || r.EnvSessionID == parent || seen[r.EnvSessionID] {
			t.Errorf("row %d: session %q parent %q (first parent %q)", i, r.EnvSessionID, r.ForkParent, parent)
		}
		seen[r.EnvSessionID] = true
		if !r.Terminated || r.StopReason != StopTerminated || r.NumTurns != 2 || r.LWMModel != "fake-lwm" || r.PromptVersion != PromptVersion {
			t.Errorf("row %d: terminated %v stop %q turns %d lwm %q", i, r.Terminated, r.StopReason, r.NumTurns, r.LWMModel)
		}
		// Odd issues are closed: the success rule pays 1.
		if r.Reward == 1 {
			passes++
			if diff := cmp.Diff(map[string]float64{"success": 1}, r.RewardComponents); diff != "" {
				t.Errorf("row %d components (-want +got):\n%s", i, diff)
			}
		}
		for k, tr := range r.Turns {
			p, g, lp := policyTurn(k)
			got := []string{string(tr.PromptTokenIDs), string(tr.GenerationTokenIDs), string(tr.GenerationLogProbs)}
			if diff := cmp.Diff([]string{p, g, lp}, got); diff != "" {
				t.Errorf("row %d turn %d token fields (-want +got):\n%s", i, k, diff)
			}
		}
		wantRoles := []string{"system", "user", "assistant", "tool", "assistant"}
		var roles []string
		for _, m := range r.Messages {
			roles = append(roles, m.Role)
		}
		if diff := cmp.Diff(wantRoles, roles); diff != "" {
			t.Errorf("row %d roles (-want +got):\n%s", i, diff)
		}
		if !strings.Contains(r.Messages[3].Content, "status") || r.Messages[3].ToolCallID != "call_0" {
			t.Errorf("row %d tool message %+v", i, r.Messages[3])
		}
	}
	if passes != 4 {
		t.Errorf("%d passes, want 4", passes)
	}
	g := res.Summary.Groups[0]
	if g.N != 8 || g.Passed != 4 || g.RewardMean != 0.5 || g.RewardStd != 0.5 || math.Abs(g.PassAt1-0.5) > 1e-9 || g.PassAtK != 1 {
		t.Errorf("group summary %+v", g)
	}

	// The world model saw one request per fork (the final answer needs
	// none), each the root's prompt plus its own action.
	reqs := model.Requests()
	if len(reqs) != 8 {
		t.Fatalf("world model got %d requests, want 8", len(reqs))
	}
	prefix := func(r int) string {
		b, _ := json.Marshal(reqs[r].Messages[:len(reqs[r].Messages)-1])
		return string(b)
	}
	actions := map[string]bool{}
	for i := range reqs {
		if prefix(i) != prefix(0) {
			t.Errorf("world-model request %d prefix differs from request 0's:\n%s\n%s", i, prefix(i), prefix(0))
		}
		actions[reqs[i].Messages[len(reqs[i].Messages)-1].Content] = true
	}
	if len(actions) != 8 {
		t.Errorf("%d distinct actions, want 8", len(actions))
	}

	// Every member's first policy request is the same bytes, sent to its
	// own session's URL.
	var first [][]byte
	for _, r := range pol.requests() {
		if !bytes.Contains(r.Body, []byte(`"assistant"`)) {
			first = append(first, r.Body)
			id := strings.TrimSuffix(strings.TrimPrefix(r.Path, "/s/"), "/v1/chat/completions")
			if !seen[id] {
				t.Errorf("policy path %q names no episode's session", r.Path)
			}
		}
	}
	if len(first) != 8 {
		t.Fatalf("%d first requests, want 8", len(first))
	}
	for i := range first {
		if !bytes.Equal(first[i], first[0]) {
			t.Errorf("first policy request %d differs:\n%s\n%s", i, first[i], first[0])
		}
	}
	if !bytes.Contains(first[0], []byte(`"tools":[{"type":"function","function":{"name":"get_issue"`)) {
		t.Errorf("tools not sent: %s", first[0])
	}
	// Every later request repeats the root's messages byte for byte before
	// its own (a prefix a policy server's cache can share), and is valid
	// JSON.
	end := bytes.Index(first[0], []byte(`],"model":`))
	if end < 0 {
		t.Fatalf("no messages array in %s", first[0])
	}
	root := first[0][:end]
	for _, r := range pol.requests() {
		if !bytes.HasPrefix(r.Body, append(root[:len(root):len(root)], ',')) && !bytes.Equal(r.Body, first[0]) {
			t.Errorf("policy request does not start with the root's messages:\n%s\n%s", r.Body, root)
		}
		if !json.Valid(r.Body) {
			t.Errorf("policy request is not JSON: %s", r.Body)
		}
	}
	if m.Len() != 0 {
		t.Errorf("%d sessions left open", m.Len())
	}
}

// TestMaxTurnsAndBadActions: a policy that keeps sending malformed calls is
// told why and stopped at the turn limit, with no simulator step taken.
func TestMaxTurnsAndBadActions(t *testing.T) {
	m, model := fakeWorld(t)
	pol := newFakePolicy(t, func([]Message) string { return `{"key":` })
	dir := t.TempDir()
	res, err := Run(context.Background(), Embedded{M: m}, []Task{{ID: "t", World: "tracker", MaxTurns: 3}}, dir, &Options{
		Policy: &Policy{URL: pol.srv.URL + "/v1", Model: "pol"}, GroupSize: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := readRows(filepath.Join(dir, EpisodesFile))
	if res.Done != 2 || len(rows) != 2 {
		t.Fatalf("done %d rows %d", res.Done, len(rows))
	}
	for _, r := range rows {
		if r.StopReason != StopMaxTurns || !r.Truncated || r.Terminated || r.NumTurns != 3 || len(r.Turns) != 3 {
			t.Errorf("row: stop %q truncated %v turns %d", r.StopReason, r.Truncated, r.NumTurns)
		}
		if last := r.Messages[len(r.Messages)-1]; last.Role != "tool" || !strings.HasPrefix(last.Content, "invalid action") {
			t.Errorf("last message %+v", last)
		}
	}
	if model.Count() != 0 {
		t.Errorf("world model asked %d times", model.Count())
	}
}

// TestPolicyFailureIsRetriedByRerun: an episode whose policy call fails is
// not written; Run says so, and the rerun computes only it.
func TestPolicyFailureIsRetriedByRerun(t *testing.T) {
	m, _ := fakeWorld(t)
	pol := newFakePolicy(t, byInstruction)
	failing := &Policy{URL: pol.srv.URL + "/v1", Model: "pol"}
	tasks := []Task{{ID: "a", World: "tracker", Instruction: "Check WS-3."}}
	dir := t.TempDir()
	// A policy address nobody listens on: every call fails.
	bad := &Policy{URL: "http://127.0.0.1:1/v1", Model: "pol"}
	res, err := Run(context.Background(), Embedded{M: m}, tasks, dir, &Options{Policy: bad, GroupSize: 2})
	if err == nil || res.Failed != 2 || res.Done != 0 {
		t.Fatalf("err %v result %+v", err, res)
	}
	res, err = Run(context.Background(), Embedded{M: m}, tasks, dir, &Options{Policy: failing, GroupSize: 2})
	if err != nil || res.Done != 2 || res.Resumed != 0 {
		t.Fatalf("rerun: err %v result %+v", err, res)
	}
	res, err = Run(context.Background(), Embedded{M: m}, tasks, dir, &Options{Policy: failing, GroupSize: 2})
	if err != nil || res.Done != 0 || res.Resumed != 2 || res.Summary.Episodes != 2 {
		t.Fatalf("third run: err %v result %+v", err, res)
	}
	if m.Len() != 0 {
		t.Errorf("%d sessions left open", m.Len())
	}
}

func TestLoadTasks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write("a.jsonl", `{"id":"x","world":"tracker","instruction":"go","max_turns":4}`+"\n\n"+`{"id":"y","world":"tracker"}`+"\n")
	got, err := LoadTasks(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Task{{ID: "x", World: "tracker", Instruction: "go", MaxTurns: 4}, {ID: "y", World: "tracker"}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, c := range []struct{ in, want string }{
		{`{"world":"w"}`, "b.jsonl:1: id: missing"},
		{`{"id":"a"}`, "b.jsonl:1: world: missing"},
		{`{"id":"a","world":"w"}` + "\n" + `{"id":"a","world":"w"}`, `b.jsonl:2: id: "a" already used at`},
		{`{"id":"a","world":"w","wrold":1}`, `b.jsonl:1: json: unknown field "wrold"`},
		{"", "no tasks"},
	} {
		_, err := LoadTasks(write("b.jsonl", c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want %q", c.in, err, c.want)
		}
	}
	if _, err := LoadTasks(dir); err != nil { // a.jsonl then b.jsonl (now empty)
		t.Errorf("dir: %v", err)
	}
}

func TestPassAt(t *testing.T) {
	for _, c := range []struct {
		n, c, k int
		want    float64
	}{{8, 0, 1, 0}, {8, 8, 1, 1}, {8, 4, 1, 0.5}, {8, 1, 8, 1}, {4, 1, 2, 0.5}} {
		if got := passAt(c.n, c.c, c.k); fmt.Sprintf("%.6f", got) != fmt.Sprintf("%.6f", c.want) {
			t.Errorf("pass@%d n=%d c=%d: %v, want %v", c.k, c.n, c.c, got, c.want)
		}
	}
}

// TestMalformedTextActionTakesNoTurn: an action that is valid JSON but no
// tool call (the simulator refuses it) is answered with the parser's
// error and costs no simulator turn, so the agent's next, valid call is
// the session's turn 1 and the episode goes on to its reward.
func TestMalformedTextActionTakesNoTurn(t *testing.T) {
	m, model := fakeWorld(t)
	pol := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		switch n := len(r.Messages); {
		case n <= 2:
			return fakellm.Reply{Content: `{"name": "", "arguments": {}}`}
		case n <= 4:
			return fakellm.Reply{Content: `{"name": "get_issue", "arguments": {"key": "WS-3"}}`}
		}
		return fakellm.Reply{Content: "WS-3 is closed."}
	})
	t.Cleanup(pol.Close)
	dir := t.TempDir()
	res, err := Run(context.Background(), Embedded{M: m}, []Task{{ID: "t", World: "tracker"}}, dir, &Options{
		Policy: &Policy{URL: pol.URL, Model: "pol"}, GroupSize: 1,
	})
	if err != nil || res.Done != 1 {
		t.Fatalf("err %v result %+v", err, res)
	}
	rows, err := readRows(filepath.Join(dir, EpisodesFile))
	if err != nil {
		t.Fatal(err)
	}
	r := rows[0]
	if r.NumTurns != 3 || r.StopReason != StopTerminated || r.Reward != 1 {
		t.Errorf("turns %d stop %q reward %v", r.NumTurns, r.StopReason, r.Reward)
	}
	if got := r.Messages[3].Content; !strings.HasPrefix(got, "Observation:\ninvalid action: ") || !strings.Contains(got, "missing tool name") {
		t.Errorf("answer to the malformed action: %q", got)
	}
	if model.Count() != 1 {
		t.Errorf("world model asked %d times, want 1", model.Count())
	}
}

// TestRerunWithOtherSettingsRefused: a run directory is pinned to the
// settings of its first run; a rerun changing the policy model, its
// sampling or the group shape is refused (nothing run, nothing written)
// instead of mixing two runs' episodes, and a rerun with the same
// settings resumes.
func TestRerunWithOtherSettingsRefused(t *testing.T) {
	m, _ := fakeWorld(t)
	pol := newFakePolicy(t, byInstruction)
	tasks := []Task{{ID: "a", World: "tracker", Instruction: "Check WS-3."}}
	dir := t.TempDir()
	base := func() *Options {
		return &Options{Policy: &Policy{URL: pol.srv.URL + "/v1", Model: "pol"}, GroupSize: 2}
	}
	if _, err := Run(context.Background(), Embedded{M: m}, tasks, dir, base()); err != nil {
		t.Fatal(err)
	}
	hot := 1.5
	for name, change := range map[string]func(o *Options){
		"policy model":       func(o *Options) { o.Policy.Model = "other" },
		"policy temperature": func(o *Options) { o.Policy.Temperature = &hot },
		"group size":         func(o *Options) { o.GroupSize = 3 },
		"episode turns":      func(o *Options) { o.MaxTurns = 5 },
	} {
		o := base()
		change(o)
		res, err := Run(context.Background(), Embedded{M: m}, tasks, dir, o)
		if !errors.Is(err, ErrSettingsChanged) || res != nil {
			t.Errorf("%s changed: %v %+v, want ErrSettingsChanged", name, err, res)
		}
	}
	res, err := Run(context.Background(), Embedded{M: m}, tasks, dir, base())
	if err != nil || res.Resumed != 2 || res.Done != 0 {
		t.Fatalf("same settings: %v %+v", err, res)
	}
}
