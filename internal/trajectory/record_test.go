package trajectory

import (
	"strings"
	"testing"
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
