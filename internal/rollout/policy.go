package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Message is one chat message in the OpenAI format, as sent to the policy
// and written to the output.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is an OpenAI function call.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names a function and carries its arguments as a JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Turn holds one policy call's token fields exactly as the policy server
// returned them; each is null when the server sent none.
type Turn struct {
	PromptTokenIDs     json.RawMessage `json:"prompt_token_ids"`
	GenerationTokenIDs json.RawMessage `json:"generation_token_ids"`
	GenerationLogProbs json.RawMessage `json:"generation_log_probs"`
}

// Policy calls an OpenAI-compatible chat completions endpoint.
type Policy struct {
	// URL is the base URL (http://host:8000/v1); a "{session_id}" in it is
	// replaced by the episode's simulator session id, for trainers whose
	// inference proxy keys trajectories by session.
	URL string
	// Model is the model name sent.
	Model string
	// APIKey is sent as a bearer token; "" sends none.
	APIKey string
	// Temperature is sent when non-nil.
	Temperature *float64
	// MaxTokens is sent when > 0.
	MaxTokens int
	// HTTP is the client; nil means one that keeps up to 1024 idle
	// connections to the policy server, so hundreds of episodes in flight
	// reuse their connections.
	HTTP *http.Client
}

// policyClient is the default policy client.
var policyClient = &http.Client{Transport: func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 1024
	return t
}()}

// tool is an OpenAI tool definition.
type tool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// completion is what the loop reads of a chat completion.
type completion struct {
	PromptTokenIDs json.RawMessage `json:"prompt_token_ids"`
	Choices        []struct {
		Message struct {
			Content   *string    `json:"content"`
			ToolCalls []ToolCall `json:"tool_calls"`
			// NeMo Gym style token fields travel on the message.
			PromptTokenIDs     json.RawMessage `json:"prompt_token_ids"`
			GenerationTokenIDs json.RawMessage `json:"generation_token_ids"`
			GenerationLogProbs json.RawMessage `json:"generation_log_probs"`
		} `json:"message"`
		// vLLM's return_token_ids answer.
		TokenIDs json.RawMessage `json:"token_ids"`
		Logprobs *struct {
			Content []struct {
				Logprob json.RawMessage `json:"logprob"`
			} `json:"content"`
		} `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

// reply is one policy answer.
type reply struct {
	Message      Message
	Turn         Turn
	FinishReason string
}

func isNull(r json.RawMessage) bool {
	r = bytes.TrimSpace(r)
	return len(r) == 0 || string(r) == "null"
}

// complete asks the policy for the next assistant message. messages is
// the JSON array of the conversation so far and tools the JSON array of
// tool definitions (nil: none), both already encoded, so a turn costs the
// encoding of its new messages only, not of the whole history again. It
// requests logprobs and token ids (vLLM's return_token_ids); servers that
// ignore them still answer.
func (p *Policy) complete(ctx context.Context, sessionID string, messages, tools []byte) (*reply, error) {
	b, err := p.requestBody(messages, tools)
	if err != nil {
		return nil, err
	}
	base := strings.ReplaceAll(p.URL, "{session_id}", url.PathEscape(sessionID))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/chat/completions", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if p.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+p.APIKey)
	}
	hc := p.HTTP
	if hc == nil {
		hc = policyClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("policy: %s: %s", resp.Status, bytes.TrimSpace(raw))
	}
	return parseCompletion(raw)
}

// requestBody is the chat completion request: the bytes json.Marshal
// would write for a map of these fields (keys in sorted order), assembled
// around the already encoded messages and tools.
func (p *Policy) requestBody(messages, tools []byte) ([]byte, error) {
	model, err := json.Marshal(p.Model)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(messages)+len(tools)+len(model)+128)
	b = append(b, `{"logprobs":true`...)
	if p.MaxTokens > 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(p.MaxTokens), 10)
	}
	b = append(b, `,"messages":`...)
	b = append(b, messages...)
	b = append(b, `,"model":`...)
	b = append(b, model...)
	b = append(b, `,"return_token_ids":true`...)
	if p.Temperature != nil {
		t, err := json.Marshal(*p.Temperature)
		if err != nil {
			return nil, fmt.Errorf("policy temperature: %w", err)
		}
		b = append(b, `,"temperature":`...)
		b = append(b, t...)
	}
	if len(tools) > 0 {
		b = append(b, `,"tools":`...)
		b = append(b, tools...)
	}
	return append(b, '}'), nil
}

// transcript is an episode's conversation and its JSON encoding, grown
// together: each policy request encodes only the messages added since the
// previous one.
type transcript struct {
	msgs []Message
	// enc is "[" and the encoded msgs[:n], comma-separated, without the
	// closing bracket.
	enc []byte
	n   int
}

// add appends messages to the conversation.
func (t *transcript) add(ms ...Message) { t.msgs = append(t.msgs, ms...) }

// json returns the conversation as a JSON array, the bytes json.Marshal
// writes for t.msgs. The result is only valid until the next call.
func (t *transcript) json() ([]byte, error) {
	if t.enc == nil {
		t.enc = append(make([]byte, 0, 4096), '[')
	}
	for ; t.n < len(t.msgs); t.n++ {
		m, err := json.Marshal(t.msgs[t.n])
		if err != nil {
			return nil, err
		}
		if t.n > 0 {
			t.enc = append(t.enc, ',')
		}
		t.enc = append(t.enc, m...)
	}
	// The bracket goes past the encoded prefix, where the next message's
	// comma will overwrite it.
	return append(t.enc, ']'), nil
}

// clone is a copy that shares nothing with t.
func (t *transcript) clone() transcript {
	return transcript{msgs: slices.Clone(t.msgs), enc: slices.Clone(t.enc), n: t.n}
}

// parseCompletion reads the first choice and its token fields. Token ids
// and logprobs are copied as the server wrote them: the message's own
// fields first (NeMo Gym), then vLLM's prompt_token_ids / token_ids, and
// logprobs.content[].logprob assembled from the literal numbers.
func parseCompletion(raw []byte) (*reply, error) {
	var c completion
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("policy: answer is not a chat completion: %w", err)
	}
	if len(c.Choices) == 0 {
		return nil, fmt.Errorf("policy: answer has no choices")
	}
	ch := c.Choices[0]
	r := &reply{FinishReason: ch.FinishReason}
	r.Message.Role = "assistant"
	if ch.Message.Content != nil {
		r.Message.Content = *ch.Message.Content
	}
	r.Message.ToolCalls = ch.Message.ToolCalls
	pick := func(a, b json.RawMessage) json.RawMessage {
		if !isNull(a) {
			return a
		}
		if !isNull(b) {
			return b
		}
		return nil
	}
	r.Turn.PromptTokenIDs = pick(ch.Message.PromptTokenIDs, c.PromptTokenIDs)
	r.Turn.GenerationTokenIDs = pick(ch.Message.GenerationTokenIDs, ch.TokenIDs)
	r.Turn.GenerationLogProbs = pick(ch.Message.GenerationLogProbs, nil)
	if r.Turn.GenerationLogProbs == nil && ch.Logprobs != nil && ch.Logprobs.Content != nil {
		var buf bytes.Buffer
		buf.WriteByte('[')
		for i, t := range ch.Logprobs.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if isNull(t.Logprob) {
				buf.WriteString("null")
			} else {
				buf.Write(bytes.TrimSpace(t.Logprob))
			}
		}
		buf.WriteByte(']')
		r.Turn.GenerationLogProbs = buf.Bytes()
	}
	return r, nil
}
