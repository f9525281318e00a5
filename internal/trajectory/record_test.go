package trajectory

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRecordRoundTripKeepsEverything(t *testing.T) {
	line := `{"task":"x/y/terminal","id":123456789012345678901234567890,"prompt":["### Turn 1\n**Action:**\n<a>&b"],"response":["**Environment Observation:**\nline` + "\u2028" + `sep"],"current_prompt":"c","system_str":"s","turn_idx":1,"total_turns":1,"extra":{"k":[1,2]}}`
	rr := NewRecordReader(strings.NewReader(line+"\n"), "mem")
	rec, n, err := rr.Next()
	if err != nil || n != 1 {
		t.Fatalf("Next: %v line %d", err, n)
	}
	if rec.Domain() != "terminal" || rec.ID.String() != "123456789012345678901234567890" {
		t.Fatalf("domain %q id %q", rec.Domain(), rec.ID.String())
	}
	var sb strings.Builder
	if err := WriteRecord(&sb, rec); err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSuffix(sb.String(), "\n")
	want := strings.ReplaceAll(line, "\u2028", `\u2028`)
	if got != want {
		t.Fatalf("round trip\n got %s\nwant %s", got, want)
	}
}

func TestRecordReaderNamesBadLine(t *testing.T) {
	rr := NewRecordReader(strings.NewReader("{\"task\":\"mcp\",\"id\":1}\n{oops\n"), "f.jsonl")
	if _, _, err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	_, _, err := rr.Next()
	if err == nil || !strings.HasPrefix(err.Error(), "f.jsonl:2:") {
		t.Fatalf("err = %v, want f.jsonl:2: prefix", err)
	}
}

// FuzzRecordDecoders: the one-pass decoder and the member-by-member one
// agree on every input, valid or not: the same record (fields, unknown
// members' bytes, key order) or both an error.
func FuzzRecordDecoders(f *testing.F) {
	for _, s := range []string{
		`{"task":"x/y/terminal","id":12345678901234567890123,"prompt":["a\"b\\"],"response":["c"],"turn_idx":1,"extra":{"k":[1,"]"]}}`,
		`{"TASK":"a","task":"b"}`,
		`{"t\u0061sk":"a","id":"s","x" : [ {"y":"}"} ] , "z":null}`,
		`{"task":null,"id":null,"prompt":null,"turn_idx":null,"total_turns":null}`,
		`{"prompt":[1]}`,
		`{"task":"a"} trailing`,
		`null`,
		`[1]`,
		` {"a":1,"a":2} `,
		`{"turn_idx":1.5}`,
		"{\"s\":\"\u2028\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, slow Record
		ferr := fast.UnmarshalJSON(b)
		serr := slow.unmarshalByMember(b)
		if !json.Valid(b) {
			if ferr == nil {
				t.Fatalf("invalid JSON %q decoded", b)
			}
			return
		}
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("%q: one-pass error %v, member-by-member error %v", b, ferr, serr)
		}
		if ferr != nil {
			if ferr.Error() != serr.Error() {
				t.Fatalf("%q: errors differ: %v / %v", b, ferr, serr)
			}
			return
		}
		if diff := cmp.Diff(slow, fast, cmp.AllowUnexported(Record{}, ID{})); diff != "" {
			t.Fatalf("%q: records differ (-member-by-member +one-pass):\n%s", b, diff)
		}
	})
}
