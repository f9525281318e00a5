package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/world"
)

func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := New()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

// TestWorldCheckFindsPlantedContradiction plants a value in session A's
// ledger facts, contradicts it from session B and against the spec's facts,
// and expects `world check` to report both and fail.
func TestWorldCheckFindsPlantedContradiction(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "acme.yaml")
	if err := os.WriteFile(spec, []byte(`
domain: search
task_description: Search the web of the invented company Acme.
action_space: "search(query), open_page(url)"
facts:
  entities:
    - id: acme
      name: Acme Rotors
      attributes: {founded: "2009"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "sessions.db")
	db, err := store.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	l := fiction.NewLedger(db, nil)
	ctx := context.Background()
	mustObserve := func(session string, turn int, obs string) {
		if _, err := l.Observe(ctx, "acme", session, turn, obs); err != nil {
			t.Fatal(err)
		}
	}
	mustObserve("A", 1, `{"id":"emp-1","name":"Rhea Okafor","role":"CFO"}`)
	mustObserve("B", 1, "Employee ID: emp-1\nRole: Intern")
	mustObserve("B", 2, `{"id":"acme","founded":"1990"}`)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	out, stderr, err := runCLI(t, "world", "check", spec, "--db", dbPath)
	if !errors.Is(err, errContradictions) {
		t.Fatalf("want errContradictions, got %v (stderr %s)", err, stderr)
	}
	for _, want := range []string{`emp-1.role: "CFO" (session A turn 1) vs "Intern" (session B turn 1)`, `acme.founded: "2009" (spec facts) vs "1990" (session B turn 2)`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A clean world passes: a bundled world, by name, no session of
	// which contradicted its facts.
	if _, stderr, err := runCLI(t, "world", "check", "quillfern-search", "--db", dbPath); err != nil || !strings.Contains(stderr, "0 contradictions") {
		t.Errorf("clean world: %v %s", err, stderr)
	}
	// A name no spec has and no ledger holds is refused, not passed.
	if _, _, err := runCLI(t, "world", "check", "empty-world", "--db", dbPath); err == nil || !strings.Contains(err.Error(), `world "empty-world": no spec of that name`) {
		t.Errorf("unknown world: %v", err)
	}
	// A name resolved through --worlds.
	if _, _, err := runCLI(t, "world", "check", "acme", "--db", dbPath, "--worlds", dir); !errors.Is(err, errContradictions) {
		t.Errorf("by name: %v", err)
	}
	// A file ledger.
	fs, _ := fiction.NewFileStore(filepath.Join(dir, "ledger"), nil)
	_ = fs.AppendFacts(context.Background(), "acme", []fiction.Fact{{Entity: "acme", Attribute: "founded", Value: "1999", Session: "Z", Source: fiction.SourceObservation}})
	if _, _, err := runCLI(t, "world", "check", spec, "--ledger", filepath.Join(dir, "ledger")); !errors.Is(err, errContradictions) {
		t.Errorf("file ledger: %v", err)
	}
	if _, _, err := runCLI(t, "world", "check", spec, "--db", filepath.Join(dir, "missing.db")); err == nil || !strings.Contains(err.Error(), "missing.db") {
		t.Errorf("missing db: %v", err)
	}
	// A ledger directory that is not there is refused, and not created.
	missing := filepath.Join(dir, "no-ledger")
	if _, _, err := runCLI(t, "world", "check", spec, "--ledger", missing); err == nil || !strings.Contains(err.Error(), "--ledger") || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing ledger directory: %v", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("world check created the ledger directory it was to read")
	}
}

// TestWorldFromMCP imports the real npm memory server through the CLI.
func TestWorldFromMCP(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		testkit.Missing(t, "node", err, ".ci/setup.d/40-mcp-npm.sh installs it")
	}
	server, _ := filepath.Abs("../../tools/npm/node_modules/@modelcontextprotocol/server-memory/dist/index.js")
	if _, err := os.Stat(server); err != nil {
		t.Fatalf("memory server not installed (%v): run `bash .ci/setup.d/40-mcp-npm.sh`", err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "memory.yaml")
	_, stderr, err := runCLI(t, "world", "from-mcp", "-o", out, "--name", "memory",
		"--env", "MEMORY_FILE_PATH="+filepath.Join(dir, "m.jsonl"),
		"--call", `create_entities {"entities":[{"name":"Ivo","entityType":"person","observations":["rides a tandem"]}]}`,
		"--", "node", server)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	s, err := world.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "memory" || len(s.Demonstrations) != 1 || !strings.Contains(s.Demonstrations[0].Observation, "tandem") {
		t.Errorf("spec %+v", s)
	}
	if _, _, err := runCLI(t, "world", "from-mcp", "--call", "{bad", "--", "node", server); err == nil {
		t.Error("bad --call accepted")
	}
}
