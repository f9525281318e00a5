package judge

import (
	"fmt"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
)

// ParseChoice reads the answer of a pairwise judge (turing or reference
// mode): thinking removed, the content of the last \boxed{...} in the
// answer, which must be the single letter A or B (surrounding spaces
// allowed, nothing else: not "a", not "Response A", not \text{A}). No box,
// an unclosed box or another content is an error wrapping ErrUnparseable,
// quoting what was found, so the attempt is retried and counted like an
// unparseable pointwise verdict.
func ParseChoice(output string) (string, error) {
	text := conversation.StripThinking(output)
	const open = `\boxed{`
	i := strings.LastIndex(text, open)
	if i < 0 {
		return "", fmt.Errorf("%w: no \\boxed{} answer", ErrUnparseable)
	}
	rest := text[i+len(open):]
	// The content ends at the brace that balances the box's.
	depth, end := 1, -1
	for k := 0; k < len(rest) && end < 0; k++ {
		switch rest[k] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				end = k
			}
		}
	}
	if end < 0 {
		return "", fmt.Errorf("%w: \\boxed{ is never closed", ErrUnparseable)
	}
	got := strings.TrimSpace(rest[:end])
	if got != "A" && got != "B" {
		q := got
		if len(q) > 40 {
			q = q[:40] + "…"
		}
		return "", fmt.Errorf("%w: boxed answer %q is not A or B", ErrUnparseable, q)
	}
	return got, nil
}
