package worldmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeChatRequest(t *testing.T) {
	temp, topP, seed := 0.6, 0.95, int64(7)
	msgs := []Message{{Role: "system", Content: "Reply in <predicted_observation> tags & nothing else."}, {Role: "user", Content: "ls\n\u2028"}}
	cases := []struct {
		name  string
		req   Request
		extra map[string]any
		want  string
	}{
		{"bare", Request{Messages: msgs}, nil,
			`{"model":"m","messages":[{"role":"system","content":"Reply in <predicted_observation> tags & nothing else."},{"role":"user","content":"ls\n\u2028"}]}`},
		{"no messages", Request{}, nil,
			`{"model":"m","messages":[]}`},
		{"max_tokens", Request{Messages: msgs[1:], MaxTokens: 32768}, nil,
			`{"model":"m","messages":[{"role":"user","content":"ls\n\u2028"}],"max_tokens":32768}`},
		{"max_completion_tokens", Request{Messages: msgs[1:], MaxTokens: 100, MaxCompletionTokens: true}, nil,
			`{"model":"m","messages":[{"role":"user","content":"ls\n\u2028"}],"max_completion_tokens":100}`},
		{"sampling", Request{Model: "other", Messages: msgs[1:], Temperature: &temp, TopP: &topP, Seed: &seed}, nil,
			`{"model":"other","messages":[{"role":"user","content":"ls\n\u2028"}],"temperature":0.6,"top_p":0.95,"seed":7}`},
		{"extra appended in key order", Request{Messages: msgs[1:], MaxTokens: 5}, map[string]any{"top_k": 20, "chat_template_kwargs": map[string]any{"enable_thinking": false}, "stop": []string{"</x>"}},
			`{"model":"m","messages":[{"role":"user","content":"ls\n\u2028"}],"max_tokens":5,"chat_template_kwargs":{"enable_thinking":false},"stop":["</x>"],"top_k":20}`},
		{"extra replaces a field", Request{Messages: msgs[1:], MaxTokens: 5}, map[string]any{"max_tokens": 9, "top_k": 1},
			`{"max_tokens":9,"messages":[{"content":"ls\n\u2028","role":"user"}],"model":"m","top_k":1}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model := tc.req.Model
			if model == "" {
				model = "m"
			}
			got, err := encodeChatRequest(newChatRequest(tc.req, model), tc.extra)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChatResponseToResponse(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		want   *Response
		wantOK bool
	}{
		{"vllm with reasoning_content",
			`{"id":"x","model":"wm","choices":[{"index":0,"message":{"role":"assistant","content":"<predicted_observation>ok</predicted_observation>","reasoning_content":"thought"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":8}}}`,
			&Response{Content: "<predicted_observation>ok</predicted_observation>", Reasoning: "thought", FinishReason: "stop", Model: "wm", PromptTokens: 12, CompletionTokens: 5, CachedTokens: 8}, true},
		{"reasoning field and null content",
			`{"model":"wm","choices":[{"message":{"content":null,"reasoning":"long"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":9,"prompt_tokens_details":null}}`,
			&Response{Reasoning: "long", FinishReason: "length", Model: "wm", PromptTokens: 3, CompletionTokens: 9}, true},
		{"empty reasoning_content falls through to reasoning",
			`{"choices":[{"message":{"content":"a","reasoning_content":"","reasoning":"b"},"finish_reason":"stop"}]}`,
			&Response{Content: "a", Reasoning: "b", FinishReason: "stop"}, true},
		{"non-string reasoning is ignored, not fatal",
			`{"choices":[{"message":{"content":"a","reasoning":{"summary":"x"}},"finish_reason":"stop"}]}`,
			&Response{Content: "a", FinishReason: "stop"}, true},
		{"no choices", `{"model":"wm","choices":[]}`, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r chatResponse
			if err := json.Unmarshal([]byte(tc.body), &r); err != nil {
				t.Fatal(err)
			}
			got, ok := r.toResponse()
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzChatResponse feeds arbitrary answer bodies through the decoder: it
// may reject them, never panic, and a decoded choice always converts.
func FuzzChatResponse(f *testing.F) {
	f.Add(`{"choices":[{"message":{"content":"a","reasoning_content":"r"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`)
	f.Add(`{"choices":[{"message":{"content":null,"reasoning":[1,2]}}]}`)
	f.Add(`{"choices":null}`)
	f.Fuzz(func(t *testing.T, body string) {
		var r chatResponse
		if json.Unmarshal([]byte(body), &r) != nil {
			return
		}
		resp, ok := r.toResponse()
		if ok != (len(r.Choices) > 0) || (ok && resp.Content != r.Choices[0].Message.Content) {
			t.Fatalf("toResponse(%q) = %+v, %v", body, resp, ok)
		}
	})
}

// history is a 20-turn terminal episode's prompt, the size a simulator step
// sends late in an episode.
func history() []Message {
	msgs := []Message{{Role: "system", Content: strings.Repeat("You simulate a Linux terminal in a Python project. <rules> & details\n", 40)}}
	for i := 1; i <= 20; i++ {
		msgs = append(msgs,
			Message{Role: "user", Content: fmt.Sprintf(`[{"keystrokes":"python -m pytest -q tests/test_%d.py\n","duration":5}]`, i)},
			Message{Role: "assistant", Content: strings.Repeat(fmt.Sprintf("tests/test_%d.py ....F.. [ 80%%]\n\"quoted\" <tag>\n", i), 12)})
	}
	return msgs
}

// TestEncodeChatBodyReusesPrefix checks that encoding a session's requests
// through the prefix of the previous one gives exactly the bytes of a whole
// encoding, as the history grows, when it changes in the middle (context
// truncation), shrinks, switches model, is edited in place by its owner,
// and with parameters and extra fields; and that a grown history reuses.
func TestEncodeChatBodyReusesPrefix(t *testing.T) {
	temp := 0.6
	hist := history()
	steps := []struct {
		name   string
		model  string
		msgs   func() []Message
		extra  map[string]any
		reused bool
	}{
		{"first", "wm", func() []Message { return hist[:3] }, nil, false},
		{"grown", "wm", func() []Message { return hist[:5] }, nil, true},
		{"grown with extra", "wm", func() []Message { return hist[:9] }, map[string]any{"top_k": 20}, true},
		{"same length", "wm", func() []Message { return hist[:9] }, nil, true},
		{"truncated in the middle", "wm", func() []Message { return append([]Message{hist[0]}, hist[5:11]...) }, nil, false},
		{"shrunk", "wm", func() []Message { return hist[:2] }, nil, false},
		{"other model", "other", func() []Message { return hist[:4] }, nil, false},
		{"edited in place", "other", func() []Message {
			m := slices.Clone(hist[:6])
			m[1].Content = "edited <b>&</b>"
			return m
		}, nil, false},
		{"no messages", "other", func() []Message { return nil }, nil, false},
		{"grown from no messages", "other", func() []Message { return hist[:2] }, nil, true},
	}
	var prev *encodedPrefix
	for _, st := range steps {
		w := newChatRequest(Request{Messages: st.msgs(), MaxTokens: 128, Temperature: &temp}, st.model)
		whole, _, err := encodeChatBody(w, st.extra, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		reused := prev.extendedBy(w)
		got, next, err := encodeChatBody(w, st.extra, prev, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(whole), string(got)); diff != "" {
			t.Errorf("%s: body through the prefix differs from the whole encoding (-whole +got):\n%s", st.name, diff)
		}
		if reused != st.reused {
			t.Errorf("%s: reused the previous prefix %v, want %v", st.name, reused, st.reused)
		}
		var v map[string]any
		if err := json.Unmarshal(got, &v); err != nil {
			t.Errorf("%s: body is not JSON: %v", st.name, err)
		}
		prev = next
	}
}

// TestPrefixExtendedTwice extends one prefix by two different requests
// (forks of a session share its key), then each of those again: the
// first takes the prefix's room for its messages, the second copies, and
// every body and prefix stays its own.
func TestPrefixExtendedTwice(t *testing.T) {
	hist := history()
	encode := func(msgs []Message, prev *encodedPrefix) *encodedPrefix {
		t.Helper()
		w := newChatRequest(Request{Messages: msgs}, "wm")
		whole, err := encodeChatRequest(w, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, next, err := encodeChatBody(w, nil, prev, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(whole), string(got)); diff != "" {
			t.Fatalf("body through the prefix differs from the whole encoding (-whole +got):\n%s", diff)
		}
		if diff := cmp.Diff(msgs, next.msgs); diff != "" {
			t.Fatalf("prefix messages (-want +got):\n%s", diff)
		}
		return next
	}
	fork := func(m ...Message) []Message { return append(slices.Clone(hist[:5]), m...) }
	base := encode(hist[:3], nil)
	base = encode(hist[:5], base) // base's messages now have room after them
	a := encode(fork(Message{Role: "user", Content: "fork a"}), base)
	b := encode(fork(Message{Role: "user", Content: "fork b"}), base)
	same := encode(hist[:5], base)
	a2 := encode(fork(Message{Role: "user", Content: "fork a"}, Message{Role: "assistant", Content: "a2"}), a)
	b2 := encode(fork(Message{Role: "user", Content: "fork b"}, Message{Role: "assistant", Content: "b2"}), b)
	encode(fork(Message{Role: "user", Content: "same"}), same)
	for name, p := range map[string]*encodedPrefix{"a": a, "b": b, "a2": a2, "b2": b2} {
		if want := "fork " + name[:1]; p.msgs[5].Content != want {
			t.Errorf("prefix %s: message 5 is %q, want %q", name, p.msgs[5].Content, want)
		}
	}
}

func TestPrefixCacheBudget(t *testing.T) {
	c := newPrefixCache(8000)
	p := func(n int) *encodedPrefix { b := make([]byte, n); return &encodedPrefix{body: b, room: b} }
	c.put("a", p(900))
	c.put("b", p(900))
	c.get("a") // a is now the most recent
	for _, k := range []string{"c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s"} {
		c.put(k, p(900))
	}
	if c.bytes > c.max {
		t.Fatalf("holds %d bytes over a budget of %d", c.bytes, c.max)
	}
	if c.get("b") != nil || c.get("c") != nil {
		t.Error("the least recently used sessions were kept")
	}
	if c.get("s") == nil {
		t.Error("the latest session was forgotten")
	}
	c.put("big", p(2000)) // over an eighth of the budget: not kept
	if c.get("big") != nil {
		t.Error("a prefix over an eighth of the budget was kept")
	}
	c.put("s", p(10))
	if got := c.get("s"); got == nil || len(got.body) != 10 {
		t.Error("put did not replace a session's prefix")
	}
}

// BenchmarkEncodeChatRequest measures the body encoding of a 20-turn
// request, the size a simulator step sends late in an episode, whole and
// through the previous step's prefix (the step adds one exchange),
// alternating the two in one loop so that the reported ratio
// (whole/incremental) is measured under the same load.
func BenchmarkEncodeChatRequest(b *testing.B) {
	msgs := history()
	req := newChatRequest(Request{Messages: msgs, MaxTokens: 32768}, "wm")
	_, prev, err := encodeChatBody(newChatRequest(Request{Messages: msgs[:len(msgs)-2], MaxTokens: 32768}, "wm"), nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	var whole, incr time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if _, err := encodeChatRequest(req, nil); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, _, err := encodeChatBody(req, nil, prev, nil); err != nil {
			b.Fatal(err)
		}
		whole, incr = whole+t1.Sub(t0), incr+time.Since(t1)
	}
	b.ReportMetric(float64(whole.Nanoseconds())/float64(b.N), "ns-whole/op")
	b.ReportMetric(float64(incr.Nanoseconds())/float64(b.N), "ns-incremental/op")
	b.ReportMetric(float64(whole)/float64(incr), "whole/incremental")
}

// FuzzEncodeChatBody holds the hand-written encoding to encoding/json's
// (without HTML escaping) of the whole request, whole and through the
// prefix of a shorter request: the same bytes, or both fail.
func FuzzEncodeChatBody(f *testing.F) {
	f.Add("wm", "system", "You simulate <a> & \"b\"\n\t\u2028\u2029é\\/", "user", "ls\x00\x1f\x7f\xff\xe2\x80", 128, 0.6, true, false, uint8(2))
	f.Add("", "", "", "", "", 0, 1e-7, true, true, uint8(0))
	f.Add("m\u2028", "r", "\b\f\r", "u", "😀", -5, 1e21, true, false, uint8(3))
	f.Add("m", "r", "c", "u", "d", 1, math.NaN(), true, false, uint8(1))
	f.Fuzz(func(t *testing.T, model, role1, content1, role2, content2 string, maxTokens int, temp float64, params, completion bool, split uint8) {
		msgs := []Message{{Role: role1, Content: content1}, {Role: role2, Content: content2}, {Role: "assistant", Content: content2 + content1}}
		req := Request{Messages: msgs, MaxTokens: maxTokens, MaxCompletionTokens: completion}
		if params {
			seed := int64(maxTokens) * 7
			topP := -temp / 3
			req.Temperature, req.TopP, req.Seed = &temp, &topP, &seed
		}
		w := newChatRequest(req, model)
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		wantErr := enc.Encode(w)
		_, prev, err := encodeChatBody(newChatRequest(Request{Messages: msgs[:int(split)%(len(msgs)+1)]}, model), nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []*encodedPrefix{nil, prev} {
			got, _, err := encodeChatBody(w, nil, p, nil)
			if (err != nil) != (wantErr != nil) || err != nil && !strings.HasSuffix(err.Error(), wantErr.Error()) {
				t.Fatalf("error %v, encoding/json %v", err, wantErr)
			}
			if err == nil && string(got) != strings.TrimSuffix(want.String(), "\n") {
				t.Fatalf("through prefix %v:\n got %s\nwant %s", p != nil, got, want.Bytes())
			}
		}
	})
}
