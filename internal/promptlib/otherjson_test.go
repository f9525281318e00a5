package promptlib_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/trainset"
)

// TestOpenLeavesOtherJSONAlone: a data export written into the library
// directory leaves its OUT.meta.json there (written here by the dataset
// code itself); the library still opens with its versions, while a
// malformed version file next to it is refused, naming the file.
func TestOpenLeavesOtherJSONAlone(t *testing.T) {
	dir := t.TempDir()
	lib, err := promptlib.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	v0 := promptlib.Builtin()
	src := strings.Replace(v0.Templates[string(domain.OS)], "# How to answer\n", "# How to answer\nBe terse.\n", 1)
	c, err := v0.With(domain.OS, src, "", "terse")
	if err != nil {
		t.Fatal(err)
	}
	v1, err := lib.Add(c)
	if err != nil {
		t.Fatal(err)
	}
	meta := trainset.NewExportMeta("samples", &expand.ExpandOptions{Default: v1}, &datapipe.Summary{})
	if err := trainset.WriteExportMeta(trainset.MetaPath(filepath.Join(dir, "sft.jsonl")), meta); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lib, err = promptlib.Open(dir)
	if err != nil {
		t.Fatalf("a library holding an export's metadata: %v", err)
	}
	if got := lib.List(); len(got) != 2 || got[1].ID != v1.ID {
		t.Fatalf("versions %v, want v0 and %s", got, v1.Name)
	}

	for _, c := range []struct{ name, text, want string }{
		{"typo in a member", `{"name": "v2", "template": {"os": "x"}}`, `unknown field "template"`},
		{"template that does not compile", `{"name": "v2", "templates": {"os": "{{define \"prompt\"}}{{.Nope"}}`, "v2.json"},
		{"no templates", `{"id": "abc"}`, "v2.json"},
		{"not an object", `["v2"]`, "cannot unmarshal array"},
		{"not JSON", "name: v2\n", "invalid character"},
		{"null", "null", "v2.json"},
	} {
		bad := t.TempDir()
		if err := os.WriteFile(filepath.Join(bad, "v2.json"), []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := promptlib.Open(bad)
		if !errors.Is(err, promptlib.ErrBadVersion) || !strings.Contains(err.Error(), filepath.Join(bad, "v2.json")) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %v naming the file and %q", c.name, err, promptlib.ErrBadVersion, c.want)
		}
	}
}
