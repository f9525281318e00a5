// Package regexlimit compiles regular expressions that come from clients
// (perturbation rules, success rules and JSON-schema patterns of inline
// world specs) within bounds on their source and on what they compile
// into. Go's regexp runs in linear time, but its compiled program grows
// with counted repetitions: `\pL{1000}` repeated 3,000 times (27 KB of
// source) compiles into three million instructions, about 141 MB, in
// seconds. [Cost] measures a pattern from its parse tree, before anything
// is expanded, so a pattern over the bound costs a parse of at most
// [DefaultMaxSourceBytes] and is refused.
//
// Matching is bounded too. Go's matcher is linear, but in the product of
// the text's length and the program's size: `.{0,1000}x` (2,003
// instructions) takes seconds over 64 KiB. A caller that matches a
// client's pattern against a client's text sizes the text by
// [MatchBytes]: the patterns' instructions ([Insts]) times the bytes they
// see stay within a work budget, and a pattern too large to see
// [MinMatchBytes] within it is refused when the spec is read.
package regexlimit

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"unicode/utf8"
)

// Defaults of the zero [Limits] fields.
const (
	// DefaultMaxSourceBytes bounds a pattern's text. Real patterns (an
	// email address, a tool-name prefix, a length check) are far shorter.
	DefaultMaxSourceBytes = 4 << 10
	// DefaultMaxBytes bounds a pattern's compiled size as [Cost]
	// estimates it: about 8,000 instructions (`.{0,1000}`, the largest
	// count Go accepts, takes 2,000).
	DefaultMaxBytes = 1 << 20
)

// InstBytes is what [Cost] charges per instruction of the compiled
// program: the instruction itself (40 bytes), its copy in a one-pass
// program, and the queues a matcher keeps per instruction. Capture slots
// are charged [SlotBytes] per instruction and rune ranges of character
// classes [RuneBytes] per rune on top (`\pL` holds about 1,300).
const InstBytes = 128

// RuneBytes is what [Cost] charges per rune of a character class: the
// rune, and the spare capacity of the slice the parser grew it in.
const RuneBytes = 8

// SlotBytes is what [Cost] charges per instruction for each capture slot
// of a group (two per group; [InstBytes] covers the whole match's): Go's
// matcher gives every thread a slice of all the slots, whatever the
// caller asks for (MatchString included), and keeps up to one thread per
// instruction in each of its two queues. Without it `(.)` repeated 1,300
// times before `(?:.?){1000}` (4 KB, estimated at 0.9 MiB) made one
// MatchString of 3,000 bytes allocate 69 MiB.
const SlotBytes = 16

// ErrTooLarge is wrapped by the error of a pattern over a bound.
var ErrTooLarge = errors.New("regular expression too large")

// Limits bound one pattern.
type Limits struct {
	// MaxSourceBytes bounds the pattern's text; 0 means
	// DefaultMaxSourceBytes.
	MaxSourceBytes int
	// MaxBytes bounds its compiled size as Cost estimates it; 0 means
	// DefaultMaxBytes.
	MaxBytes int
}

func (l *Limits) orDefaults() Limits {
	var o Limits
	if l != nil {
		o = *l
	}
	if o.MaxSourceBytes <= 0 {
		o.MaxSourceBytes = DefaultMaxSourceBytes
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	return o
}

// Cost is the estimated compiled size in bytes of expr (Go's RE2 syntax,
// as regexp.Compile reads it) and an error when expr does not parse or
// is over l (nil means the defaults). It never expands a repetition: the
// estimate is computed from the parse tree, saturating at the bound.
func Cost(expr string, l *Limits) (int, error) {
	_, n, err := parse(expr, l)
	return n, err
}

// parse is expr's parse tree and Cost.
func parse(expr string, l *Limits) (*syntax.Regexp, int, error) {
	lim := l.orDefaults()
	if len(expr) > lim.MaxSourceBytes {
		return nil, 0, fmt.Errorf("%w: %d bytes of pattern, over the limit of %d", ErrTooLarge, len(expr), lim.MaxSourceBytes)
	}
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, 0, err
	}
	// Saturating arithmetic: nothing past the bound needs counting.
	budget := int64(lim.MaxBytes)/InstBytes + 1
	insts := instCount(re, budget)
	slots := 2 * int64(re.MaxCap()) // InstBytes covers the whole match's two
	bytes := insts*(InstBytes+SlotBytes*slots) + RuneBytes*runeCount(re)
	if bytes > int64(lim.MaxBytes) {
		return nil, 0, fmt.Errorf("%w: it compiles into about %s, over the limit of %s (counted repetitions such as {1000} multiply what they repeat)",
			ErrTooLarge, size(bytes, insts >= budget), size(int64(lim.MaxBytes), false))
	}
	return re, int(bytes), nil
}

