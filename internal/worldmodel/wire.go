package worldmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/agentworld/agentworld/internal/jsonappend"
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
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	chatParams
}

// chatParams are the fields that follow the messages in the body.
type chatParams struct {
	MaxTokens           *int     `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int     `json:"max_completion_tokens,omitempty"`
	Temperature         *float64 `json:"temperature,omitempty"`
	TopP                *float64 `json:"top_p,omitempty"`
	Seed                *int64   `json:"seed,omitempty"`
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
	w := chatRequest{Model: model, Messages: req.Messages, chatParams: chatParams{Temperature: req.Temperature, TopP: req.TopP, Seed: req.Seed}}
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
	body, _, err := encodeChatBody(w, extra, nil, nil)
	return body, err
}

// encodedPrefix is the start of an encoded body — `{"model":…,"messages":[`
// and the messages, without the closing bracket — with what it encodes.
// Its bytes are never written after it is made, so requests share it
// freely.
type encodedPrefix struct {
	model string
	// msgs is a copy of the messages (the caller may reuse its slice).
	msgs []Message
	body []byte
	// room is body with the capacity of its memory. What lies past body's
	// length is the rest of the request it was made for, and the first
	// request to extend the prefix (see extended) may write its own there
	// once nothing reads that request any more (use; see bodyUse), so
	// that a session's steps encode into one buffer rather than copying
	// the history into a new one every step.
	room []byte
	// use follows the request body made with the prefix; nil when the
	// client does not follow it, and room is never written.
	use *bodyUse
	// extended is set by the first request to extend the prefix. It may
	// append its new messages to msgs in place, past its length (no other
	// prefix sees that memory), and write into room; others copy both.
	extended atomic.Bool
}

// size is what the prefix holds on to, for the cache's budget (the message
// strings are shared with the caller's history and not counted).
func (p *encodedPrefix) size() int64 { return int64(cap(p.room) + 32*cap(p.msgs)) }

// encodeChatBody is encodeChatRequest reusing prev, the prefix of an earlier
// request of the same session: when w has the same model and its messages
// begin with prev's (the history of a session only grows at the end), only
// the new messages are encoded, after prev's bytes. It also returns the
// prefix of this body for the next request. The bytes are the same as
// without prev: the JSON encoding of the whole request as encoding/json
// writes it without HTML escaping (FuzzEncodeChatBody), written here
// without reflection.
//
// use, when not nil, follows net/http's reading of the body returned
// (the caller sends it as its only request body, and sets use.over when
// done); the body then gets room to grow, and the next request of the
// session writes into that memory once use says nothing reads it.
func encodeChatBody(w chatRequest, extra map[string]any, prev *encodedPrefix, use *bodyUse) (body []byte, next *encodedPrefix, err error) {
	reuse := prev.extendedBy(w)
	claimed := reuse && prev.extended.CompareAndSwap(false, true)
	from, size := 0, 256+len(w.Model)
	if reuse {
		from, size = len(prev.msgs), size+len(prev.body)
	}
	for _, m := range w.Messages[from:] {
		size += 32 + len(m.Role) + len(m.Content) + len(m.Content)/16
	}
	room := size
	if use != nil {
		room *= 2 // a session grows by a step at a time
	}
	var b []byte
	switch {
	case claimed && cap(prev.room) >= size && prev.use.free():
		b = prev.room
	case reuse:
		b = append(make([]byte, 0, room), prev.body...)
	default:
		b = make([]byte, 0, room)
		b = append(b, `{"model":`...)
		b = jsonappend.String(b, w.Model)
		b = append(b, `,"messages":[`...)
	}
	for i, m := range w.Messages[from:] {
		if from+i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = jsonappend.String(b, m.Role)
		b = append(b, `,"content":`...)
		b = jsonappend.String(b, m.Content)
		b = append(b, '}')
	}
	prefixLen := len(b)
	b = append(b, ']')
	if b, err = appendChatParams(b, w.chatParams); err != nil {
		return nil, nil, err
	}
	b = append(b, '}')
	next = &encodedPrefix{model: w.Model, body: b[:prefixLen:prefixLen], room: b[:prefixLen], use: use}
	if claimed {
		next.msgs = append(prev.msgs, w.Messages[from:]...)
	} else {
		next.msgs = slices.Clone(w.Messages)
	}
	if len(extra) == 0 {
		return b, next, nil
	}
	b, err = mergeExtra(b, extra)
	return b, next, err
}

// appendChatParams appends p's fields that are set, each after a comma,
// as encoding/json writes them.
func appendChatParams(b []byte, p chatParams) ([]byte, error) {
	if p.MaxTokens != nil {
		b = strconv.AppendInt(append(b, `,"max_tokens":`...), int64(*p.MaxTokens), 10)
	}
	if p.MaxCompletionTokens != nil {
		b = strconv.AppendInt(append(b, `,"max_completion_tokens":`...), int64(*p.MaxCompletionTokens), 10)
	}
	for _, f := range []struct {
		key string
		v   *float64
	}{{`,"temperature":`, p.Temperature}, {`,"top_p":`, p.TopP}} {
		if f.v == nil {
			continue
		}
		var ok bool
		if b, ok = jsonappend.Float(append(b, f.key...), *f.v); !ok {
			_, err := json.Marshal(*f.v) // its error, word for word
			return nil, fmt.Errorf("encoding the chat request: %w", err)
		}
	}
	if p.Seed != nil {
		b = strconv.AppendInt(append(b, `,"seed":`...), *p.Seed, 10)
	}
	return b, nil
}

// extendedBy reports whether w's body may start with p: same model, and
// p's messages are the first of w's. Comparing strings that share memory
// (a session's history) costs a pointer comparison each.
func (p *encodedPrefix) extendedBy(w chatRequest) bool {
	if p == nil || p.model != w.Model || len(p.msgs) > len(w.Messages) {
		return false
	}
	for i, m := range p.msgs {
		if m != w.Messages[i] {
			return false
		}
	}
	return true
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

// decodeAnswer reads a chat completion answer to a request for model; an
// answer without a choice is ErrNoChoices. The usual answer is read by
// scanAnswer, any other by encoding/json.
func decodeAnswer(body []byte, model string) (*Response, error) {
	if resp, ok := scanAnswer(body, model); ok {
		return resp, nil
	}
	return unmarshalAnswer(body)
}

// unmarshalAnswer is decodeAnswer through encoding/json, for every answer.
func unmarshalAnswer(body []byte) (*Response, error) {
	var answer chatResponse
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, fmt.Errorf("%w: the answer is not a chat completion (%v): %.200q", ErrUnavailable, err, body)
	}
	resp, ok := answer.toResponse()
	if !ok {
		return nil, ErrNoChoices
	}
	return resp, nil
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
