package world

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/perturb"
)

const perturbedSpec = `
domain: mcp
task_description: An issue tracker.
action_space:
  - name: create_issue
    input_schema: {"type": "object"}
  - name: list_issues
perturbations:
  seed: 3
  rules:
    - name: throttle
      when: {tool: "create_*", probability: 0.2}
      inject: {kind: rate_limit}
facts:
  entities:
    - id: proj-1
      name: Falcon
`

func TestPerturbationsAndFactsLoad(t *testing.T) {
	s, err := Parse([]byte(perturbedSpec), "tracker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Perturbations == nil || len(s.Perturbations.Rules) != 1 || s.Perturbations.Seed != 3 {
		t.Fatalf("perturbations not loaded: %+v", s.Perturbations)
	}
	if s.Facts == nil || s.Facts.Entities[0].Name != "Falcon" {
		t.Fatalf("facts not loaded: %+v", s.Facts)
	}
}

func TestPerturbationsAndFactsBadInput(t *testing.T) {
	tests := []struct{ name, from, to, want string }{
		{"unknown tool", `tool: "create_*"`, `tool: "delete_repo"`, `invalid world spec: field perturbations.rules[0].when.tool: unknown tool "delete_repo"`},
		{"bad probability", `probability: 0.2`, `probability: 2`, "field perturbations.rules[0].when.probability: 2 is not a probability in [0, 1] (rule throttle)"},
		{"misspelt field", `probability: 0.2`, `probabilty: 0.2`, `unknown field "probabilty"`},
		{"malformed fact", `name: Falcon`, `type: project`, "invalid world spec: field facts.entities[0]: entity has neither a name nor attributes (entity proj-1)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(perturbedSpec, tc.from, tc.to, 1)), "tracker.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "tracker.yaml") {
				t.Fatalf("got %v, want an error naming tracker.yaml and containing %q", err, tc.want)
			}
			if tc.name != "misspelt field" && !errors.Is(err, ErrInvalid) {
				t.Errorf("%v does not match ErrInvalid", err)
			}
			if tc.name == "unknown tool" && !errors.Is(err, perturb.ErrInvalid) {
				t.Errorf("%v does not match the inner kind perturb.ErrInvalid", err)
			}
		})
	}
}

// TestExtraBodyKeys: sampling.extra_body is written over the model request
// by path, so only plain names that are not the request's own fields pass,
// in any spec.
func TestExtraBodyKeys(t *testing.T) {
	base := `{"domain":"os","task_description":"t","action_space":"a","sampling":{"extra_body":%s}}`
	tests := []struct {
		name, extra, field string // field "" accepts
	}{
		{"plain keys", `{"top_k":20,"repetition_penalty":1.1,"chat_template_kwargs":{"enable_thinking":false}}`, ""},
		{"the model", `{"model":"gpt-4o"}`, "sampling.extra_body.model"},
		{"the conversation", `{"messages":[]}`, "sampling.extra_body.messages"},
		{"many answers", `{"n":64}`, "sampling.extra_body.n"},
		{"streaming", `{"stream":true}`, "sampling.extra_body.stream"},
		{"a path into the conversation", `{"messages.0.content":"x"}`, "sampling.extra_body.messages.0.content"},
		{"a path wildcard", `{"a*":1}`, "sampling.extra_body.a*"},
		{"an empty key", `{"":1}`, "sampling.extra_body."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(fmt.Sprintf(base, tc.extra)), "w.json")
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			fe, ok := fielderr.As(err)
			if !ok || fe.Path != tc.field || !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want an invalid-spec error on %s", err, tc.field)
			}
		})
	}
}
