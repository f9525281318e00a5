package realenv

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/domain"
)

func TestSimilarity(t *testing.T) {
	tests := []struct {
		a, b string
		want float64
	}{
		{"", "", 1},
		{"a b c", "a b c", 1},
		{"a b c", "", 0},
		{"a b c d", "a x c d", 0.75},
		{"a b", "b a", 0.5},
	}
	for _, tt := range tests {
		if got := Similarity(tt.a, tt.b); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("Similarity(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestCompare(t *testing.T) {
	real := "root@sandbox:/app# cat x\ncat: x: No such file or directory\nroot@sandbox:/app#"
	tests := []struct {
		name      string
		d         domain.Domain
		real, sim string
		exact     bool
		failRules []string
	}{
		{"terminal same", domain.Terminal, real, "**Environment Observation:**\n" + real + "\n", true, nil},
		{"terminal invented output", domain.Terminal, real, "root@sandbox:/app# cat x\nhello\nroot@sandbox:/app#", false, []string{"error_lines"}},
		{"terminal still running", domain.Terminal, "root@sandbox:/app# sleep 9", "root@sandbox:/app# sleep 9\nroot@sandbox:/app#", false, []string{"final_line", "command_finished"}},
		{"mcp same", domain.MCP, `{"content":[{"type":"text","text":"ok"}]}`, `{"content":[{"type":"text","text":"ok"}]}`, true, nil},
		{"mcp error vs success", domain.MCP, `{"content":[{"type":"text","text":"boom"}],"isError":true}`, `{"content":[{"type":"text","text":"ok"}]}`, false, []string{"is_error"}},
		{"mcp not json", domain.MCP, `{"content":[]}`, `ok`, false, []string{"json_valid", "is_error", "content_types"}},
		{"search", domain.Search, `[1]`, `x`, false, []string{"json_valid"}},
	}
	for _, tt := range tests {
		d := Compare(tt.d, tt.real, tt.sim)
		var failed []string
		for _, r := range d.Rules {
			if !r.Pass {
				failed = append(failed, r.Name)
			}
		}
		if d.Exact != tt.exact || !cmp.Equal(failed, tt.failRules) || d.RulesPassed != (len(tt.failRules) == 0) {
			t.Errorf("%s: exact %v failed rules %v (rules_passed %v), want exact %v failed %v", tt.name, d.Exact, failed, d.RulesPassed, tt.exact, tt.failRules)
		}
		if tt.exact && d.Similarity != 1 {
			t.Errorf("%s: similarity %v for an exact match", tt.name, d.Similarity)
		}
	}
}

func FuzzCompare(f *testing.F) {
	f.Add("root@sandbox:/app# ls\na\nroot@sandbox:/app#", "root@sandbox:/app# ls\nb")
	f.Add(`{"content":[{"type":"text","text":"x"}]}`, `{"error":{"code":1}}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, d := range []domain.Domain{domain.Terminal, domain.MCP, domain.Web} {
			div := Compare(d, a, b)
			if div.Similarity < 0 || div.Similarity > 1 || math.IsNaN(div.Similarity) {
				t.Fatalf("similarity %v out of range", div.Similarity)
			}
			if self := Compare(d, a, a); !self.Exact || !self.RulesPassed || self.Similarity != 1 {
				t.Fatalf("an observation differs from itself: %+v", self)
			}
		}
	})
}
