package server

import (
	"strings"
	"testing"
)

// TestLargeInlineSpecIsRefused posts a 4.5 MB inline world spec (under the
// body limit): it is refused with 413 naming the field before it is
// parsed, and a spec within the bounds still creates a session.
func TestLargeInlineSpecIsRefused(t *testing.T) {
	h := newHarness(t, "", nil)
	big := `{"world": {"domain": "terminal", "task_description": "` + strings.Repeat("t", 4_500_000) + `", "action_space": "keys"}}`
	var e errorBody
	if st := h.do("POST", "/v1/sessions", big, &e); st != 413 || e.Error.Field != "world" || !strings.Contains(e.Error.Message, "--max-inline-spec-bytes") {
		t.Fatalf("4.5 MB inline spec: status %d field %q (%s), want 413 on world naming the flag", st, e.Error.Field, e.Error.Message)
	}
	var created struct {
		SessionID string `json:"session_id"`
	}
	if st := h.do("POST", "/v1/sessions", `{"world": {"domain": "terminal", "task_description": "t", "action_space": "keys"}}`, &created); st != 201 || created.SessionID == "" {
		t.Fatalf("small inline spec: status %d", st)
	}
}
