package rollout

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/world"
)

// TestRequestBodyIsWhatMarshalWrites: the request assembled from the
// incrementally encoded transcript is byte for byte the json.Marshal of
// the whole request, turn after turn, with and without the optional
// fields, and a clone goes on independently.
func TestRequestBodyIsWhatMarshalWrites(t *testing.T) {
	temp := 0.7
	tools := agentTools(mustSpec(t))
	toolsJSON, _ := json.Marshal(tools)
	turns := []Message{
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "get_issue", Arguments: `{"key":"WS-1"}`}}}},
		{Role: "tool", ToolCallID: "c1", Content: "<b>&\u2028 \"quoted\"\n"},
		{Role: "assistant", Content: "done \xff"},
	}
	for _, c := range []struct {
		name  string
		p     Policy
		tools []tool
	}{
		{"bare", Policy{Model: "m"}, nil},
		{"all", Policy{Model: "m<x>", Temperature: &temp, MaxTokens: 512}, tools},
	} {
		t.Run(c.name, func(t *testing.T) {
			var enc []byte
			if c.tools != nil {
				enc = toolsJSON
			}
			h := transcript{msgs: []Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}}
			for i, m := range turns {
				msgs, err := h.json()
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.p.requestBody(msgs, enc)
				if err != nil {
					t.Fatal(err)
				}
				body := map[string]any{"model": c.p.Model, "messages": h.msgs, "logprobs": true, "return_token_ids": true}
				if c.tools != nil {
					body["tools"] = c.tools
				}
				if c.p.Temperature != nil {
					body["temperature"] = *c.p.Temperature
				}
				if c.p.MaxTokens > 0 {
					body["max_tokens"] = c.p.MaxTokens
				}
				want, _ := json.Marshal(body)
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Fatalf("turn %d (-marshal +assembled):\n%s", i, diff)
				}
				if i == 1 {
					c := h.clone()
					c.add(Message{Role: "user", Content: "branch"})
					cj, _ := c.json()
					wantC, _ := json.Marshal(c.msgs)
					if string(cj) != string(wantC) {
						t.Fatalf("clone: %s, want %s", cj, wantC)
					}
				}
				h.add(m)
			}
		})
	}
}

func mustSpec(t *testing.T) *world.Spec {
	t.Helper()
	s, err := world.Parse([]byte(trackerYAML), "tracker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
