package realenv

import (
	"regexp"
	"strings"
)

// KeyOp is one tmux send-keys call: either literal text (send-keys -l) or a
// key name in tmux notation (C-c, Enter, Up, …).
type KeyOp struct {
	Literal string
	Key     string
}

// Args are the send-keys arguments after the target.
func (k KeyOp) Args() []string {
	if k.Key != "" {
		return []string{k.Key}
	}
	return []string{"-l", "--", k.Literal}
}

// keyName matches what tmux accepts as one key: modifiers (C-, M-, S-) on a
// character or named key, a caret control (^C), or a named key.
var keyName = regexp.MustCompile(`^(?:(?:[CMS]-)+(?:[!-~]|` + namedKeys + `)|\^[@A-Za-z\[\\\]^_?]|` + namedKeys + `)$`)

const namedKeys = `Enter|Escape|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|PageUp|PageDown|PgUp|PgDn|PPage|NPage|IC|DC|Insert|Delete|F[1-9]|F1[0-2]|KP[0-9]|KPEnter`

// IsKeyName reports whether s is a single key in tmux notation.
func IsKeyName(s string) bool { return keyName.MatchString(s) }

// KeyOps turns one keystrokes string into send-keys calls. A string that is
// a tmux key name is sent as that key; otherwise text is typed literally and
// every newline becomes Enter, so a trailing newline executes the command.
// A key name followed by newlines sends the key, then Enter per newline.
func KeyOps(keystrokes string) []KeyOp {
	s := strings.ReplaceAll(keystrokes, "\r\n", "\n")
	if s == "" {
		return nil
	}
	if IsKeyName(s) {
		return []KeyOp{{Key: s}}
	}
	body := strings.TrimRight(s, "\n")
	trailing := len(s) - len(body)
	var ops []KeyOp
	if body != "" && IsKeyName(body) {
		ops = append(ops, KeyOp{Key: body})
	} else {
		segs := strings.Split(body, "\n")
		for i, seg := range segs {
			if seg != "" {
				ops = append(ops, KeyOp{Literal: seg})
			}
			if i < len(segs)-1 {
				ops = append(ops, KeyOp{Key: "Enter"})
			}
		}
	}
	for range trailing {
		ops = append(ops, KeyOp{Key: "Enter"})
	}
	return ops
}
