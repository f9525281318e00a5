package perturb

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/regexlimit"
)

// TestActionMatchingIsBounded is the CPU attack left open by issue 21's
// red team: `.{0,1000}x` passed the memory bound (256 KiB) and took 18 s
// for one match against a 1 MiB action, for every rule that carried it.
// Such configs are now refused naming the rule's when.action; every
// admitted config's step does at most regexlimit.DefaultMaxWork
// instruction-bytes of matching (the patterns' instructions, counted from
// their compiled programs, times the bytes each is matched against), and
// the engine really matches no more of an action than that.
func TestActionMatchingIsBounded(t *testing.T) {
	rule := func(name, action string) Rule {
		return Rule{Name: name, When: When{Action: action}, Inject: Inject{Kind: Timeout}}
	}
	for _, tc := range []struct {
		name  string
		rules []Rule
		field string // "" when admitted
	}{
		{"the attack", []Rule{rule("a", `.{0,1000}x`)}, "rules[0].when.action"},
		{"alternation counted", []Rule{rule("a", `(?:a|b|.){0,900}#`)}, "rules[0].when.action"},
		{"several rules that each pass", []Rule{rule("a", `.{0,300}x`), rule("b", `.{0,300}y`), rule("c", `rm -rf`)}, "rules[1].when.action"},
		{"real rules", []Rule{rule("a", `"LL-13"`), rule("b", `(?i)\b(?:delete|drop|rm -rf)\b`), rule("c", `^\{"name":"get_`)}, ""},
		{"one large rule within the budget", []Rule{rule("a", `.{0,500}x`)}, ""},
		{"no patterns", []Rule{{Name: "a", When: When{Tool: "get_user"}, Inject: Inject{Kind: Timeout}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Rules: tc.rules}
			e, err := New(cfg, tools)
			if tc.field != "" {
				var fe *fielderr.Error
				if !errors.As(err, &fe) || fe.Path != tc.field || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "instructions") {
					t.Fatalf("admitted or wrong refusal: %v (want field %s)", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			insts := 0
			for _, r := range tc.rules {
				if r.When.Action != "" {
					k, err := regexlimit.Insts(r.When.Action, nil)
					if err != nil {
						t.Fatal(err)
					}
					insts += k
				}
			}
			if work := int64(max(insts, 1)) * int64(e.MatchBytes()); work > regexlimit.DefaultMaxWork {
				t.Fatalf("%d instructions × %d bytes = %d instruction-bytes per step, over %d", insts, e.MatchBytes(), work, regexlimit.DefaultMaxWork)
			}
			if e.MatchBytes() < regexlimit.MinMatchBytes {
				t.Fatalf("rules see only %d bytes", e.MatchBytes())
			}
			t.Logf("%d instructions: each pattern sees %d KiB of an action", insts, e.MatchBytes()>>10)
		})
	}
}

// TestRulesMatchTheActionsPrefix: a rule sees the first MatchBytes bytes
// of an action (cut at a character boundary), all of it for real rules.
func TestRulesMatchTheActionsPrefix(t *testing.T) {
	small, err := New(&Config{Rules: []Rule{{Name: "s", When: When{Action: `needle`}, Inject: Inject{Kind: Timeout}}}}, tools)
	if err != nil {
		t.Fatal(err)
	}
	if small.MatchBytes() < 1<<20 {
		t.Fatalf("a small rule sees %d bytes, less than a 1 MiB action", small.MatchBytes())
	}
	long := strings.Repeat("é", 1<<19) + "needle" // 1 MiB and the needle
	if d := small.Decide(Step{Turn: 1, Action: long}); len(d.Fired) != 1 {
		t.Fatalf("a small rule missed the end of a 1 MiB action: %+v", d)
	}

	big, err := New(&Config{Rules: []Rule{{Name: "b", When: When{Action: `.{0,500}needle$`}, Inject: Inject{Kind: Timeout}}}}, tools)
	if err != nil {
		t.Fatal(err)
	}
	n := big.MatchBytes()
	if n >= 1<<20 || n < regexlimit.MinMatchBytes {
		t.Fatalf("a 1,000-instruction rule sees %d bytes", n)
	}
	within := strings.Repeat("a", n-len("needle")) + "needle"
	if d := big.Decide(Step{Turn: 1, Action: within}); len(d.Fired) != 1 {
		t.Fatalf("needle within the %d bytes the rule sees: not matched", n)
	}
	// The same needle one byte further: the rule sees the action cut
	// before it ends, so `needle$` does not match.
	beyond := "a" + within
	if d := big.Decide(Step{Turn: 1, Action: beyond}); len(d.Fired) != 0 {
		t.Fatalf("needle past the %d bytes the rule sees: matched", n)
	}
	if got := regexlimit.Prefix("aé", 2); got != "a" {
		t.Fatalf("Prefix split a character: %q", got)
	}
}

// BenchmarkWorstAdmittedStep times one step of the largest admitted rule
// against a 1 MiB action (compare with 18 s for `.{0,1000}x` before the
// bound). Run with -bench WorstAdmittedStep -benchtime 3x.
func BenchmarkWorstAdmittedStep(b *testing.B) {
	e, err := New(&Config{Rules: []Rule{{Name: "w", When: When{Action: `[\pL\pN]{0,510}#`}, Inject: Inject{Kind: Timeout}}}}, tools)
	if err != nil {
		b.Fatal(err)
	}
	action := strings.Repeat("ab", 1<<19)
	b.ResetTimer()
	for range b.N {
		e.Decide(Step{Turn: 1, Action: action})
	}
}
