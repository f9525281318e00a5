package answercache

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

// FuzzSegmentLine: parseSegmentLine never panics, accepts only lines that
// decode as {"k": key, "r": response} with the key it returns, and accepts
// every line Put writes.
func FuzzSegmentLine(f *testing.F) {
	for _, s := range []string{
		`{"k":"0a1b","r":{"content":"x","finish_reason":"stop"}}`,
		`{"k":"0a1b","r":{"content":"x\n\"y\"","finish_reason":"stop","prompt_tokens":3}}`,
		`{"k":"0a1b","r":{"content":"half`,
		`{"k":"a\"b","r":{}}`,
		`{"k":"ab","r":[]}`,
		`{"k":"ab","r":{}}}`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		key, body, ok := parseSegmentLine(line)
		if !ok {
			return
		}
		var e struct {
			K string          `json:"k"`
			R json.RawMessage `json:"r"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("accepted %q, which does not decode: %v", line, err)
		}
		// Whitespace around the body is JSON's to drop.
		var got, want bytes.Buffer
		if err := json.Compact(&got, body); err != nil {
			t.Fatalf("accepted %q with body %q, not JSON: %v", line, body, err)
		}
		if err := json.Compact(&want, e.R); err != nil {
			t.Fatal(err)
		}
		if e.K != key || got.String() != want.String() {
			t.Fatalf("accepted %q as key %q body %q; it decodes as %q %q", line, key, body, e.K, e.R)
		}
	})
}

// TestSegmentLineRoundTrip: what Put writes, the parser reads back.
func TestSegmentLineRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCache(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := &worldmodel.Response{Content: "a\n\"b\"\u2028<c>&", FinishReason: "stop"}
	c.Put("0123abcd", r)
	c.mu.RLock()
	loc := c.index[digest("0123abcd")]
	f := c.segs[loc.seg].f
	c.mu.RUnlock()
	line := make([]byte, loc.n)
	if _, err := f.ReadAt(line, loc.off); err != nil {
		t.Fatal(err)
	}
	key, body, ok := parseSegmentLine(line)
	want, _ := json.Marshal(r)
	if !ok || key != "0123abcd" || string(body) != string(want) {
		t.Fatalf("parsed %q as %q %q %v", line, key, body, ok)
	}
}
