package realenv

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/conversation"
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

// FuzzKeyOps: every keystroke text of a parsed Terminal action becomes
// send-keys calls that are each exactly one of a key or literal text.
func FuzzKeyOps(f *testing.F) {
	for _, s := range []string{`[{"keystrokes":"ls\n","duration":0.5}]`, `[{"keystrokes":"C-c"}]`, `[{"keystrokes":"a\r\n\nC-d\n"}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := conversation.ParseKeystrokes(s, 1)
		if err != nil {
			return
		}
		for _, k := range keys {
			for _, op := range KeyOps(k.Keystrokes) {
				if (op.Key == "") == (op.Literal == "") {
					t.Fatalf("op %+v must be exactly one of key or literal", op)
				}
			}
		}
	})
}
