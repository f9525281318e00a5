package masking

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/testkit"
)

// TestAgentsOwnWords: an action's words are the agent's own, not its
// wrapper's: keystroke text, a tool's name and argument values, an
// Android action's fields; text actions and JSON that does not parse keep
// every word.
func TestAgentsOwnWords(t *testing.T) {
	for _, tt := range []struct {
		name, action string
		want         int // distinct action words
	}{
		{"keystrokes", `[{"keystrokes": "cd src\n", "duration": 0.1}]`, 2},
		{"keystrokes, several", `[{"keystrokes": "git status\n", "duration": 1}, {"keystrokes": "C-c", "duration": 0.5}]`, 3}, // git status c
		{"tool call", `{"name": "get_weather", "arguments": {"city": "Paris", "units": "metric", "days": 3}}`, 4},             // get_weather paris metric 3
		{"android", `{"action_type": "type", "text": "weekly grocery list"}`, 4},
		{"nested values, no keys", `{"a": [{"b": "x y"}, 2.5, true, null, -7]}`, 5},
		{"heading kept out", "### Turn 3\n**Action:**\n[{\"keystrokes\": \"ls\\n\", \"duration\": 0.1}]", 1},
		{"web call is text", `click('364')`, 2},
		{"not JSON: all text", `[{"keystrokes": "cd src\n", "duration": 0.1}`, 7}, // keystrokes cd src n duration 0 1
		{"NaN is not JSON", `[NaN, "a"]`, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var sc Scorer
			st := sc.Score(tt.action, "")
			if st.ActDistinct != tt.want {
				t.Errorf("%d distinct action words, want %d", st.ActDistinct, tt.want)
			}
			raw, _ := json.Marshal(tt.action)
			if got := sc.ScoreJSON(raw[1:len(raw)-1], nil); got != st {
				t.Errorf("ScoreJSON %+v, Score %+v", got, st)
			}
		})
	}
}

// TestCdSrcIsAnEcho: `cd src` echoed on the screen is an echo, weight
// 0.05; counting the action's wrapper ("keystrokes", "duration", the
// numbers, the n of \n) made it a reply at 0.8.
func TestCdSrcIsAnEcho(t *testing.T) {
	cfg, err := LoadMaskingConfig("")
	if err != nil {
		t.Fatal(err)
	}
	var sc Scorer
	st := sc.Score("### Turn 2\n**Action:**\n[{\"keystrokes\": \"cd src\\n\", \"duration\": 0.1}]", "**Environment Observation:**\n$ cd src\n$ ")
	c := cfg.Categories[cfg.Classify(&st)]
	if c.Name != "echo" || c.Weight != 0.05 {
		t.Errorf("%+v: %s at %v, want echo at 0.05", st, c.Name, c.Weight)
	}
}

// TestCPythonPeerAgreesOnActions runs the CPython peer on actions at the
// edges of the JSON grammar and of the keystrokes rule.
func TestCPythonPeerAgreesOnActions(t *testing.T) {
	py := testkit.LookPath(t, "python3", "install python3 (Debian: apt-get install python3)")
	actions := []string{
		`[{"keystrokes": "cd src\n", "duration": 0.1}]`,
		`[{"keystrokes": "a", "keystrokes": "b c", "duration": 9}]`,
		`{"keystr\u006fkes": "escaped key", "other": "gone"}`,
		`{"keystrokes": {"deep": ["x", 1e5, -0.25E-3]}, "z": "no"}`,
		`{"outer": {"keystrokes": "in"}, "kept": "yes"}`,
		`{"name": "f", "arguments": {"q": "caf\u00e9 \ud83d\ude80 \ud800"}}`,
		`[01]`, `[1.]`, `[-]`, `{"a" 1}`, `{"a": 1,}`, `[1 2]`, `["tab	inside"]`, `["bad \x escape"]`,
		`[Infinity]`, `{"a": NaN}`, `[true, false, null, "t"]`, `  [ "spaced" ]  `, `[] trailing`,
		`{}`, `[]`, `[[[[["deep"]]]]]`, `{"": ""}`, `[1E+2, 0.5e-1, -0]`,
	}
	var corpus bytes.Buffer
	for i, a := range actions {
		line, _ := json.Marshal(map[string]any{"id": fmt.Sprint(i), "domain": "terminal", "source": "test", "system_prompt": "p", "turns": []map[string]string{{"action": a, "observation": "cd src escaped key in yes x deep t spaced"}}})
		corpus.Write(append(line, '\n'))
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "actions.jsonl")
	if err := os.WriteFile(in, corpus.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := LoadMaskingConfig("")
	cfgJSON, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "cfg.json")
	if err := os.WriteFile(cfgPath, cfgJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "../../perf/mask_peer.py", cfgPath)
	cmd.Stdin = bytes.NewReader(corpus.Bytes())
	peer, err := cmd.Output()
	if err != nil {
		t.Fatalf("peer: %v", err)
	}
	var ours bytes.Buffer
	sum, err := Mask(context.Background(), []string{in}, &ours, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Skipped > 0 {
		t.Errorf("skipped: %v", sum.SkipReasons)
	}
	if !bytes.Equal(ours.Bytes(), peer) {
		t.Errorf("outputs differ (-peer +ours):\n%s", cmp.Diff(string(peer), ours.String()))
	}
}
