package worldgen

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// exampleDir is the small generated library the docs use; it is this
// test's output, committed (regenerate with go test -run
// TestExampleLibrary -update).
const exampleDir = "../../examples/library"

// TestExampleLibrary generates the shipped example library with the fake
// generator, one candidate at a time (so shard lines come in one order),
// from seed descriptions and then from fictional fact graphs, and checks
// the committed copy is exactly that output.
func TestExampleLibrary(t *testing.T) {
	gen, wm := fakellm.New(fakeGenerator(0)), fakellm.New(fakeWorldModel(0))
	defer gen.Close()
	defer wm.Close()
	dir := filepath.Join(t.TempDir(), "library")
	o := newOpts(t, gen, wm)
	o.Concurrency, o.Shards, o.Seed = 1, 4, 2026
	o.Seeds = []Seed{
		{ID: "tracker-a", Description: "KIND=GOOD-1 an issue tracker's MCP server"},
		{ID: "tracker-b", Description: "KIND=GOOD-2 an issue tracker's MCP server, another board"},
		{ID: "tracker-copy", Description: "KIND=DUP a copy of the first board"},
		{ID: "broken", Description: "KIND=BROKEN-JSON an answer cut short"},
		{ID: "noop", Description: "KIND=NOOP-SOLVED a task a no-op agent solves"},
		{ID: "solved", Description: "KIND=INITIAL-SOLVED a task its initial state solves"},
		{ID: "flaky", Description: "KIND=FLAKY a world that closes the issue only every other time"},
		{ID: "tracker-0", Description: "KIND=GOOD-0 the first board again"},
	}
	o.Count = len(o.Seeds)
	if _, err := Run(context.Background(), dir, o); err != nil {
		t.Fatal(err)
	}
	o.Seeds, o.Domains, o.Count = nil, []string{"fiction"}, 2
	if _, err := Run(context.Background(), dir, o); err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == ".lock" {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		got[filepath.ToSlash(rel)] = b
		return err
	})
	if testkit.Update() {
		os.RemoveAll(exampleDir)
		for rel, b := range got {
			p := filepath.Join(exampleDir, rel)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for rel, b := range got {
		want, err := os.ReadFile(filepath.Join(exampleDir, rel))
		if err != nil {
			t.Errorf("%s: %v (run with -update)", rel, err)
			continue
		}
		if string(want) != string(b) {
			t.Errorf("%s differs from a fresh generation (run with -update)", rel)
		}
	}
	filepath.WalkDir(exampleDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(exampleDir, p)
			if _, ok := got[filepath.ToSlash(rel)]; !ok {
				t.Errorf("%s: not generated any more (run with -update)", rel)
			}
		}
		return err
	})
}
