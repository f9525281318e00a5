package trajectory

import (
	"encoding/json"
	"math/rand/v2"
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

// directCases are records at the edges of the one-pass decoder: escapes of
// every kind, surrogate pairs and lone halves, invalid UTF-8, nulls, empty
// lists, unknown members, and shapes it must decline.
var directCases = []string{
	`{"task":"a/b/terminal","id":7,"prompt":["p\n\"q\"\\ \/ \b\f\r\t"],"response":["r"],"current_prompt":"c","system_str":"s","turn_idx":1,"total_turns":2}`,
	`{"task":"t","id":"s-1","prompt":["\u00e9\u2028\ud83d\ude00 \ud83d x \ude00 \ud83d\u0041 \uD83D\uDE00"],"response":[],"turn_idx":0}`,
	"{\"task\":\"\xff\xfe ok \xed\xa0\x80 \xef\xbf\xbd\",\"prompt\":[\"\xc3\",\"\u00e9\xe9\\n\"]}",
	`{"task":null,"id":null,"prompt":null,"response":null,"current_prompt":null,"system_str":null,"turn_idx":null,"total_turns":null}`,
	` { "task" : "x" , "extra" : {"k":[1,"]",{"z":null}]}, "n": -1.5e3, "b": true, "s": "\u0000" } `,
	`{}`,
	`{"id":-12345678901234567890123456789}`,
	`{"id":1.5}`,
	`{"id":"\ud800"}`,
	`{"turn_idx":-0}`,
	`{"turn_idx":1e2}`,
	`{"turn_idx":99999999999999999999}`,
	`{"turn_idx":"1"}`,
	`{"prompt":["a",1]}`,
	`{"prompt":"a"}`,
	`{"task":"a","task":"b"}`,
	`{"x":1,"x":2}`,
	`{"Task":"a"}`,
	`{"t\u0061sk":"a"}`,
	"{\"t\xc3\xa9\":1}",
	`{"task":"a",}`,
	`{"task":"a"} x`,
	`{"task":"a\'"}`,
	`{"task":"a\x"}`,
	"{\"task\":\"a\tb\"}",
	`{"task":"\u12"}`,
	`{"x":[1}`,
	`{"x":tru}`,
	`{"x":"abc`,
	`[]`,
	`null`,
	``,
}

// checkDirect holds the one-pass decoder to the member-by-member one: where
// it decodes, the record is the same; where that one fails, it declines.
func checkDirect(t *testing.T, b []byte) {
	t.Helper()
	var direct, slow Record
	ok := direct.decodeDirect(b)
	serr := slow.unmarshalByMember(b)
	if !ok {
		return
	}
	if serr != nil || !json.Valid(b) {
		t.Fatalf("%q: decoded in one pass, but the member decoder fails (%v) or the JSON is invalid", b, serr)
	}
	if diff := cmp.Diff(slow, direct, cmp.AllowUnexported(Record{}, ID{})); diff != "" {
		t.Fatalf("%q: records differ (-member-by-member +one-pass):\n%s", b, diff)
	}
}

func TestDecodeDirect(t *testing.T) {
	for _, c := range directCases {
		checkDirect(t, []byte(c))
	}
	// Random strings mixing raw bytes (invalid UTF-8 and a raw tab, which
	// JSON forbids, included) with every escape, surrogate halves and pairs
	// in any order, and escapes JSON does not have.
	rng := rand.New(rand.NewPCG(7, 8))
	pieces := []string{"a", "Z", " ", "é", "数", "\xff", "\xc3", "\xed\xa0\x80", "\x7f", "\t", "\u2028",
		`\u2028`, `\n`, `\\`, `\"`, `\/`, `\b`, `\f`, `\r`, `\t`, `\u0000`, `\u00e9`,
		`\ud83d`, `\ude00`, `\uD83D\uDE00`, `\udbff\udfff`, `\ud800\u0041`, `\u12`, `\x`, `\'`}
	for range 5000 {
		var b strings.Builder
		b.WriteString(`{"task":"`)
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		b.WriteString(`","prompt":[],"turn_idx":1}`)
		checkDirect(t, []byte(b.String()))
	}
	// The usual shape must take the one-pass way, or it is of no use.
	for _, c := range directCases[:5] {
		var r Record
		if !r.decodeDirect([]byte(c)) {
			t.Errorf("%q declined", c)
		}
	}
}

// FuzzDecodeDirect: on any input the one-pass decoder gives the member
// decoder's record or declines.
func FuzzDecodeDirect(f *testing.F) {
	for _, c := range directCases {
		f.Add([]byte(c))
	}
	f.Fuzz(checkDirect)
}

// BenchmarkRecordDecode decodes a row of the published size (~185 KB of
// turns with newlines, quotes, markup, non-ASCII and U+2028) in one pass
// and with encoding/json.
//
//	go test -run '^$' -bench RecordDecode -benchmem ./internal/trajectory
func BenchmarkRecordDecode(b *testing.B) {
	chunk := "drwxr-xr-x 2 root root 4096 \"src\" <div class='x'>ünïcødé 数据\u2028</div>\tdone\n"
	rec := map[string]any{"task": "bench/terminal", "id": 3, "current_prompt": "c", "system_str": strings.Repeat(chunk, 20), "turn_idx": 4, "total_turns": 8}
	var prompts, responses []string
	for range 8 {
		prompts = append(prompts, strings.Repeat(chunk, 30))
		responses = append(responses, strings.Repeat(chunk, 190))
	}
	rec["prompt"], rec["response"] = prompts, responses
	line, err := json.Marshal(rec)
	if err != nil {
		b.Fatal(err)
	}
	for _, way := range []struct {
		name   string
		decode func(*Record, []byte) bool
	}{
		{"one-pass", (*Record).decodeDirect},
		{"encoding-json", func(r *Record, b []byte) bool { return r.unmarshalFast(b) == nil }},
	} {
		b.Run(way.name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				var r Record
				if !way.decode(&r, line) {
					b.Fatal("declined")
				}
			}
		})
	}
}
