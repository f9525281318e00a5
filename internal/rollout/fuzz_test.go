package rollout

import (
	"encoding/json"
	"testing"
)

// FuzzParseCompletion: any policy answer either fails cleanly or yields
// token fields that are each absent or valid JSON copied from the answer.
func FuzzParseCompletion(f *testing.F) {
	f.Add([]byte(`{"prompt_token_ids":[1,2],"choices":[{"message":{"role":"assistant","content":"hi"},"token_ids":[3],"logprobs":{"content":[{"logprob":-1e-05}]}}]}`))
	f.Add([]byte(`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}],"prompt_token_ids":[1],"generation_token_ids":[2],"generation_log_probs":[-0.5]}}]}`))
	f.Add([]byte(`{"choices":[{"message":{},"logprobs":{"content":[{"logprob":null},{}]}}]}`))
	f.Add([]byte(`{"choices":[]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := parseCompletion(raw)
		if err != nil {
			return
		}
		for _, v := range []json.RawMessage{r.Turn.PromptTokenIDs, r.Turn.GenerationTokenIDs, r.Turn.GenerationLogProbs} {
			if v != nil && !json.Valid(v) {
				t.Fatalf("token field %q is not JSON (answer %q)", v, raw)
			}
		}
		if _, err := json.Marshal(r.Turn); err != nil {
			t.Fatalf("row cannot be written: %v", err)
		}
	})
}
