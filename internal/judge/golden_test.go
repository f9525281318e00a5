package judge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit"
)

// checkGolden compares got with testdata file path, or rewrites it with
// -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	testkit.Golden(t, path, got)
}

// inputs lists the *.txt cases of a testdata directory by name.
func inputs(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no inputs in testdata/%s", dir)
	}
	out := make(map[string]string, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(f, ".txt")] = string(b)
	}
	return out
}
