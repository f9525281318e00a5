package testkit

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// update is the one -update flag of every test binary that checks golden
// files: `go test ./internal/x -update` rewrites them from current output.
var update = flag.Bool("update", false, "rewrite golden files under testdata/ from the current output")

// Update reports whether the test run was asked to rewrite golden files.
func Update() bool { return *update }

// Golden compares got with the golden file at path and fails t with a diff
// when they differ; with -update it writes got there first.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs from the golden file (-want +got; -update rewrites it):\n%s", path, d)
	}
}
