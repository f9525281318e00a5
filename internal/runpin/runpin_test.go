package runpin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type settings struct {
	Model string   `json:"model"`
	Temp  *float64 `json:"temperature,omitempty"`
	Group int      `json:"group_size"`
}

// TestCheckPinsTheFirstRunsSettings: the first run records its settings,
// a rerun with the same ones passes, one with others is refused naming
// both, and a broken record is an error naming the file.
func TestCheckPinsTheFirstRunsSettings(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	one := 1.0
	a := settings{Model: "m", Temp: &one, Group: 8}
	if err := Check(dir, "run.json", a); err != nil {
		t.Fatal(err)
	}
	if err := Check(dir, "run.json", a); err != nil {
		t.Fatalf("same settings: %v", err)
	}
	b := a
	b.Group = 4
	err := Check(dir, "run.json", b)
	if !errors.Is(err, ErrSettingsChanged) || !strings.Contains(err.Error(), `"group_size":8`) || !strings.Contains(err.Error(), `"group_size":4`) {
		t.Fatalf("changed settings: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(dir, "run.json", a); err == nil || !strings.Contains(err.Error(), "run.json") {
		t.Fatalf("broken record: %v", err)
	}
}
