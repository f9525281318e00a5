package world

import (
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/regexlimit"
)

func TestRewardSection(t *testing.T) {
	base := "domain: mcp\ntask_description: issues\naction_space:\n  tools:\n    - name: get\n"
	s, err := Parse([]byte(base+"reward:\n  tool_error: -0.1\n  success:\n    final_observation: '\"state\": \"closed\"'\n    reward: 2\n"), "w")
	if err != nil {
		t.Fatal(err)
	}
	if s.Reward.ToolError != -0.1 {
		t.Errorf("%+v", s.Reward)
	}
	if ok, v := s.Reward.Success.Succeeded(`{"id": 7, "state": "closed"}`); !ok || v != 2 {
		t.Errorf("success %v %v", ok, v)
	}
	if ok, v := s.Reward.Success.Succeeded(`{"state": "open"}`); ok || v != 0 {
		t.Errorf("no success %v %v", ok, v)
	}
	for _, tt := range []struct{ yaml, field string }{
		{"reward:\n  success:\n    final_observation: '('\n", "reward.success.final_observation"},
		{"reward:\n  success:\n    reward: 1\n", "reward.success.final_observation"},
		{"reward:\n  success:\n    judge: {sees: transcript}\n", "reward.success.judge.criterion"},
		{"reward:\n  success:\n    judge: {criterion: done, sees: everything}\n", "reward.success.judge.sees"},
		{"reward:\n  success:\n    final_observation: ok\n    judge: {criterion: done}\n", "reward.success"},
	} {
		_, err := Parse([]byte(base+tt.yaml), "w")
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%q: error %v, want one naming %s", tt.yaml, err, tt.field)
		}
	}
	j, err := Parse([]byte(base+"reward:\n  success:\n    judge:\n      criterion: the issue is closed\n      sees: final_observation\n"), "w")
	if err != nil {
		t.Fatal(err)
	}
	if !j.Reward.Judged() || j.Reward.Success.Judge.Criterion != "the issue is closed" || j.Reward.Success.Earned() != 1 {
		t.Errorf("judged rule %+v", j.Reward.Success)
	}
	if ok, _ := j.Reward.Success.Succeeded("anything"); ok || s.Reward.Judged() {
		t.Error("a judged rule is met by the regular expression path, or a regex rule reports judged")
	}
	for obs, want := range map[string]bool{
		`{"content": [], "isError": true}`: true, `{"error": {"code": -32602}}`: true,
		`{"content": [], "isError": false}`: false, `error: no such file`: false, `[1]`: false,
	} {
		if got := IsToolError(obs); got != want {
			t.Errorf("IsToolError(%q) = %v", obs, got)
		}
	}
}

func TestSuccessRuleKinds(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule SuccessRule
		err  string
	}{
		{"none", SuccessRule{}, "check.final_observation: missing"},
		{"two", SuccessRule{FinalObservation: "x", Answer: &AnswerRule{Items: []string{"a1"}}}, "give exactly one"},
		{"answer without items", SuccessRule{Answer: &AnswerRule{}}, "check.answer.items: missing"},
		{"blank item", SuccessRule{Answer: &AnswerRule{Items: []string{"the"}}}, "check.answer.items[0]"},
		{"min_f1 range", SuccessRule{Answer: &AnswerRule{Items: []string{"x"}, MinF1: 2}}, "check.answer.min_f1"},
		{"state half", SuccessRule{State: []StateFact{{Entity: "e"}}}, "check.state[0]"},
		{"good answer", SuccessRule{Answer: &AnswerRule{Items: []string{"x"}}}, ""},
	} {
		err := tc.rule.Validate()
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want it to mention %q", tc.name, err, tc.err)
		}
	}
}

func TestStateHoldsLatestValueWins(t *testing.T) {
	want := []StateFact{{Entity: "WS-9", Attribute: "status", Value: "Closed"}}
	obs := []string{`{"issue": {"id": "WS-9", "status": "closed"}}`, `{"issue": {"id": "WS-9", "status": "open"}}`}
	if StateHolds(want, obs) {
		t.Error("a fact changed back later still counted")
	}
	if !StateHolds(want, obs[:1]) {
		t.Error("the fact asserted was not found")
	}
}

// TestFinalObservationMatchingIsBounded: a success pattern whose matching
// could cost more than regexlimit.DefaultMaxWork against the observations
// it needs to see (issue 21's `.{0,1000}x`, 18 s over 1 MiB) is refused
// naming the field; an admitted one is matched against the observation's
// first MatchBytes bytes for its program, all of a long one for a real
// pattern.
func TestFinalObservationMatchingIsBounded(t *testing.T) {
	base := "domain: mcp\ntask_description: issues\naction_space:\n  tools:\n    - name: get\n"
	_, err := Parse([]byte(base+"reward:\n  success:\n    final_observation: '.{0,1000}x'\n"), "w")
	if err == nil || !strings.Contains(err.Error(), "reward.success.final_observation") || !strings.Contains(err.Error(), "instructions") {
		t.Fatalf("the attack: %v", err)
	}
	s, err := Parse([]byte(base+"reward:\n  success:\n    final_observation: 'closed$'\n"), "w")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 1<<20) + "closed"
	if ok, _ := s.Reward.Success.Succeeded(long); !ok {
		t.Fatal("a small pattern missed the end of a 1 MiB observation")
	}
	s, err = Parse([]byte(base+"reward:\n  success:\n    final_observation: '.{0,500}closed$'\n"), "w")
	if err != nil {
		t.Fatal(err)
	}
	n := s.Reward.Success.matchBytes
	k, err := regexlimit.Insts(".{0,500}closed$", nil)
	if err != nil || int64(k)*int64(n) > regexlimit.DefaultMaxWork || n < regexlimit.MinMatchBytes {
		t.Fatalf("%d instructions × %d bytes (%v)", k, n, err)
	}
	within := strings.Repeat("x", n-len("closed")) + "closed"
	if ok, _ := s.Reward.Success.Succeeded(within); !ok {
		t.Fatalf("within the %d bytes the pattern sees: not matched", n)
	}
	if ok, _ := s.Reward.Success.Succeeded("x" + within); ok {
		t.Fatalf("past the %d bytes the pattern sees: matched", n)
	}
}
