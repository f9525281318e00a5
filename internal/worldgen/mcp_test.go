package worldgen

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/world"
)

// TestFromMCPMutations: candidates from an imported MCP world ask the
// generator for a mutation of that world (its spec in the prompt), and
// what they yield records the world as parent and the mutation as a tag.
func TestFromMCPMutations(t *testing.T) {
	parent, err := world.Load("../../examples/worlds/issue-tracker-mcp.yaml")
	if err != nil {
		t.Fatal(err)
	}
	good := fakeGenerator(0)
	gen := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		user := r.Messages[len(r.Messages)-1].Content
		n := variationRE.FindStringSubmatch(user)[1]
		c := *r // the server keeps r as received
		c.Messages = append(slices.Clone(r.Messages[:len(r.Messages)-1]), fakellm.Message{Role: "user", Content: "KIND=GOOD-" + n[len(n)-4:]})
		return good(&c)
	})
	wm := fakellm.New(fakeWorldModel(0))
	defer gen.Close()
	defer wm.Close()
	o := newOpts(t, gen, wm)
	o.FromMCP, o.Count = []*world.Spec{parent}, 8
	dir := filepath.Join(t.TempDir(), "lib")
	if _, err := Run(context.Background(), dir, o); err != nil {
		t.Fatal(err)
	}
	drawn := map[string]bool{}
	for _, r := range gen.Requests() {
		user := r.Messages[len(r.Messages)-1].Content
		if !strings.Contains(user, `"name":"issue-tracker-mcp"`) || !strings.Contains(user, "Design a variant of it") {
			t.Errorf("a from-mcp request without its parent spec:\n%.300s", user)
		}
		for name, m := range mutations {
			if strings.Contains(user, m) {
				drawn[name] = true
			}
		}
	}
	if len(drawn) < 2 {
		t.Errorf("8 candidates drew %d kinds of mutation, want several", len(drawn))
	}
	lib, _ := library.Open(dir)
	n := 0
	lib.Worlds(library.Filter{Source: SourceMCP, Parent: "issue-tracker-mcp"}, func(w *library.WorldEntry) error {
		n++
		if !slices.ContainsFunc(w.Tags, func(s string) bool { return strings.HasPrefix(s, "mutation:") }) {
			t.Errorf("world %s without its mutation tag: %v", w.Spec.Name, w.Tags)
		}
		return nil
	})
	if n == 0 {
		t.Error("no world from the imported MCP server entered the library")
	}
}
