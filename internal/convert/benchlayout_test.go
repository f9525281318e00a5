package convert

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/trajectory"
)

func TestDetectLayout(t *testing.T) {
	b, err := os.ReadFile("testdata/bench_layouts.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	reordered := strings.Replace(lines[2], `{"task":"x/mcp","id":9,`, `{"id":9,"task":"x/mcp",`, 1)
	for _, tc := range []struct {
		name, line, want string
		ok               bool
	}{
		{"json.dumps ensure_ascii=False", lines[0], layoutPython, true},
		{"json.dumps default", lines[1], layoutPythonASCII, true},
		{"compact", lines[2], layoutCompact, true},
		{"compact, trailing CR", lines[2] + "\r", layoutCompact, true},
		{"other key order", reordered, layoutCompact, false},
		{"other spacing", strings.Replace(lines[0], `, "id"`, `,  "id"`, 1), layoutCompact, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := new(trajectory.Record)
			if err := json.Unmarshal([]byte(tc.line), rec); err != nil {
				t.Fatal(err)
			}
			got, ok := detectLayout(rec, []byte(tc.line))
			if got != tc.want || ok != tc.ok {
				t.Fatalf("detectLayout = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	if _, err := encodeRecord(&trajectory.Record{}, "yaml"); err == nil {
		t.Fatal("unknown layout accepted")
	}
}

// FuzzPythonLayout: respacing never changes what the JSON means, and
// spaces only ever follow separators outside strings.
func FuzzPythonLayout(f *testing.F) {
	for _, s := range []string{"", "a\u2028b", `"q" \ , : {}`, "é😀\t\x01", `\u2028`, "\u2029\u2028"} {
		f.Add(s, "k: v, w")
	}
	f.Fuzz(func(t *testing.T, s, key string) {
		compact, err := trajectory.Marshal(map[string]any{key: []any{s, 1.5, map[string]any{}}})
		if err != nil {
			t.Skip()
		}
		var want any
		if err := json.Unmarshal(compact, &want); err != nil {
			t.Fatalf("own output does not decode: %v", err)
		}
		for _, ascii := range []bool{false, true} {
			out := pythonLayout(compact, ascii)
			var got any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("ascii=%v: %q does not decode: %v", ascii, out, err)
			}
			wb, _ := json.Marshal(want)
			gb, _ := json.Marshal(got)
			if string(wb) != string(gb) {
				t.Fatalf("ascii=%v: meaning changed:\n%s\n%s", ascii, wb, gb)
			}
			if ascii {
				for _, c := range out {
					if c >= 0x80 {
						t.Fatalf("non-ASCII byte in %q", out)
					}
				}
			}
		}
	})
}
