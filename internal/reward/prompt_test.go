package reward

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/conversation"
)

func TestSplitChatTemplate(t *testing.T) {
	want := []Message{{"system", "sys"}, {"user", "a\n"}, {"assistant", "b"}, {"user", "c"}}
	for _, tt := range []struct {
		name, text string
		want       []Message
	}{
		{"chatml", "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\na\n<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n", want},
		{"chatml, thinking off", "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\na\n<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", want},
		{"llama 3", "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|><|start_header_id|>user<|end_header_id|>\n\na\n<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nb<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nc<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", want},
		{"gemma", "<bos><start_of_turn>user\na\n<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n<start_of_turn>user\nc<end_of_turn>\n<start_of_turn>model\n", want[1:]},
		{"plain text", "### Turn 1\n**Action:**\nls", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := splitChatTemplate(tt.text)
			if ok != (tt.want != nil) {
				t.Fatalf("ok %v", ok)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestRecordFromMessages(t *testing.T) {
	u := func(n int, a string) string { return conversation.UserMessage(n, a, "", "") }
	msgs := []Message{{"system", "sys"}, {"user", u(1, "ls")}, {"assistant", conversation.ObservationResponse("a b")}, {"user", u(2, "pwd")}}
	rec, err := recordFromMessages(msgs, "agentworld/terminal", "t#2", "/app")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{conversation.ActionPrompt(1, "ls"), conversation.ActionPrompt(2, "pwd")}
	if d := cmp.Diff(want, rec.Prompt); d != "" || rec.TurnIdx != 2 || rec.CurrentPrompt != want[1] || rec.Response[1] != "/app" || rec.Response[0] != "**Environment Observation:**\na b" {
		t.Errorf("%+v %s", rec, d)
	}
	// The simulator's newest message carries world state: not the action.
	ws := []Message{{"user", conversation.UserMessage(1, "ls", "the file a exists", "be slow")}}
	if rec, err := recordFromMessages(ws, "terminal", "x", "t"); err != nil || rec.CurrentPrompt != conversation.ActionPrompt(1, "ls") {
		t.Errorf("%+v %v", rec, err)
	}
	for _, bad := range [][]Message{
		{{"user", "a"}, {"user", "b"}},
		{{"assistant", "a"}, {"user", "b"}},
		{{"user", "a"}, {"assistant", "b"}},
		{{"tool", "a"}},
		{{"system", "only"}},
	} {
		if _, err := recordFromMessages(bad, "terminal", "x", "t"); !errors.Is(err, errInvalidItem) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// TestItemPromptJSON: the batch API's prompt is text or messages (whose
// content may be parts), and an item writes back as it was read.
func TestItemPromptJSON(t *testing.T) {
	for _, in := range []string{
		`{"id":"a","data_source":"agentworld/terminal","prompt":"### Turn 1\n**Action:**\nls","response":"r","ground_truth":"g"}`,
		`{"id":"a","data_source":"agentworld/terminal","prompt":[{"role":"system","content":"s"},{"role":"user","content":"u"}],"response":"r","ground_truth":"g"}`,
	} {
		var it Item
		if err := json.Unmarshal([]byte(in), &it); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(it)
		if err != nil || string(out) != in {
			t.Errorf("round trip:\n%s\n%s %v", in, out, err)
		}
	}
	var it Item
	if err := json.Unmarshal([]byte(`{"prompt":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image"},{"type":"text","text":"b"}]}]}`), &it); err != nil || it.Messages[0].Content != "ab" {
		t.Errorf("parts: %+v %v", it, err)
	}
	if err := json.Unmarshal([]byte(`{"prompt":7}`), &it); err == nil || !strings.Contains(err.Error(), "prompt: want a string or a list") {
		t.Errorf("a number as the prompt: %v", err)
	}
}

// FuzzPromptText: any prompt text a trainer sends becomes an item without
// a panic, and a chat rendering splits into messages whose contents are
// substrings of it.
func FuzzPromptText(f *testing.F) {
	f.Add("<|im_start|>user\n### Turn 1\n**Action:**\nls<|im_end|>\n<|im_start|>assistant\n")
	f.Add("<|start_header_id|>user<|end_header_id|>\n\nx<|eot_id|>")
	f.Add("<start_of_turn>model\n<end_of_turn><start_of_turn>")
	f.Fuzz(func(t *testing.T, s string) {
		msgs, _ := splitChatTemplate(s)
		for _, m := range msgs {
			if !strings.Contains(s, m.Content) {
				t.Fatalf("content %q is not in the text", m.Content)
			}
		}
		it := Item{GroundTruth: "g"}
		it.setPromptText(s)
		_, _ = it.record()
	})
}
