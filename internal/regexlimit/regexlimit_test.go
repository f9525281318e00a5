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
		{"many groups before many optional characters", captures(1300), true},
		{"a few groups in a long pattern", `^(\w+)@(\w+)\.(\w+) .{0,900}$`, false},
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

// captures is n one-character groups followed by 1,000 optional
// characters: small programs whose matcher threads each carry 2n+2 slots.
func captures(n int) string { return strings.Repeat("(.)", n) + "(?:.?){1000}" }

// TestCostBoundsMatching: what one match allocates (the matcher's threads
// and their capture slots, which the heap after GC no longer shows: the
// matcher goes back to a pool GC empties) stays under the estimate, for
// patterns with many groups just under the bound.
func TestCostBoundsMatching(t *testing.T) {
	input := strings.Repeat("abcé ", 600)
	for _, expr := range []string{captures(8), strings.Repeat("(a|b)", 30) + ".{0,300}", `^(\w+)@(\w+)\.(\w+) .{0,900}$`, `^.{1,1000}$`, `\pL{900}`} {
		cost, err := Cost(expr, nil)
		if err != nil {
			t.Fatalf("%.40s: %v", expr, err)
		}
		for _, match := range []func(*regexp.Regexp){
			func(re *regexp.Regexp) { re.MatchString(input) },
			func(re *regexp.Regexp) { re.FindStringSubmatchIndex(input) },
		} {
			re := regexp.MustCompile(expr)
			// Matchers are pooled across regexps; two collections empty
			// the pools, so this match makes its own.
			runtime.GC()
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			match(re)
			runtime.ReadMemStats(&after)
			used := after.TotalAlloc - before.TotalAlloc
			t.Logf("%.40q: estimated %d bytes, one match allocated %d", expr, cost, used)
			if used > uint64(cost) {
				t.Errorf("%.40q: matching allocated %d bytes, over its estimate %d", expr, used, cost)
			}
		}
	}
	// The attack: admitted before slots were charged, 69 MiB for one match.
	if n, err := Cost(captures(1300), nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("1,300 groups before 1,000 optional characters admitted at %d bytes", n)
	}
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

// TestMatchBytes: patterns see DefaultMaxWork over their instructions in
// all, and a program too large to see MinMatchBytes is refused; Insts
// counts the compiled program (`.{0,1000}x`, the red team's pattern, has
// 2,003 instructions); Prefix never splits a character.
func TestMatchBytes(t *testing.T) {
	if k, err := Insts(`.{0,1000}x`, nil); err != nil || k != 2003 {
		t.Fatalf("Insts: %d %v", k, err)
	}
	if _, err := Insts(strings.Repeat(`\pL{1000}`, 400), nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Insts of a pattern Cost refuses: %v", err)
	}
	for _, tc := range []struct {
		insts int
		want  int
	}{{0, DefaultMaxWork}, {1, DefaultMaxWork}, {46, DefaultMaxWork / 46}, {1024, MinMatchBytes}, {1025, -1}, {2003, -1}} {
		n, err := MatchBytes(tc.insts, 0)
		if tc.want < 0 {
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("%d instructions: %d %v, want refused", tc.insts, n, err)
			}
			continue
		}
		if err != nil || n != tc.want {
			t.Errorf("%d instructions: %d %v, want %d", tc.insts, n, err, tc.want)
		}
	}
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{{"abc", 5, "abc"}, {"abc", 2, "ab"}, {"aé", 2, "a"}, {"aé", 3, "aé"}, {"é", 0, ""}} {
		if got := Prefix(tc.s, tc.n); got != tc.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
