package regexlimit

import (
	"errors"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit"
)

// TestCost: patterns of real rules are admitted and cost little; the
// attacks of issue 21 (a counted repetition of a Unicode class, repeated;
// nested counts; many large classes) are refused, each after a parse of
// at most MaxSourceBytes.
func TestCost(t *testing.T) {
	for _, tc := range []struct {
		name, expr string
		tooLarge   bool
	}{
		{"tool prefix", `^search_`, false},
		{"email", `^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$`, false},
		{"length check", `^.{1,1000}$`, false},
		{"one large count", `\pL{1000}`, false},
		{"words", `(?i)\b(?:error|fail(?:ed|ure)?|denied)\b`, false},
		{"letters", `^[\pL\pN_]{1,64}$`, false},
		{"issue 21's pattern, 27 KB", strings.Repeat(`\pL{1000}`, 3000), true},
		{"the same within the source bound", strings.Repeat(`\pL{1000}`, 400), true},
		{"unbounded with a large minimum", `(abcdefgh){1000,}`, true},
		{"many Unicode classes", strings.Repeat(`\pL`, 1300), true},
		{"alternation of counts", alternation(300), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := Cost(tc.expr, nil)
			if tc.tooLarge {
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("admitted (cost %d, err %v)", n, err)
				}
				return
			}
			if err != nil || n <= 0 || n > DefaultMaxBytes {
				t.Fatalf("cost %d, err %v", n, err)
			}
			re, _, err := Compile(tc.expr, nil)
			if err != nil || re.String() != tc.expr {
				t.Fatalf("Compile: %v", err)
			}
		})
	}
	// Go itself refuses nested counts past 1,000 in all.
	for _, expr := range []string{`a(`, `((a{30}){30}){30}`} {
		if _, err := Cost(expr, nil); err == nil || errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s: %v, want a syntax error", expr, err)
		}
	}
	if _, err := Cost(`a{10}`, &Limits{MaxBytes: 5 * InstBytes}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a smaller bound: %v", err)
	}
}

// alternation is n distinct counted alternatives, which the parser cannot
// factor into one.
func alternation(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(string(rune('a'+i%26)) + string(rune('a'+i/26)) + "{500}")
	}
	return b.String()
}

// TestCostBoundsMemory: for patterns just under the bound, what the
// regexp holds after compiling and matching (heap in use after GC, read
// through runtime.MemStats) stays under the estimate, so summing costs
// bounds memory.
func TestCostBoundsMemory(t *testing.T) {
	input := strings.Repeat("abcé ", 2000)
	for _, expr := range []string{`\pL{900}`, `^.{1,1000}$`, `(a|b|c|d){1000}`, strings.Repeat(`[\pL\pN]`, 80), `(?i)^(ab|cd){1,400}$`} {
		cost, err := Cost(expr, nil)
		if err != nil {
			t.Fatalf("%.40s: %v", expr, err)
		}
		const copies = 8 // averages allocator noise out
		before := testkit.HeapAfterGC()
		res := make([]*regexp.Regexp, copies)
		for i := range res {
			res[i] = regexp.MustCompile(expr)
			res[i].MatchString(input)
			res[i].FindStringIndex(input)
		}
		used := testkit.HeapAfterGC() - before
		runtime.KeepAlive(res)
		t.Logf("%.40q: estimated %d bytes, held %d", expr, cost, used/copies)
		if used/copies > int64(cost) {
			t.Errorf("%.40q holds %d bytes, over its estimate %d", expr, used/copies, cost)
		}
	}
}
