package worldmodel

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// answerCases are answers as servers send them (vLLM 0.8+ and SGLang shapes,
// an OpenAI-style answer with the fields the client does not read) and the
// odd ones encoding/json must decide: scanned says whether scanAnswer reads
// the body itself.
var answerCases = []struct {
	name    string
	body    string
	scanned bool
}{
	{"vllm", string(typicalAnswer), true},
	{"vllm reasoning_content", `{"id":"chatcmpl-9","object":"chat.completion","created":1733000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"think\nabout \"it\"","content":"<predicted_observation>ok</predicted_observation>","tool_calls":[]},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":12,"total_tokens":17,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":8}},"prompt_logprobs":null,"kv_transfer_params":null}`, true},
	{"sglang reasoning", `{"id":"1","object":"chat.completion","created":1,"model":"wm","choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning":"long","tool_calls":null},"logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":{"prompt_tokens":3,"total_tokens":12,"completion_tokens":9,"prompt_tokens_details":null}}`, true},
	{"openai", `{"id":"chatcmpl-x","object":"chat.completion","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_1"}`, true},
	{"white space and escapes", " {\n \"model\" : \"wm\" ,\"choices\" : [ {\"message\":{\"content\":\"tab\\there \\u00e9\\u2028 \\/ \\\\ \\b\\f\\r é ✓\"} , \"finish_reason\" : null } ] ,\"usage\":null}\t\r\n", true},
	{"empty reasoning_content falls through", `{"choices":[{"message":{"content":"a","reasoning_content":"","reasoning":"b"},"finish_reason":"stop"}]}`, true},
	{"non-string reasoning ignored", `{"choices":[{"message":{"content":"a","reasoning":{"summary":["x",1.5e-3,true,false,null,-0]}},"finish_reason":"stop"}]}`, true},
	{"escaped reasoning", `{"choices":[{"message":{"reasoning_content":"a\"b\\u0041"}}]}`, true},
	{"null choice", `{"model":"wm","choices":[null]}`, true},
	{"negative and zero tokens", `{"choices":[{}],"usage":{"prompt_tokens":-0,"completion_tokens":0,"prompt_tokens_details":{"cached_tokens":-7}}}`, true},
	{"skipped string with escapes and UTF-8", `{"id":"\u00e9\"\\\/\b\f\n\r\t é","choices":[{}]}`, true},
	{"skipped string with invalid UTF-8", "{\"id\":\"\xff\",\"choices\":[{}]}", true},
	{"surrogate pair", `{"choices":[{"message":{"content":"\ud83d\ude00"}}]}`, true},
	{"lone surrogate", `{"choices":[{"message":{"content":"\ud83d"}}]}`, true},
	{"surrogate then an escape", `{"choices":[{"message":{"content":"\ud83d\u0041\ude00\n"}}]}`, true},
	{"skipped surrogate pair", `{"id":"\ud83d\ude00\ud83d","choices":[{}]}`, true},
	{"invalid UTF-8 in content", "{\"choices\":[{\"message\":{\"content\":\"a\xffb\xed\xa0\x80\"}}]}", true},
	{"finish_reason spelled with an escape", `{"choices":[{"finish_reason":"st\u006fp"}]}`, true},

	{"no choices", `{"model":"wm","choices":[]}`, false},
	{"null choices", `{"model":"wm","choices":null}`, false},
	{"two choices", `{"choices":[{"message":{"content":"a"}},{"message":{"content":"b"}}]}`, false},
	{"top-level null", `null`, false},
	{"empty", ``, false},
	{"not an object", `[1]`, false},
	{"trailing data", `{"choices":[{}]} x`, false},
	{"two objects", `{"choices":[{}]}{}`, false},
	{"trailing comma", `{"choices":[{}],}`, false},
	{"trailing comma in array", `{"choices":[{},]}`, false},
	{"missing comma", `{"model":"a" "choices":[{}]}`, false},
	{"duplicate model", `{"model":"a","choices":[{}],"model":"b"}`, false},
	{"duplicate content", `{"choices":[{"message":{"content":"a","content":"b"}}]}`, false},
	{"duplicate choices", `{"choices":[{"message":{"content":"a"}}],"choices":[{"finish_reason":"stop"}]}`, false},
	{"key in another case", `{"Model":"a","choices":[{"message":{"Content":"b"}}]}`, false},
	{"key folding to a field", "{\"choices\":[{\"message\":{\"content\":\"a\",\"rea\u017foning\":\"b\"}}]}", false},
	{"escaped key", `{"choices":[{"message":{"cont\u0065nt":"a"}}]}`, false},
	{"content not a string", `{"choices":[{"message":{"content":5}}]}`, false},
	{"finish_reason not a string", `{"choices":[{"finish_reason":true}]}`, false},
	{"choices not an array", `{"choices":{"message":{}}}`, false},
	{"choice not an object", `{"choices":["a"]}`, false},
	{"message not an object", `{"choices":[{"message":"a"}]}`, false},
	{"usage not an object", `{"choices":[{}],"usage":[]}`, false},
	{"fraction", `{"choices":[{}],"usage":{"prompt_tokens":1.0}}`, false},
	{"exponent", `{"choices":[{}],"usage":{"prompt_tokens":1e2}}`, false},
	{"leading zero", `{"choices":[{}],"usage":{"prompt_tokens":01}}`, false},
	{"huge", `{"choices":[{}],"usage":{"prompt_tokens":99999999999999999999}}`, false},
	{"control character", "{\"choices\":[{\"message\":{\"content\":\"a\nb\"}}]}", false},
	{"bad escape", `{"choices":[{"message":{"content":"\x"}}]}`, false},
	{"short unicode escape", `{"choices":[{"message":{"content":"\u12"}}]}`, false},
	{"unterminated", `{"choices":[{"message":{"content":"abc`, false},
	{"bad number skipped", `{"created":-,"choices":[{}]}`, false},
	{"bad literal skipped", `{"object":nul,"choices":[{}]}`, false},
	{"deep nesting skipped", `{"x":` + deep(maxSkipDepth+2) + `,"choices":[{}]}`, false},
}

