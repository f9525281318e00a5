package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/fiction"
)

// TestLedgerSurvivesReopen: facts appended per world come back in order,
// per world, after the database is closed and opened again.
func TestLedgerSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sim.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	a := []fiction.Fact{
		{Entity: "emp-1", Attribute: "title", Value: "CTO", Session: "s1", Turn: 1, Source: fiction.SourceObservation},
		{Entity: "emp-1", Attribute: "title", Value: "CEO", Session: "s2", Turn: 3, Source: fiction.SourceObservation},
	}
	if err := db.AppendFacts(ctx, "acme", a[:1]); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendFacts(ctx, "other", []fiction.Fact{{Entity: "x", Attribute: "y", Value: "z"}}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendFacts(ctx, "acme", a[1:]); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, db, path)
	got, err := db.WorldFacts(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	cs, err := fiction.NewLedger(db, nil).Contradictions(ctx, "acme", nil)
	if err != nil || len(cs) != 1 {
		t.Errorf("contradictions %v %v", cs, err)
	}
}
