package worldmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The chat completion wire format, kept apart from Client's logic.
//
// Why not the SDK's typed params and response: the SDK marshals every
// message through a reflective encoder with per-field custom marshallers and
// decodes answers through gjson, which together cost more CPU per call than
// everything else the simulator does in a step (for a 20-turn history ~10x
// the time and 8x the bytes of encoding/json; BenchmarkEncodeChatRequest).
// The SDK still owns the transport, retries, backoff, auth and API errors;
// only the body bytes are ours.

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
// returns).
func encodeChatRequest(w chatRequest) ([]byte, error) {
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
	return b[:len(b)-1], nil // Encode ends with a newline
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
