package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// TestWorldReward steps a world whose spec declares a tool-error penalty
// and a success criterion: the error step is penalized, the step that ends
// the episode ([], answered without the model) earns the success reward
// judged on the last observation, and an episode ending elsewhere earns 0.
func TestWorldReward(t *testing.T) {
	spec := termWorld()
	spec.Reward = &world.Reward{ToolError: -0.25, Success: &world.SuccessRule{FinalObservation: `(?m)^SOLVED$`}}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	var lastTraj func() map[string]json.RawMessage
	run := func(last string) []*StepResult {
		model := &scriptedModel{replies: []worldmodel.Response{
			{Content: `<predicted_observation>{"isError": true, "content": []}</predicted_observation>`, FinishReason: "stop"},
			{Content: "<predicted_observation>" + last + "</predicted_observation>", FinishReason: "stop"},
		}}
		m := New(&Options{
			Worlds:   map[string]*world.Spec{"t": spec},
			Backends: map[string]BackendFactory{BackendModel: NewModelBackend(model, &ModelOptions{MaxTokens: 100})},
		})
		t.Cleanup(func() { _ = m.Close(context.Background()) })
		rep, err := m.Create(context.Background(), CreateRequest{WorldID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		var out []*StepResult
		for _, a := range []string{`[{"keystrokes":"run\n"}]`, `[{"keystrokes":"fix\n"}]`, `[]`} {
			r, err := m.Step(context.Background(), rep.SessionID, StepRequest{Action: json.RawMessage(a)})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		lastTraj = func() map[string]json.RawMessage {
			tr, err := m.Trajectory(context.Background(), rep.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			if string(tr.Turns[0].Meta["reward"]) != "-0.25" || tr.Turns[1].Meta["reward"] != nil {
				t.Errorf("turn rewards %s %s", tr.Turns[0].Meta["reward"], tr.Turns[1].Meta["reward"])
			}
			return tr.Meta
		}
		return out
	}
	type got struct {
		Reward     float64
		Components map[string]float64
	}
	summary := func(rs []*StepResult) []got {
		var g []got
		for _, r := range rs {
			g = append(g, got{r.Reward, r.Info.RewardComponents})
		}
		return g
	}
	solved := summary(run("SOLVED"))
	want := []got{{-0.25, map[string]float64{"tool_error": -0.25}}, {0, nil}, {1, map[string]float64{"success": 1}}}
	if d := cmp.Diff(want, solved); d != "" {
		t.Errorf("solved episode (-want +got):\n%s", d)
	}
	if ret := string(lastTraj()["return"]); ret != "0.75" {
		t.Errorf("episode return %s, want 0.75", ret)
	}
	failed := summary(run("still broken"))
	want[2] = got{0, map[string]float64{"success": 0}}
	if d := cmp.Diff(want, failed); d != "" {
		t.Errorf("failed episode (-want +got):\n%s", d)
	}
}

// TestWorldRewardSuccessJudge ends episodes of a world whose success is
// judged by a model (a fake OpenAI-compatible judge server): a success
// verdict earns the reward, a failure 0, and a judge that never gives a
// parseable verdict earns nothing, with the reason in info.error and
// info.extra.success_judge, after a bounded number of calls.
func TestWorldRewardSuccessJudge(t *testing.T) {
	const (
		yes     = "The file is there.\n<verdict>{\"success\": true, \"reason\": \"hello.txt exists\"}</verdict>"
		no      = "<think>maybe</think>Not done.\n<verdict>{success: false, \"reason\": \"no file\",}</verdict>"
		garbled = "I believe the agent did fine."
	)
	type want struct {
		Reward     float64
		Components map[string]float64
		Verdict    string // info.extra.success_judge
		Calls      int
		ErrHas     string // in info.error; "" means none
	}
	cases := []struct {
		name    string
		sees    string
		answers []string // the judge's answers in turn; the last repeats
		status  int      // the judge's HTTP status, when it fails
		want    want
	}{
		{"success", "", []string{yes}, 0, want{1, map[string]float64{"success": 1}, `{"success":true,"reason":"hello.txt exists","attempts":1}`, 1, ""}},
		{"failure, repaired JSON", "", []string{no}, 0, want{0, map[string]float64{"success": 0}, `{"success":false,"reason":"no file","attempts":1}`, 1, ""}},
		{"parses on the second try", "final_observation", []string{garbled, yes}, 0, want{1, map[string]float64{"success": 1}, `{"success":true,"reason":"hello.txt exists","attempts":2}`, 2, ""}},
		{"never parses", "", []string{garbled}, 0, want{0, nil, `{"success":false,"attempts":3,"error":"no verdict after 3 attempts: judge output unparseable: no JSON verdict found"}`, 3, "success judge: no verdict after 3 attempts"}},
		{"judge down", "", nil, 503, want{0, nil, "", 3, "success judge: no verdict after 3 attempts"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
				if tc.status != 0 {
					return fakellm.Reply{Status: tc.status}
				}
				return fakellm.Reply{Content: tc.answers[min(r.Seq, len(tc.answers))-1]}
			})
			defer srv.Close()
			spec := termWorld()
			spec.Reward = &world.Reward{Success: &world.SuccessRule{Judge: &world.SuccessJudge{Criterion: "hello.txt exists in the home directory", Sees: tc.sees}}}
			if err := spec.Validate(); err != nil {
				t.Fatal(err)
			}
			model := &scriptedModel{replies: []worldmodel.Response{{Content: "<predicted_observation>$ ls\nhello.txt</predicted_observation>", FinishReason: "stop"}}}
			m := New(&Options{
				Worlds:       map[string]*world.Spec{"t": spec},
				Backends:     map[string]BackendFactory{BackendModel: NewModelBackend(model, &ModelOptions{MaxTokens: 100})},
				SuccessJudge: judge.NewSuccessJudge(worldmodel.New(srv.URL, "judge", &worldmodel.Options{MaxRetries: -1}), "judge", nil),
			})
			defer func() { _ = m.Close(context.Background()) }()
			ctx := context.Background()
			rep, err := m.Create(ctx, CreateRequest{WorldID: "t"})
			if err != nil {
				t.Fatal(err)
			}
			var last *StepResult
			for _, a := range []string{`[{"keystrokes":"touch hello.txt; ls\n"}]`, `[]`} {
				if last, err = m.Step(ctx, rep.SessionID, StepRequest{Action: json.RawMessage(a)}); err != nil {
					t.Fatal(err)
				}
			}
			got := want{Reward: last.Reward, Components: last.Info.RewardComponents, Verdict: string(last.Info.Extra["success_judge"]), Calls: srv.Count()}
			if tc.want.ErrHas != "" && strings.Contains(last.Info.Error, tc.want.ErrHas) {
				got.ErrHas = tc.want.ErrHas
			} else {
				got.ErrHas = last.Info.Error
			}
			w := tc.want
			if tc.status != 0 {
				w.Verdict = got.Verdict // the transport error's text is the client's
				if !strings.Contains(got.Verdict, "503") {
					t.Errorf("verdict %s does not say the judge answered 503", got.Verdict)
				}
			}
			if d := cmp.Diff(w, got); d != "" {
				t.Errorf("last step (-want +got):\n%s", d)
			}
			if !last.Terminated {
				t.Error("the [] step did not end the episode")
			}
			if tc.status != 0 {
				return
			}
			user := srv.Requests()[0].Messages[1].Content
			for _, s := range []string{"hello.txt exists in the home directory", "a shell", "$ ls\nhello.txt"} {
				if !strings.Contains(user, s) {
					t.Errorf("judge prompt lacks %q:\n%s", s, user)
				}
			}
			if sawAction := strings.Contains(user, "touch hello.txt"); sawAction != (tc.sees != world.JudgeSeesFinalObservation) {
				t.Errorf("judge prompt shows the action: %v, with sees %q:\n%s", sawAction, tc.sees, user)
			}
			tr, err := m.Trajectory(ctx, rep.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			ret, scored := tr.Meta["return"]
			if scored != (tc.want.Components != nil) || (scored && string(ret) != fmt.Sprint(tc.want.Reward)) {
				t.Errorf("trajectory return %s (present %v), want %v", ret, scored, tc.want.Reward)
			}
		})
	}
}

// TestSuccessJudgeRefusedWithoutJudge: an inline spec declaring a judged
// criterion on a manager without a success judge is refused at create,
// naming the field and the setting.
func TestSuccessJudgeRefusedWithoutJudge(t *testing.T) {
	m := newTestManager(t, &scriptedModel{replies: []worldmodel.Response{{Content: "x"}}}, Options{})
	spec := termWorld()
	spec.Reward = &world.Reward{Success: &world.SuccessRule{Judge: &world.SuccessJudge{Criterion: "done"}}}
	_, err := m.Create(context.Background(), CreateRequest{World: spec})
	fe, ok := fielderr.As(err)
	if !ok || !errors.Is(err, ErrBadRequest) || fe.Path != "world.reward.success.judge" || fe.Setting != "SuccessJudge" {
		t.Fatalf("create: %v, want a bad request on world.reward.success.judge naming the SuccessJudge setting", err)
	}
}

// TestSuccessJudgeOutlivesTheClient: a client that goes away while the
// judge decides does not cost the recorded episode its reward.
func TestSuccessJudgeOutlivesTheClient(t *testing.T) {
	// The client goes away once the judge has the question (not after a
	// fixed time, which a loaded machine could spend before the step
	// reaches the judge), while the judge still thinks.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := fakellm.New(func(*fakellm.Request) fakellm.Reply {
		cancel()
		return fakellm.Reply{Delay: 200 * time.Millisecond, Content: `<verdict>{"success": true}</verdict>`}
	})
	defer srv.Close()
	spec := termWorld()
	spec.Reward = &world.Reward{Success: &world.SuccessRule{Judge: &world.SuccessJudge{Criterion: "done"}}}
	m := New(&Options{
		Worlds:       map[string]*world.Spec{"t": spec},
		Backends:     map[string]BackendFactory{BackendModel: NewModelBackend(&scriptedModel{replies: []worldmodel.Response{{Content: "$"}}}, nil)},
		SuccessJudge: judge.NewSuccessJudge(worldmodel.New(srv.URL, "judge", &worldmodel.Options{MaxRetries: -1}), "judge", nil),
	})
	defer func() { _ = m.Close(context.Background()) }()
	rep, err := m.Create(context.Background(), CreateRequest{WorldID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Step(ctx, rep.SessionID, StepRequest{Action: json.RawMessage(`[]`)})
	if err != nil || res.Reward != 1 || res.Info.Error != "" {
		t.Fatalf("step: %+v, %v", res, err)
	}
	tr, err := m.Trajectory(context.Background(), rep.SessionID)
	if err != nil || string(tr.Meta["return"]) != "1" {
		t.Fatalf("trajectory return %s, %v", tr.Meta["return"], err)
	}
}
