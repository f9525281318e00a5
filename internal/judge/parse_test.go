package judge

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentworld/agentworld/internal/score"
	"github.com/google/go-cmp/cmp"
)

type parseResult struct {
	Scores  *score.Scores `json:"scores,omitempty"`
	Verdict *Verdict      `json:"verdict,omitempty"`
	Error   string        `json:"error,omitempty"`
}

// TestParseGolden runs every judge answer under testdata/parse through Parse
// and compares the scores, verdict or error with the .golden file beside it.
func TestParseGolden(t *testing.T) {
	for base, in := range inputs(t, "parse") {
		t.Run(base, func(t *testing.T) {
			s, v, err := Parse(in)
			var res parseResult
			if err != nil {
				if !errors.Is(err, ErrUnparseable) {
					t.Fatalf("error %v is not ErrUnparseable", err)
				}
				res.Error = err.Error()
			} else {
				res.Scores, res.Verdict = &s, &v
			}
			b, _ := json.MarshalIndent(res, "", "  ")
			checkGolden(t, base+".golden", append(b, '\n'))
		})
	}
}

// TestParseRules pins the rule each golden case exists for, so a golden file
// regenerated with -update cannot silently accept a wrong answer.
func TestParseRules(t *testing.T) {
	sc := func(f, fa, c, r, q int) score.Scores {
		return score.Scores{Format: f, Factuality: fa, Consistency: c, Realism: r, Quality: q}
	}
	tests := []struct {
		name string
		in   string
		want score.Scores
		err  bool
	}{
		{"thinking pair removed", `<think>{"scores": {"format": 5}}</think>{"scores": {"format": 2}}`, sc(2, 0, 0, 0, 0), false},
		{"orphan close", `{"scores": {"format": 5}}</think>{"scores": {"format": 3}}`, sc(3, 0, 0, 0, 0), false},
		{"unclosed think", `<think>{"scores": {"format": 5}}`, score.Scores{}, true},
		{"last final block", "<final_evaluation>{\"scores\": {\"format\": 1}}</final_evaluation><final_evaluation>{\"scores\": {\"format\": 4}}</final_evaluation>", sc(4, 0, 0, 0, 0), false},
		{"text outside final block ignored", "{\"scores\": {\"format\": 5}}<final_evaluation>{\"scores\": {\"format\": 2}}</final_evaluation>{\"scores\": {\"format\": 5}}", sc(2, 0, 0, 0, 0), false},
		{"fenced beats balanced", "```json\n{\"scores\": {\"format\": 2}}\n```\n{\"scores\": {\"format\": 5}}", sc(2, 0, 0, 0, 0), false},
		{"fenced with scores beats later fenced", "```json\n{\"scores\": {\"format\": 2}}\n```\n```json\n{\"x\": 1}\n```", sc(2, 0, 0, 0, 0), false},
		{"last fenced object chosen", "```json\n{\"x\": 1}\n```\n{\"scores\": {\"format\": 5}}", score.Scores{}, true},
		{"balanced with scores beats later", `{"scores": {"format": 3}} then {"b": 1}`, sc(3, 0, 0, 0, 0), false},
		{"last balanced object", `{"b": 1} then {'scores': {'format': 4}}`, sc(4, 0, 0, 0, 0), false},
		{"backward", `{ never closed {"scores": {"format": 4}}`, sc(4, 0, 0, 0, 0), false},
		{"trailing comma", `{"scores": {"format": 4,},}`, sc(4, 0, 0, 0, 0), false},
		{"unquoted", `{scores: {format: 4, quality: 2}}`, sc(4, 0, 0, 0, 2), false},
		{"single quoted", `{'scores': {'format': 4}}`, sc(4, 0, 0, 0, 0), false},
		{"salvage", `{"strengths": ["a" "b"], "scores": {"format": 3, "quality": 1}}`, sc(3, 0, 0, 0, 1), false},
		{"int", `{"scores": {"format": 3}}`, sc(3, 0, 0, 0, 0), false},
		{"int above 5", `{"scores": {"format": 9}}`, sc(5, 0, 0, 0, 0), false},
		{"huge int", `{"scores": {"format": 123456789012345678901234567890}}`, sc(5, 0, 0, 0, 0), false},
		{"negative kept", `{"scores": {"format": -3}}`, sc(-3, 0, 0, 0, 0), false},
		{"true", `{"scores": {"format": true, "quality": false}}`, sc(1, 0, 0, 0, 0), false},
		{"half even down", `{"scores": {"format": 2.5, "quality": 4.5}}`, sc(2, 0, 0, 0, 4), false},
		{"half even up", `{"scores": {"format": 3.5, "quality": 1.5}}`, sc(4, 0, 0, 0, 2), false},
		{"float below one rounds to zero", `{"scores": {"format": 0.4}}`, sc(0, 0, 0, 0, 0), false},
		{"float rounds to one", `{"scores": {"format": 0.6}}`, sc(1, 0, 0, 0, 0), false},
		{"exponent float", `{"scores": {"format": 4e0}}`, sc(4, 0, 0, 0, 0), false},
		{"fraction string", `{"scores": {"format": "4/5"}}`, sc(4, 0, 0, 0, 0), false},
		{"fraction string spaced", `{"scores": {"format": " 3 / 5"}}`, sc(3, 0, 0, 0, 0), false},
		{"bare numeric string", `{"scores": {"format": "4"}}`, sc(4, 0, 0, 0, 0), false},
		{"float string", `{"scores": {"format": "4.0"}}`, sc(0, 0, 0, 0, 0), false},
		{"word string", `{"scores": {"format": "good"}}`, sc(0, 0, 0, 0, 0), false},
		{"negative string", `{"scores": {"format": "-2/5"}}`, sc(-2, 0, 0, 0, 0), false},
		{"big string clamped", `{"scores": {"format": "10/10"}}`, sc(5, 0, 0, 0, 0), false},
		{"null and list", `{"scores": {"format": null, "quality": [3]}}`, sc(0, 0, 0, 0, 0), false},
		{"empty", ``, score.Scores{}, true},
		{"no object", `four out of five`, score.Scores{}, true},
		{"no scores", `{"strengths": []}`, score.Scores{}, true},
		{"scores not object", `{"scores": 5}`, score.Scores{}, true},
	}
	for _, tt := range tests {
		got, _, err := Parse(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("%s: Parse error = %v, want error %v", tt.name, err, tt.err)
			continue
		}
		if err != nil && !errors.Is(err, ErrUnparseable) {
			t.Errorf("%s: error %v is not ErrUnparseable", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: scores (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestParseVerdict(t *testing.T) {
	_, v, err := Parse(`{"strengths": ["a", {"k": "<b>"}], "weaknesses": "only one", "scores": {"format": 1}}`)
	if err != nil {
		t.Fatal(err)
	}
	want := Verdict{Strengths: []string{"a", `{"k":"<b>"}`}, Weaknesses: []string{"only one"}}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
}
