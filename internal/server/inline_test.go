package server

import (
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/api"
)

// TestLargeInlineSpecIsRefused posts a 4.5 MB inline world spec (under the
// body limit): it is refused with 413 naming the field before it is
// parsed, with the operator's hint for the limit, and a spec within the
// bounds still creates a session.
func TestLargeInlineSpecIsRefused(t *testing.T) {
	hint := "set by serve --max-inline-spec-bytes"
	h := newHarness(t, "", &Options{Edge: Edge{Hints: map[string]string{"MaxInlineSpecBytes": hint}}})
	big := `{"world": {"domain": "terminal", "task_description": "` + strings.Repeat("t", 4_500_000) + `", "action_space": "keys"}}`
	var e api.ErrorBody
	if st := h.do("POST", "/v1/sessions", big, &e); st != 413 || e.Error.Field != "world" || !strings.HasSuffix(e.Error.Message, "("+hint+")") {
		t.Fatalf("4.5 MB inline spec: status %d field %q (%s), want 413 on world ending with the hint", st, e.Error.Field, e.Error.Message)
	}
	var created struct {
		SessionID string `json:"session_id"`
	}
	if st := h.do("POST", "/v1/sessions", `{"world": {"domain": "terminal", "task_description": "t", "action_space": "keys"}}`, &created); st != 201 || created.SessionID == "" {
		t.Fatalf("small inline spec: status %d", st)
	}
}

// TestClientExtraBodyAndModelAreRefused: with serve's defaults a client
// can neither rewrite the upstream request through an inline spec's
// sampling.extra_body nor pick the model; each is a 400 naming the field,
// and nothing reaches the model.
func TestClientExtraBodyAndModelAreRefused(t *testing.T) {
	h := newHarness(t, "", nil)
	spec := func(extra string) string {
		return `{"world": {"domain": "terminal", "task_description": "t", "action_space": "keys", "sampling": {"extra_body": ` + extra + `}}}`
	}
	cases := []struct{ name, body, field string }{
		{"extra_body sets the model", spec(`{"model": "gpt-4o"}`), "world.sampling.extra_body.model"},
		{"extra_body sets the conversation", spec(`{"messages": [{"role": "user", "content": "hi"}]}`), "world.sampling.extra_body.messages"},
		{"extra_body asks for many answers", spec(`{"n": 64}`), "world.sampling.extra_body.n"},
		{"extra_body edits inside the request", spec(`{"messages.0.content": "x"}`), "world.sampling.extra_body.messages.0.content"},
		{"extra_body not allowed by the operator", spec(`{"top_k": 5}`), "world.sampling.extra_body.top_k"},
		{"a model the operator did not list", `{"world_id": "term", "model": "gpt-4o"}`, "model"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e api.ErrorBody
			if st := h.do("POST", "/v1/sessions", c.body, &e); st != 400 || e.Error.Field != c.field {
				t.Fatalf("status %d field %q (%s), want 400 on %s", st, e.Error.Field, e.Error.Message, c.field)
			}
		})
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Errorf("refused requests reached the model %d times", n)
	}
}
