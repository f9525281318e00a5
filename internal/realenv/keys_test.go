package realenv

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKeyOps(t *testing.T) {
	tests := []struct {
		in   string
		want []KeyOp
	}{
		{"", nil},
		{"ls -la\n", []KeyOp{{Literal: "ls -la"}, {Key: "Enter"}}},
		{"ls -la", []KeyOp{{Literal: "ls -la"}}},
		{"C-c", []KeyOp{{Key: "C-c"}}},
		{"C-d", []KeyOp{{Key: "C-d"}}},
		{"C-c\n", []KeyOp{{Key: "C-c"}, {Key: "Enter"}}},
		{"M-x", []KeyOp{{Key: "M-x"}}},
		{"Escape", []KeyOp{{Key: "Escape"}}},
		{"Up", []KeyOp{{Key: "Up"}}},
		{"^C", []KeyOp{{Key: "^C"}}},
		{"Enter", []KeyOp{{Key: "Enter"}}},
		{"\n", []KeyOp{{Key: "Enter"}}},
		{"a\nb\n", []KeyOp{{Literal: "a"}, {Key: "Enter"}, {Literal: "b"}, {Key: "Enter"}}},
		{"a\r\n\n", []KeyOp{{Literal: "a"}, {Key: "Enter"}, {Key: "Enter"}}},
		{"Enterprise\n", []KeyOp{{Literal: "Enterprise"}, {Key: "Enter"}}},
		{"C-cat", []KeyOp{{Literal: "C-cat"}}},
		{"-n x", []KeyOp{{Literal: "-n x"}}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, KeyOps(tt.in)); diff != "" {
			t.Errorf("KeyOps(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
	if got := (KeyOp{Literal: "-x"}).Args(); !cmp.Equal(got, []string{"-l", "--", "-x"}) {
		t.Errorf("literal args = %q", got)
	}
}

func TestParseTerminalAction(t *testing.T) {
	tests := []struct {
		in      string
		want    []Keystroke
		wantErr string
	}{
		{in: `[]`, want: []Keystroke{}},
		{in: ` [{"keystrokes":"ls\n","duration":0.5}] `, want: []Keystroke{{"ls\n", 0.5}}},
		{in: `[{"keystrokes":"C-c"}]`, want: []Keystroke{{"C-c", 1}}},
		{in: `[{"keystrokes":"x","duration":0}]`, want: []Keystroke{{"x", 0}}},
		{in: `[{"keystrokes":"x","duration":1,"is_blocking":true}]`, want: []Keystroke{{"x", 1}}},
		{in: `ls -la`, wantErr: "JSON array"},
		{in: ``, wantErr: "JSON array"},
		{in: `{"keystrokes":"ls"}`, wantErr: "JSON array"},
		{in: `[{"duration":1}]`, wantErr: "action[0].keystrokes: missing"},
		{in: `[{"keystrokes":"a"},{"keystrokes":"b","duration":-1}]`, wantErr: "action[1].duration"},
		{in: `["ls"]`, wantErr: "action[0]"},
		{in: `[{"keystrokes":"a"`, wantErr: "terminal action"},
	}
	for _, tt := range tests {
		got, err := ParseTerminalAction(tt.in, 1)
		if tt.wantErr != "" {
			if err == nil || !errors.Is(err, ErrBadAction) || !contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseTerminalAction(%q) err = %v, want ErrBadAction mentioning %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseTerminalAction(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseTerminalAction(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func FuzzParseTerminalAction(f *testing.F) {
	for _, s := range []string{`[]`, `[{"keystrokes":"ls\n","duration":0.5}]`, `[{"keystrokes":"C-c"}]`, `[{"duration":-1}]`, `x`, `[1]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := ParseTerminalAction(s, 1)
		if err != nil {
			if !errors.Is(err, ErrBadAction) {
				t.Fatalf("error %v does not wrap ErrBadAction", err)
			}
			return
		}
		for _, k := range keys {
			if k.Duration < 0 {
				t.Fatalf("negative duration accepted: %v", k.Duration)
			}
			for _, op := range KeyOps(k.Keystrokes) {
				if (op.Key == "") == (op.Literal == "") {
					t.Fatalf("op %+v must be exactly one of key or literal", op)
				}
			}
		}
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
