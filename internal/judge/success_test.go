package judge

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

func TestParseSuccess(t *testing.T) {
	type got struct {
		Success bool
		Reason  string
		Bad     bool
	}
	for _, tc := range []struct {
		name, in string
		want     got
	}{
		{"tagged", `ok <verdict>{"success": true, "reason": "done"}</verdict>`, got{true, "done", false}},
		{"tagged false", `<verdict>{"success": false, "reason": "no"}</verdict>`, got{false, "no", false}},
		{"last tag wins", `<verdict>{"success": true}</verdict> on reflection <verdict>{"success": false}</verdict>`, got{false, "", false}},
		{"unclosed tag", `<VERDICT>{"success": true, "reason": "x"}`, got{true, "x", false}},
		{"thinking removed", `<think><verdict>{"success": true}</verdict></think><verdict>{"success": false}</verdict>`, got{false, "", false}},
		{"fenced, no tag", "```json\n{\"success\": true}\n```", got{true, "", false}},
		{"bare object", `I conclude {"success": false, "reason": "the {brace} in text"}`, got{false, "the {brace} in text", false}},
		{"repairs", `<verdict>{success: true, 'reason': "fine",}</verdict>`, got{true, "fine", false}},
		{"string true", `<verdict>{"success": "True"}</verdict>`, got{true, "", false}},
		{"string false", `<verdict>{"success": " false "}</verdict>`, got{false, "", false}},
		{"string other", `<verdict>{"success": "yes"}</verdict>`, got{false, "", true}},
		{"number", `<verdict>{"success": 1}</verdict>`, got{false, "", true}},
		{"missing key", `<verdict>{"passed": true}</verdict>`, got{false, "", true}},
		{"no JSON", `The agent succeeded.`, got{false, "", true}},
		{"only thinking", `<think>{"success": true}</think>`, got{false, "", true}},
		{"broken JSON", `<verdict>{"success": tru</verdict>`, got{false, "", true}},
		{"empty", ``, got{false, "", true}},
		{"reason not a string", `<verdict>{"success": true, "reason": 3}</verdict>`, got{true, "", false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason, err := ParseSuccess(tc.in)
			if err != nil && !errors.Is(err, ErrUnparseable) {
				t.Fatalf("error %v is not ErrUnparseable", err)
			}
			if d := cmp.Diff(tc.want, got{ok, reason, err != nil}); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// FuzzParseSuccess: arbitrary answers never panic, fail only with
// ErrUnparseable, and a failure never reports success.
func FuzzParseSuccess(f *testing.F) {
	f.Add(`<verdict>{"success": true, "reason": "x"}</verdict>`)
	f.Add("```\n{success: 'false',}\n```")
	f.Add(`<verdict>{"success": "TRUE"`)
	f.Fuzz(func(t *testing.T, in string) {
		ok, _, err := ParseSuccess(in)
		if err != nil && (ok || !errors.Is(err, ErrUnparseable)) {
			t.Fatalf("success %v with error %v", ok, err)
		}
	})
}

// TestSuccessJudgeAttempts: the judge is called until an answer parses,
// at most Attempts times, and says how many calls it made.
func TestSuccessJudgeAttempts(t *testing.T) {
	answers := []string{"hmm", `{"verdict": "yes"}`, `<verdict>{"success": true, "reason": "seen"}</verdict>`}
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: answers[min(r.Seq, len(answers))-1]}
	})
	defer srv.Close()
	c := worldmodel.New(srv.URL, "j", &worldmodel.Options{MaxRetries: -1})
	temp := 0.0
	v, err := NewSuccessJudge(c, "j", &SuccessJudgeOptions{MaxTokens: 64, Temperature: &temp}).Judge(context.Background(), SuccessCase{Criterion: "c", Final: "f"})
	if err != nil || v != (SuccessVerdict{Success: true, Reason: "seen", Attempts: 3}) {
		t.Fatalf("verdict %+v, %v", v, err)
	}
	if b := srv.Requests()[0].Body; b["max_tokens"] != float64(64) || b["temperature"] != float64(0) || b["model"] != "j" {
		t.Errorf("request body %v", b)
	}
	bad := fakellm.New(func(*fakellm.Request) fakellm.Reply { return fakellm.Reply{Content: "hmm"} })
	defer bad.Close()
	c = worldmodel.New(bad.URL, "j", &worldmodel.Options{MaxRetries: -1})
	v, err = NewSuccessJudge(c, "j", &SuccessJudgeOptions{Attempts: 2}).Judge(context.Background(), SuccessCase{Criterion: "c", Final: "f"})
	if !errors.Is(err, ErrUnparseable) || v.Attempts != 2 || bad.Count() != 2 || !strings.Contains(err.Error(), "after 2 attempts") {
		t.Fatalf("verdict %+v, %v after %d calls; want ErrUnparseable after 2", v, err, bad.Count())
	}
}

// TestSuccessMessages: the judge reads the task, the criterion, the
// transcript when given, and the final observation.
func TestSuccessMessages(t *testing.T) {
	msgs := SuccessMessages(SuccessCase{Criterion: "CRIT", Task: "TASK", Turns: []SuccessTurn{{"ACT1", "OBS1"}}, Final: "FINAL"})
	if len(msgs) != 2 || msgs[0].Role != "system" || !strings.Contains(msgs[0].Content, "<verdict>") {
		t.Fatalf("messages %+v", msgs)
	}
	u := msgs[1].Content
	last := -1
	for _, s := range []string{"TASK", "CRIT", "ACT1", "OBS1", "FINAL"} {
		i := strings.Index(u, s)
		if i <= last {
			t.Errorf("%q missing or out of order in:\n%s", s, u)
		}
		last = i
	}
	if u := SuccessMessages(SuccessCase{Criterion: "CRIT", Final: "FINAL"})[1].Content; strings.Contains(u, "Transcript") || strings.Contains(u, "Task given") {
		t.Errorf("final-only prompt shows a transcript or an empty task:\n%s", u)
	}
}
