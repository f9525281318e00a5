package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Published inference defaults; nothing else is sent unless asked for.
const (
	DefaultMaxTokens   = 32768
	DefaultTemperature = 0.6
)

// InferSettings are the generation parameters of the model under test. They
// go into every request and so into the cache key.
type InferSettings struct {
	// MaxTokens is the budget; 0 means DefaultMaxTokens, negative sends none.
	MaxTokens int `json:"max_tokens"`
	// MaxCompletionTokens sends the budget as max_completion_tokens.
	MaxCompletionTokens bool `json:"max_completion_tokens,omitempty"`
	// Temperature nil means DefaultTemperature.
	Temperature *float64 `json:"temperature,omitempty"`
	// TopP and Seed are sent only when set.
	TopP *float64 `json:"top_p,omitempty"`
	Seed *int64   `json:"seed,omitempty"`
	// Extra is merged into the request body (vLLM's top_k, …).
	Extra map[string]any `json:"extra_body,omitempty"`
}

// request builds the model request for a record with these settings.
func (s InferSettings) request(msgs []worldmodel.Message) worldmodel.Request {
	req := worldmodel.Request{Messages: msgs, MaxCompletionTokens: s.MaxCompletionTokens, TopP: s.TopP, Seed: s.Seed, Extra: s.Extra}
	switch {
	case s.MaxTokens == 0:
		req.MaxTokens = DefaultMaxTokens
	case s.MaxTokens > 0:
		req.MaxTokens = s.MaxTokens
	}
	t := DefaultTemperature
	if s.Temperature != nil {
		t = *s.Temperature
	}
	req.Temperature = &t
	return req
}

// InferMessages builds the conversation the model under test sees, as the
// published evaluation does: the record's system_str as system message
// (omitted when empty), each earlier turn as a user message (its action
// prompt) and an assistant message (its real observation), then the
// evaluated turn's prompt — prompt[turn_idx-1], which carries the answer
// format instruction, not current_prompt.
func InferMessages(rec *trajectory.Record) ([]worldmodel.Message, error) {
	if err := rec.Validate(); err != nil {
		return nil, err
	}
	msgs := make([]worldmodel.Message, 0, 2*rec.TurnIdx)
	if rec.SystemStr != "" {
		msgs = append(msgs, worldmodel.Message{Role: "system", Content: rec.SystemStr})
	}
	for i := 0; i < rec.TurnIdx-1; i++ {
		msgs = append(msgs,
			worldmodel.Message{Role: "user", Content: rec.Prompt[i]},
			worldmodel.Message{Role: "assistant", Content: rec.Response[i]})
	}
	return append(msgs, worldmodel.Message{Role: "user", Content: rec.Prompt[rec.TurnIdx-1]}), nil
}

// newPrediction fills the identity fields of a prediction row.
func newPrediction(it *Item, model string) Prediction {
	p := Prediction{Sample: it.Sample, File: it.File, Line: it.Line, Domain: it.Domain(), Model: model}
	if it.Record != nil {
		p.Task = it.Record.Task
		p.ID = it.Record.ID.String()
		p.TurnIdx = it.Record.TurnIdx
	}
	return p
}

// inferer runs the model under test on one row.
type inferer struct {
	model    worldmodel.Completer
	name     string
	settings InferSettings
	cache    *answercache.Cache
	// tmpl re-renders system prompts (nil: sent as they are); data is the
	// data dir or file, for naming a row that fails to re-render.
	tmpl *Template
	data string
}

// Template is a world-model template version rows are evaluated under
// (package promptlib makes one).
type Template struct {
	// Name and ID identify the version in run.json and in cache keys.
	Name, ID string
	// Render is a row's system prompt of domain d rendered under the
	// version. It is called concurrently. An error (a prompt whose
	// components cannot be recovered) stops the run, naming the row.
	Render func(d domain.Domain, system string) (string, error)
}

// rerender returns it's record with its system prompt rendered under
// the template, or the record itself without one.
func (in *inferer) rerender(it *Item) (*trajectory.Record, error) {
	if in.tmpl == nil {
		return it.Record, nil
	}
	sys, err := in.tmpl.Render(domain.Domain(it.Domain()), it.Record.SystemStr)
	if err != nil {
		path := it.File
		if st, serr := os.Stat(in.data); serr == nil && st.IsDir() {
			path = filepath.Join(in.data, it.File)
		} else if serr == nil {
			path = in.data
		}
		return nil, fmt.Errorf("%s:%d: system_str: template %s: %w", path, it.Line, in.tmpl.Name, err)
	}
	r := *it.Record
	r.SystemStr = sys
	return &r, nil
}

// key is the cache key of req: the request's hash, and with a template
// also the version's id, so runs under different versions never share
// answers.
func (in *inferer) key(req worldmodel.Request) string {
	k := in.cache.Key(req, in.name)
	if k == "" || in.tmpl == nil {
		return k
	}
	h := sha256.Sum256([]byte(k + "\x00template\x00" + in.tmpl.ID))
	return hex.EncodeToString(h[:])
}

// infer produces the prediction row of one sample. Model failures become
// failed rows (never errors) so that a run keeps going and counts them; only
// cancellation of ctx is returned as an error.
func (in *inferer) infer(ctx context.Context, it *Item) (Prediction, error) {
	p := newPrediction(it, in.name)
	if it.Err != nil {
		p.Failure, p.Error = FailInvalidRecord, it.Err.Error()
		return p, nil
	}
	rec, err := in.rerender(it)
	if err != nil {
		return p, err
	}
	msgs, err := InferMessages(rec)
	if err != nil {
		p.Failure, p.Error = FailInvalidRecord, fmt.Sprintf("%s:%d: %v", it.File, it.Line, err)
		return p, nil
	}
	req := in.settings.request(msgs)
	key := in.key(req)
	resp, hit := in.cache.Get(key)
	if !hit {
		resp, err = in.model.Complete(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return p, ctx.Err()
			}
			// A rejected request (HTTP 4xx: prompt too long, bad parameter)
			// is also recorded as a transport failure; the error text says
			// which, and resume tries it again like any endpoint failure.
			p.Failure = FailTransport
			p.Error = fmt.Sprintf("model %s: sample %s (%s:%d, task %q id %s turn %d): %v", in.name, it.Sample, it.File, it.Line, p.Task, p.ID, p.TurnIdx, err)
			return p, nil
		}
	}
	p.Generation = resp.Content
	p.Reasoning = resp.Reasoning
	p.FinishReason = resp.FinishReason
	p.Truncated = resp.Truncated()
	usage := *resp
	usage.Content, usage.Reasoning = "", ""
	p.Usage = &usage
	switch {
	case resp.Content == "" && p.Truncated:
		p.Failure = FailLength
		p.Error = fmt.Sprintf("sample %s (%s:%d): generation cut by the token budget (finish_reason=length, %d completion tokens) before any answer; raise the token budget (max_tokens)", it.Sample, it.File, it.Line, resp.CompletionTokens)
	case resp.Content == "":
		p.Failure = FailNoGeneration
		p.Error = fmt.Sprintf("sample %s (%s:%d): the model returned no content (finish_reason=%q)", it.Sample, it.File, it.Line, resp.FinishReason)
	default:
		p.Prediction = conversation.ExtractPrediction(resp.Content)
		// Only complete generations are reused: a cut one may be a budget
		// problem the user is about to fix.
		if !hit && !p.Truncated {
			in.cache.Put(key, resp)
		}
	}
	return p, nil
}
