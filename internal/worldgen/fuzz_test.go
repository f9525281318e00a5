package worldgen

import "testing"

// FuzzParseCandidate feeds generator answers of any shape to the parser
// of the parse, schema and actions rungs: it never panics, and what it
// accepts is a valid spec whose tasks are named under it.
func FuzzParseCandidate(f *testing.F) {
	f.Add(`{"world": {"name": "t", "domain": "mcp", "task_description": "x", "action_space": [{"name": "a"}]}, "tasks": [{"instruction": "i", "difficulty": "easy", "check": {"final_observation": "ok"}, "reference": ["done"]}]}`)
	f.Add("```json\n{\"fiction\": {\"name\": \"f\", \"entities\": [{\"id\": \"a\", \"name\": \"A\", \"attributes\": {\"x\": \"1\"}}, {\"id\": \"b\", \"name\": \"B\"}], \"relations\": [{\"subject\": \"a\", \"predicate\": \"p\", \"object\": \"b\"}]}}\n```")
	f.Add(`{"world": {"name": "half", }}`)
	f.Add(`<think>{</think>{"tasks": []}`)
	f.Fuzz(func(t *testing.T, answer string) {
		c, err := parseCandidate(plan{Tag: "0123abcd"}, answer)
		if err != nil {
			if asRejection(err) == nil {
				t.Fatalf("an error that is not a rejection: %v", err)
			}
			return
		}
		if err := c.spec.Validate(); err != nil {
			t.Fatalf("accepted an invalid spec: %v", err)
		}
		for _, tk := range c.tasks {
			if tk.World != c.spec.Name {
				t.Fatalf("task %s of world %q in world %q", tk.ID, tk.World, c.spec.Name)
			}
			if err := checkTask(c.spec, tk, false); err == nil {
				if err := tk.Validate(); err != nil {
					t.Fatalf("checkTask passed an invalid task: %v", err)
				}
			}
		}
	})
}
