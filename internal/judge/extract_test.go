package judge

import (
	"testing"

	"github.com/agentworld/agentworld/internal/conversation"
)

// TestExtractPredictionGolden documents conversation.ExtractPrediction, the
// published prediction extraction, on one input per rule: the .golden file
// holds the exact extracted text.
func TestExtractPredictionGolden(t *testing.T) {
	for base, in := range inputs(t, "extract") {
		t.Run(base, func(t *testing.T) {
			checkGolden(t, base+".golden", []byte(conversation.ExtractPrediction(in)))
		})
	}
}

// TestExtractPredictionRules pins what each golden case must show.
func TestExtractPredictionRules(t *testing.T) {
	want := map[string]string{
		"think_pair_removed":                 "**Environment Observation:**\nroot@4c1f2e9a7b3d:/app# ls\ncalc.py  test_calc.py\nroot@4c1f2e9a7b3d:/app#",
		"several_think_pairs":                "kept text and more kept text",
		"orphan_think_close":                 `{"order_id": 5812, "status": "pending"}`,
		"unclosed_think_stops_at_answer":     "1. Lærdal Tunnel - Wikipedia",
		"unclosed_think_to_end":              "Visible preamble",
		"last_answer_block":                  "second attempt",
		"unclosed_answer_tag":                `UI element 0: {"class_name": "android.widget.EditText", "text": "Dentist"}`,
		"no_tag_uses_text":                   "RootWebArea 'Orders / Sales / Admin', focused\n\t[305] heading 'Orders'",
		"no_output_after_thinking":           conversation.NoOutput,
		"empty_input":                        conversation.NoOutput,
		"empty_tag":                          "",
		"answer_tag_inside_thinking_removed": "plain answer",
	}
	ins := inputs(t, "extract")
	if len(ins) != len(want) {
		t.Errorf("%d extract inputs, %d expectations", len(ins), len(want))
	}
	for base, in := range ins {
		name := base[len("testdata/extract/"):]
		w, ok := want[name]
		if !ok {
			t.Errorf("no expectation for %s", name)
			continue
		}
		if got := conversation.ExtractPrediction(in); got != w {
			t.Errorf("%s: got %q, want %q", name, got, w)
		}
	}
}
