package promptlib

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/testkit"
)

func TestImportOfficial(t *testing.T) {
	dir := testkit.WriteOfficialPrompts(t, testkit.OfficialTemplates)
	// Literal braces of text/template must stay text.
	p := filepath.Join(dir, "prompts", "web", "system_prompt.txt")
	if err := os.WriteFile(p, []byte("Pages {{like this}} stay.\r\n{\"json\": 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	imp, err := ImportOfficial(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	v := imp.Version
	if v.Name != "official-0123456" || imp.Commit != "0123456" || len(imp.Files) != 7 || len(imp.Unpinned) != 7 {
		t.Fatalf("import: name %q commit %q files %d unpinned %d", v.Name, imp.Commit, len(imp.Files), len(imp.Unpinned))
	}
	got, err := v.RenderParts(domain.MCP, Parts{ActionSpace: "TOOLS", Demonstrations: "DEMOS", TaskDescription: "ignored"})
	if err != nil {
		t.Fatal(err)
	}
	want := "You simulate the mcp environment. Answer inside <predicted_observation> tags.\n\n# Tools\nTOOLS\n\n# Examples\nDEMOS\n"
	if got != want {
		t.Errorf("mcp renders\n%q\nwant\n%q", got, want)
	}
	if got, _ := v.RenderParts(domain.Web, Parts{}); got != "Pages {{like this}} stay.\n{\"json\": 1}\n" {
		t.Errorf("web renders %q", got)
	}

	// In a library it is a version like any other: found by name after a
	// reopen, promotable.
	libDir := t.TempDir()
	lib, err := Open(libDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lib.Add(v); err != nil {
		t.Fatal(err)
	}
	lib, err = Open(libDir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := lib.Get("official-0123456"); err != nil || got.ID != v.ID || !strings.Contains(got.Rationale, "commit 0123456") {
		t.Errorf("reopened: %v %+v", err, got)
	}
	if _, err := lib.Promote("official-0123456"); err != nil {
		t.Fatal(err)
	}
}

func TestImportOfficialBadInput(t *testing.T) {
	dir := testkit.WriteOfficialPrompts(t, testkit.OfficialTemplates)
	p := filepath.Join(dir, "prompts", "os", "system_prompt.txt")
	if err := os.WriteFile(p, []byte("line one\nuses {screen_size} here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportOfficial(dir, ""); err == nil || !strings.Contains(err.Error(), filepath.Join("os", "system_prompt.txt")+":2: unknown placeholder {screen_size}") {
		t.Errorf("unknown placeholder: %v", err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportOfficial(dir, ""); err == nil || !strings.Contains(err.Error(), filepath.Join("prompts", "os", "system_prompt.txt")) {
		t.Errorf("missing file: %v", err)
	}
	noGit := t.TempDir()
	if _, err := ImportOfficial(noGit, ""); err == nil || !strings.Contains(err.Error(), "not a git checkout") {
		t.Errorf("no git: %v", err)
	}
}
