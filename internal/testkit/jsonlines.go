package testkit

import (
	"bytes"
	"encoding/json"
	"testing"
)

// DecodeLines decodes each non-blank line of JSONL output b into a T, for
// a test that checks what a command wrote; a line that does not decode
// fails the test, naming its number.
func DecodeLines[T any](t testing.TB, b []byte) []T {
	t.Helper()
	var out []T
	for i, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(l, &v); err != nil {
			t.Fatalf("output line %d: %v", i+1, err)
		}
		out = append(out, v)
	}
	return out
}
