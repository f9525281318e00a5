package worldmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// The chat completion wire format, kept apart from Client's logic.
//
// Why not openai-go's typed params and response: the SDK marshals every
// message through a reflective encoder with per-field custom marshallers and
// decodes answers through gjson, which together cost more CPU per call than
// everything else the simulator does in a step (for a 20-turn history ~10x
// the time and 8x the bytes of encoding/json, measured when the SDK was
// still a dependency). The transport around these bytes is transport.go.

// chatRequest is the JSON body of POST /chat/completions.
type chatRequest struct {
	Model               string    `json:"model"`
	Messages            []Message `json:"messages"`
	MaxTokens           *int      `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int      `json:"max_completion_tokens,omitempty"`
	Temperature         *float64  `json:"temperature,omitempty"`
	TopP                *float64  `json:"top_p,omitempty"`
	Seed                *int64    `json:"seed,omitempty"`
}

// chatResponse is the part of a chat completion answer the client reads.
type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
			// Server-separated thinking: vLLM and SGLang call it
			// reasoning_content, some servers reasoning. Raw, so that a server
			// that puts something other than a string there does not fail the
			// whole answer.
			ReasoningContent json.RawMessage `json:"reasoning_content"`
			Reasoning        json.RawMessage `json:"reasoning"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// newChatRequest converts a Request into the wire body for model.
func newChatRequest(req Request, model string) chatRequest {
	w := chatRequest{Model: model, Messages: req.Messages, Temperature: req.Temperature, TopP: req.TopP, Seed: req.Seed}
	if w.Messages == nil {
		w.Messages = []Message{}
	}
	if req.MaxTokens > 0 {
		n := req.MaxTokens
		if req.MaxCompletionTokens {
			w.MaxCompletionTokens = &n
		} else {
			w.MaxTokens = &n
		}
	}
	return w
}

// encodeChatRequest writes the body without HTML escaping: prompts are full
// of <tags>, and "\u003c" for every "<" only makes requests longer. The
// buffer is sized from the messages up front, so a long history is one
// allocation rather than a doubling series (a pooled buffer would need a
// copy anyway: the transport may still read the body after Complete
// returns). extra's keys are added at the top level, in sorted order,
// replacing a field of w of the same name.
func encodeChatRequest(w chatRequest, extra map[string]any) ([]byte, error) {
	size := 256 + len(w.Model)
	for _, m := range w.Messages {
		size += 32 + len(m.Role) + len(m.Content) + len(m.Content)/16
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, fmt.Errorf("encoding the chat request: %w", err)
	}
	b := buf.Bytes()
	b = b[:len(b)-1] // Encode ends with a newline
	if len(extra) == 0 {
		return b, nil
	}
	return mergeExtra(b, extra)
}

// mergeExtra sets extra's keys in the encoded object body. Keys the body
// lacks are appended (the common case, no re-encoding of the messages);
// when one replaces a field the body is re-encoded through a map.
func mergeExtra(body []byte, extra map[string]any) ([]byte, error) {
	keys := slices.Sorted(maps.Keys(extra))
	for _, k := range keys {
		if slices.Contains(chatRequestFields, k) {
			return replaceFields(body, extra)
		}
	}
	out := bytes.NewBuffer(body[:len(body)-1]) // drop the closing brace
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for _, k := range keys {
		out.WriteByte(',')
		if err := enc.Encode(k); err != nil {
			return nil, err
		}
		out.Truncate(out.Len() - 1)
		out.WriteByte(':')
		if err := enc.Encode(extra[k]); err != nil {
			return nil, fmt.Errorf("encoding extra body field %q: %w", k, err)
		}
		out.Truncate(out.Len() - 1)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

// chatRequestFields are the JSON names of chatRequest's fields.
var chatRequestFields = []string{"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed"}

func replaceFields(body []byte, extra map[string]any) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	maps.Copy(m, extra)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encoding the chat request with its extra body: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// toResponse converts a decoded answer; ok is false when it has no choice.
func (r *chatResponse) toResponse() (resp *Response, ok bool) {
	if len(r.Choices) == 0 {
		return nil, false
	}
	ch := r.Choices[0]
	return &Response{
		Content:          ch.Message.Content,
		Reasoning:        firstString(ch.Message.ReasoningContent, ch.Message.Reasoning),
		FinishReason:     ch.FinishReason,
		Model:            r.Model,
		PromptTokens:     r.Usage.PromptTokens,
		CompletionTokens: r.Usage.CompletionTokens,
		CachedTokens:     r.Usage.PromptTokensDetails.CachedTokens,
	}, true
}

// firstString is the first of raws that holds a non-empty JSON string.
func firstString(raws ...json.RawMessage) string {
	for _, raw := range raws {
		if len(raw) == 0 || raw[0] != '"' {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// tokenizeRequest is the body of vLLM's POST /tokenize for plain text.
type tokenizeRequest struct {
	Model            string `json:"model"`
	Prompt           string `json:"prompt"`
	AddSpecialTokens bool   `json:"add_special_tokens"`
}

// decodeTokenize reads a /tokenize answer: {"count", "max_model_len",
// "tokens"}. The count is taken as given, else the length of the token list;
// an answer with neither is an error rather than zero tokens.
func decodeTokenize(raw []byte) (TokenCount, error) {
	var r struct {
		Count       *int              `json:"count"`
		MaxModelLen int               `json:"max_model_len"`
		Tokens      []json.RawMessage `json:"tokens"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return TokenCount{}, fmt.Errorf("%w: tokenize answer: %w", ErrRejected, err)
	}
	switch {
	case r.Count != nil && *r.Count >= 0:
		return TokenCount{Count: *r.Count, MaxModelLen: r.MaxModelLen}, nil
	case r.Count == nil && r.Tokens != nil:
		return TokenCount{Count: len(r.Tokens), MaxModelLen: r.MaxModelLen}, nil
	}
	return TokenCount{}, fmt.Errorf("%w: tokenize answer has no count: %.200s", ErrRejected, raw)
}
