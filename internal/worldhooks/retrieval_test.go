package worldhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// TestRetrievalGivesTheStepItsDocuments: a fictional search world of 2,000
// documents that asks for retrieval keeps them out of the system prompt;
// a search step gets the documents that match its query, an open_page
// step the page it names.
func TestRetrievalGivesTheStepItsDocuments(t *testing.T) {
	facts := &fiction.Facts{Retrieval: &fiction.Retrieval{TopK: 3}}
	for i := range 2000 {
		facts.Documents = append(facts.Documents, fiction.Document{
			URL: fmt.Sprintf("https://w.example/p%d", i), Title: fmt.Sprintf("Ledger page %d", i),
			Text: fmt.Sprintf("Entry %d of the harbour ledger: cargo of salt and timber.", i),
		})
	}
	facts.Documents[1234].Text = "The lighthouse keeper Ysolde Parr was born in 1695 on Vell island."
	spec := &world.Spec{Name: "big", Domain: "search", TaskDescription: "search an invented harbour",
		ActionSpace: world.ActionSpace{Tools: []world.Tool{{Name: "search"}, {Name: "open_page"}}}, Facts: facts}
	rec := &recorder{answer: func(worldmodel.Request) string { return "1. a result" }}
	m := newManager(t, rec, []sim.StepHook{NewRetrieval(nil)}, spec)
	ctx := context.Background()
	rep, err := m.Create(ctx, sim.CreateRequest{WorldID: "big"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{
		`{"name":"search","arguments":{"query":"when was the lighthouse keeper of the harbour born"}}`,
		`{"name":"open_page","arguments":{"url":"https://w.example/p7"}}`,
	} {
		if _, err := m.Step(ctx, rep.SessionID, sim.StepRequest{Action: json.RawMessage(a)}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := rec.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	sys := reqs[0].Messages[0].Content
	if strings.Contains(sys, "Ysolde") || !strings.Contains(sys, "holds 2000 documents") {
		t.Errorf("the system prompt lists the documents (%d bytes)", len(sys))
	}
	first := lastUser(reqs[0])
	if !strings.Contains(first, RetrievedHeader) || !strings.Contains(first, "Ysolde Parr was born in 1695") {
		t.Errorf("search step without its document:\n%s", first)
	}
	if n := strings.Count(first, "\nURL: "); n != 3 {
		t.Errorf("search step got %d documents, want top_k 3", n)
	}
	second := lastUser(reqs[1])
	if !strings.Contains(second, "Entry 7 of the harbour ledger") || strings.Count(second, "\nURL: ") != 1 {
		t.Errorf("open_page step:\n%s", second)
	}
}

func TestRetrievalLeavesOtherWorldsAlone(t *testing.T) {
	spec := &world.Spec{Name: "q", Domain: "search", TaskDescription: "s",
		ActionSpace: world.ActionSpace{Tools: []world.Tool{{Name: "search"}}},
		Facts:       &fiction.Facts{Documents: []fiction.Document{{ID: "d", Text: "alpha beta"}}}}
	rec := &recorder{answer: func(worldmodel.Request) string { return "ok" }}
	m := newManager(t, rec, []sim.StepHook{NewRetrieval(nil)}, spec)
	rep, _ := m.Create(context.Background(), sim.CreateRequest{WorldID: "q"})
	if _, err := m.Step(context.Background(), rep.SessionID, sim.StepRequest{Action: json.RawMessage(`{"name":"search","arguments":{"query":"alpha"}}`)}); err != nil {
		t.Fatal(err)
	}
	if u := lastUser(rec.requests()[0]); strings.Contains(u, RetrievedHeader) {
		t.Errorf("a world without retrieval got retrieved documents:\n%s", u)
	}
}
