package jsonunquote

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fromJSON is what encoding/json reads from the literal with contents s,
// and whether it reads it at all.
func fromJSON(s []byte) (string, bool) {
	var v string
	err := json.Unmarshal([]byte(`"`+string(s)+`"`), &v)
	return v, err == nil
}

func TestEnd(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{``, -1},
		{`"`, 0},
		{`abc"def"`, 3},
		{`a\"b"`, 4},
		{`a\\"b"`, 3},
		{`a\\\"b"`, 6},
		{`\\\\"`, 4},
		{`a\"`, -1},
		{`no quote\`, -1},
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.want, End([]byte(tt.in))); d != "" {
			t.Errorf("End(%q) (-want +got):\n%s", tt.in, d)
		}
	}
}

type escaped struct {
	R  rune
	N  int
	OK bool
}

func TestEscape(t *testing.T) {
	tests := []struct {
		in   string
		want escaped
	}{
		{`\"x`, escaped{'"', 2, true}},
		{`\\`, escaped{'\\', 2, true}},
		{`\/`, escaped{'/', 2, true}},
		{`\b`, escaped{'\b', 2, true}},
		{`\f`, escaped{'\f', 2, true}},
		{`\n`, escaped{'\n', 2, true}},
		{`\r`, escaped{'\r', 2, true}},
		{`\t`, escaped{'\t', 2, true}},
		{`\u0041`, escaped{'A', 6, true}},
		{`\u00e9\u00E9`, escaped{'é', 6, true}},
		{`\u2028`, escaped{'\u2028', 6, true}},
		{`\ud83d\ude00`, escaped{'😀', 12, true}},
		{`\uD83D\uDE00tail`, escaped{'😀', 12, true}},
		{`\ud83d`, escaped{'\uFFFD', 6, true}},
		{`\ud83dx\ude00`, escaped{'\uFFFD', 6, true}},
		{`\ud83d\u0041`, escaped{'\uFFFD', 6, true}},
		{`\ud83d\ud83d\ude00`, escaped{'\uFFFD', 6, true}},
		{`\ude00\ud83d`, escaped{'\uFFFD', 6, true}},
		{`\ud83d\uzzzz`, escaped{'\uFFFD', 6, true}},
		{`\x`, escaped{}},
		{`\U0041`, escaped{}},
		{`\u12`, escaped{}},
		{`\u12g4`, escaped{}},
		{`\`, escaped{}},
		{``, escaped{}},
		{`n`, escaped{}},
	}
	for _, tt := range tests {
		r, n, ok := Escape([]byte(tt.in))
		if d := cmp.Diff(tt.want, escaped{r, n, ok}); d != "" {
			t.Errorf("Escape(%q) (-want +got):\n%s", tt.in, d)
		}
	}
}

type unquoted struct {
	S  string
	OK bool
}

func TestUnquote(t *testing.T) {
	long := strings.Repeat("plain text, long enough for whole words ", 4)
	tests := []struct {
		in   string
		want unquoted
	}{
		{``, unquoted{"", true}},
		{`plain`, unquoted{"plain", true}},
		{long, unquoted{long, true}},
		{"é中🙂 \u2028", unquoted{"é中🙂 \u2028", true}},
		{long + `\n` + long, unquoted{long + "\n" + long, true}},
		{`tab\there \u00e9 \/ \\ \"q\"`, unquoted{"tab\there é / \\ \"q\"", true}},
		{`\ud83d\ude00\ud83d!`, unquoted{"😀\uFFFD!", true}},
		{"a\xffb", unquoted{"a\uFFFDb", true}},
		{"\xed\xa0\x80\\n", unquoted{"\uFFFD\uFFFD\uFFFD\n", true}},
		{"é\xc3", unquoted{"é\uFFFD", true}},
		{long + "\x1f", unquoted{}},
		{"a\nb", unquoted{}},
		{`a"b`, unquoted{}},
		{long + `"`, unquoted{}},
		{`\x`, unquoted{}},
		{`ends in \`, unquoted{}},
		{`\u12`, unquoted{}},
	}
	for _, tt := range tests {
		s, ok := Unquote([]byte(tt.in))
		if d := cmp.Diff(tt.want, unquoted{s, ok}); d != "" {
			t.Errorf("Unquote(%q) (-want +got):\n%s", tt.in, d)
		}
		if s, ok := fromJSON([]byte(tt.in)); ok != tt.want.OK || s != tt.want.S {
			t.Errorf("encoding/json reads %q as %q, %v; the table is wrong", tt.in, s, ok)
		}
	}
}

var seeds = []string{"", "plain", `a\"b\\c\/`, `\b\f\n\r\t`, `\u0000\u001f\u00e9\u2028`, `\ud83d\ude00`, `\ud83d`, `\ude00\ud83d\ude00`, `\ud83d\u0041`, "\xff\xfe", "a\xc3", "\xed\xa0\x80", `\x`, `\u12`, `a"b`, "a\x01b", `trailing\`, "é中🙂 and eight more bytes \\n"}

// FuzzUnquote: Unquote reads every literal as encoding/json does, and
// refuses exactly what it refuses.
func FuzzUnquote(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		want, wantOK := fromJSON(s)
		got, ok := Unquote(s)
		if ok != wantOK || got != want {
			t.Fatalf("Unquote(%q) = %q, %v; encoding/json reads %q, %v", s, got, ok, want, wantOK)
		}
	})
}

// FuzzEscape: an escape encoding/json reads is decoded to the rune it
// starts the string with, spanning the bytes whose removal leaves the rest
// of the string; one it refuses is refused.
func FuzzEscape(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
		f.Add([]byte(`\` + s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, ok := Escape(b)
		if len(b) == 0 || b[0] != '\\' {
			if ok {
				t.Fatalf("Escape(%q) = %q, %d without a backslash", b, r, n)
			}
			return
		}
		want, wantOK := fromJSON(b)
		if !wantOK {
			// The escape itself may be the fault, or something after it.
			if ok {
				if _, restOK := fromJSON(b[n:]); restOK {
					t.Fatalf("Escape(%q) = %q, %d; encoding/json refuses the string but not its rest", b, r, n)
				}
			}
			return
		}
		if !ok {
			t.Fatalf("Escape(%q) refused; encoding/json reads %q", b, want)
		}
		rest, _ := fromJSON(b[n:])
		if got := string(r) + rest; got != want {
			t.Fatalf("Escape(%q) = %q, %d: %q then the rest; encoding/json reads %q", b, r, n, got, want)
		}
	})
}

// FuzzEnd: End finds the quote closing an encoded string, whatever
// follows it, and agrees with a byte-at-a-time walk on any bytes.
func FuzzEnd(f *testing.F) {
	for _, s := range seeds {
		f.Add(s, []byte(s))
	}
	f.Fuzz(func(t *testing.T, s string, tail []byte) {
		lit, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		b := append(lit[1:len(lit):len(lit)], tail...)
		if got, want := End(b), len(lit)-2; got != want {
			t.Fatalf("End(%q) = %d, want %d", b, got, want)
		}
		if got, want := End(tail), walk(tail); got != want {
			t.Fatalf("End(%q) = %d, a walk finds %d", tail, got, want)
		}
	})
}

// walk is End done one byte at a time: a backslash takes the byte after
// it along.
func walk(b []byte) int {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}