// Bounds on matching work, counted in instruction-bytes: a program's
// instructions times the bytes of text it is matched against, which is
// what Go's matchers (backtracking, one-pass or NFA) visit at most.
const (
	// DefaultMaxWork bounds the work of matching a text against the
	// client's patterns that read it (one step's action against a spec's
	// perturbation rules, an episode's final observation against its
	// success rule). Measured on a loaded 2-core machine at 20 to 60 ns
	// per instruction-byte for the worst patterns (a large class
	// counted), so at most about a second, and far less for the
	// literal-led patterns real rules use (Go skips to their prefix).
	DefaultMaxWork = 1 << 24
	// MinMatchBytes is the least text patterns must be able to see
	// within the work bound: 1,024 instructions in all. A spec whose
	// patterns leave less is refused.
	MinMatchBytes = 16 << 10
)

// Insts is the number of instructions expr compiles into, the factor Go's
// matcher multiplies a text's length by; an error when [Cost] refuses
// expr under l.
func Insts(expr string, l *Limits) (int, error) {
	re, _, err := parse(expr, l)
	if err != nil {
		return 0, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0, err
	}
	return len(prog.Inst), nil
}

// MatchBytes is how many bytes of a text patterns of insts instructions
// in all may each be matched against within work instruction-bytes
// (0 means DefaultMaxWork): work/insts, or an error wrapping
// [ErrTooLarge] when that is under [MinMatchBytes]. Callers match
// [Prefix](text, n): a text longer than n is matched by its first n
// bytes. insts ≤ 0 is read as 1.
func MatchBytes(insts int, work int64) (int, error) {
	if work <= 0 {
		work = DefaultMaxWork
	}
	insts = max(insts, 1)
	n := work / int64(insts)
	if n < MinMatchBytes {
		return 0, fmt.Errorf("%w: %d instructions, each matched against at least %d KiB of text, is over the matching budget of %d instruction-bytes; patterns may have %d instructions in all (counted repetitions such as {1000} multiply what they repeat)",
			ErrTooLarge, insts, MinMatchBytes>>10, work, work/MinMatchBytes)
	}
	return int(min(n, int64(^uint(0)>>1))), nil
}

// Prefix is s cut to at most n bytes, back to the start of a UTF-8
// sequence so no character is split.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Compile is regexp.Compile of expr after [Cost] admitted it, and its cost.
func Compile(expr string, l *Limits) (*regexp.Regexp, int, error) {
	n, err := Cost(expr, l)
	if err != nil {
		return nil, 0, err
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, 0, err
	}
	return re, n, nil
}

func size(b int64, more bool) string {
	s := fmt.Sprintf("%d KiB", (b+1023)>>10)
	if b >= 1<<20 {
		s = fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	if more {
		s = "more than " + s
	}
	return s
}

// instCount estimates the instructions re compiles into, the way the
// compiler expands it (x{2,5} is xx(x(x(x)?)?)?), capped at limit.
func instCount(re *syntax.Regexp, limit int64) int64 {
	sat := func(n int64) int64 { return min(n, limit) }
	mul := func(a, b int64) int64 {
		if a != 0 && b > limit/a {
			return limit
		}
		return sat(a * b)
	}
	switch re.Op {
	case syntax.OpLiteral:
		return sat(int64(len(re.Rune)))
	case syntax.OpCapture, syntax.OpStar:
		return sat(2 + instCount(re.Sub[0], limit))
	case syntax.OpPlus, syntax.OpQuest:
		return sat(1 + instCount(re.Sub[0], limit))
	case syntax.OpConcat, syntax.OpAlternate:
		n := int64(len(re.Sub))
		for _, s := range re.Sub {
			n = sat(n + instCount(s, limit))
		}
		return n
	case syntax.OpRepeat:
		sub := instCount(re.Sub[0], limit)
		if re.Max == -1 {
			return sat(2 + mul(int64(max(re.Min, 1)), sub))
		}
		return sat(mul(int64(re.Max), sub) + int64(re.Max-re.Min) + 1)
	default: // character classes, any character, empty-width assertions
		return 1
	}
}

// runeCount is the runes the parse tree's character classes hold. A class
// repeated by a counted repetition shares them, so they are not
// multiplied.
func runeCount(re *syntax.Regexp) int64 {
	n := int64(0)
	if re.Op == syntax.OpCharClass {
		n = int64(len(re.Rune))
	}
	for _, s := range re.Sub {
		n += runeCount(s)
	}
	return n
}