// deep is n nested arrays.
func deep(n int) string {
	b := make([]byte, 0, 2*n)
	for range n {
		b = append(b, '[')
	}
	for range n {
		b = append(b, ']')
	}
	return string(b)
}

// TestScanAnswer checks that each answer is read by scanAnswer or left to
// encoding/json as expected, and that decodeAnswer gives what
// encoding/json gives either way.
func TestScanAnswer(t *testing.T) {
	for _, tc := range answerCases {
		t.Run(tc.name, func(t *testing.T) {
			_, scanned := scanAnswer([]byte(tc.body), "wm")
			if scanned != tc.scanned {
				t.Errorf("read by scanAnswer %v, want %v", scanned, tc.scanned)
			}
			checkAnswerAsJSON(t, []byte(tc.body))
		})
	}
}

// FuzzScanAnswer holds decodeAnswer to encoding/json: whatever the body,
// both give the same Response or both fail, with the same error.
func FuzzScanAnswer(f *testing.F) {
	for _, tc := range answerCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(checkAnswerAsJSON)
}

func checkAnswerAsJSON(t *testing.T, body []byte) {
	want, wantErr := unmarshalAnswer(body)
	if scanned, ok := scanAnswer(body, "wm"); ok && wantErr != nil {
		t.Fatalf("scanAnswer(%q) read %+v, encoding/json fails: %v", body, scanned, wantErr)
	}
	got, err := decodeAnswer(body, "wm")
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("decodeAnswer(%q): error %v, encoding/json %v", body, err, wantErr)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("decodeAnswer(%q) (-encoding/json +got):\n%s", body, diff)
	}
}
