package conversation

import (
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/pytext"
)

func TestExtractPredictionBasics(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", NoOutput},
		{"plain", "  hello \n", "hello"},
		{"pair", "<think>x</think><predicted_observation> a </predicted_observation>", "a"},
		{"orphan close", "reasoning</think>answer", "answer"},
		{"open to tag", "<think>still thinking <predicted_observation>ok</predicted_observation>", "ok"},
		{"open to end", "before<think>never closed", "before"},
		{"last block", "<predicted_observation>1</predicted_observation><predicted_observation>2</predicted_observation>", "2"},
		{"unclosed", "<PREDICTED_OBSERVATION>tail  ", "tail"},
		{"empty tag", "<predicted_observation></predicted_observation>", ""},
		{"only thinking", "<think>a</think>   ", NoOutput},
	}
	for _, tt := range tests {
		if got := ExtractPrediction(tt.in); got != tt.want {
			t.Errorf("%s: ExtractPrediction(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestReasoning(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"none", "<predicted_observation>ok</predicted_observation>", ""},
		{"pair", "<think> plan </think><predicted_observation>a</predicted_observation>", "plan"},
		{"headless", "the file is small\nso cat prints it</think>\n<predicted_observation>x</predicted_observation>", "the file is small\nso cat prints it"},
		{"pair then orphan close", "<think>a</think> b </think>answer", "a\n\nb"},
		{"open to tag", "<think>still thinking <predicted_observation>ok</predicted_observation>", "still thinking"},
		{"open to end", "before<think>never closed", "never closed"},
		{"case", "<THINK>x</Think>y", "x"},
		{"empty pair", "<think>  </think>z", ""},
	}
	for _, tt := range tests {
		if got := Reasoning(tt.in); got != tt.want {
			t.Errorf("%s: Reasoning(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

// FuzzReasoning checks that thinking and prediction partition a generation
// the same way: whatever Reasoning returns is gone from StripThinking's
// result when it held no tags of its own.
func FuzzReasoning(f *testing.F) {
	for _, s := range []string{"a</think>b", "<think>x</think>y", "<think>x<predicted_observation>y", "plain"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := Reasoning(s)
		if strings.TrimSpace(r) != r {
			t.Fatalf("Reasoning(%q) = %q is not trimmed", s, r)
		}
		if !strings.ContainsAny(s, "<>") && r != "" {
			t.Fatalf("Reasoning(%q) = %q without any tag", s, r)
		}
	})
}

// FuzzSplitAnswer: SplitAnswer gives what ExtractPrediction and Reasoning
// give apart.
func FuzzSplitAnswer(f *testing.F) {
	for _, s := range []string{"a</think>b", "<think>x</think>y", "<think>x<predicted_observation>y", "plain", "", "<think>a</think><THINK>b</think>c</think>d<think>e<predicted_observation>f</predicted_observation>", "<thin\u212a>x</thin\u212a>y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, r := SplitAnswer(s)
		if wp, wr := ExtractPrediction(s), Reasoning(s); p != wp || r != wr {
			t.Fatalf("SplitAnswer(%q) = %q, %q; apart %q, %q", s, p, r, wp, wr)
		}
	})
}

// FuzzAnswerRoundTrip: whatever observation a training target wraps,
// ExtractPrediction reads back stripped, as long as the observation holds
// none of the tags the reader looks for (no real observation does; a
// target's text is the model's whole answer).
func FuzzAnswerRoundTrip(f *testing.F) {
	for _, s := range []string{"", "a.txt\nb.txt", "  padded  ", "**Environment Observation:**\nx", "<b>bold</b>", "多字节"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, obs string) {
		low := strings.ToLower(obs)
		if strings.Contains(low, "think>") || strings.Contains(low, "predicted_observation>") {
			t.Skip("the observation holds a tag the reader acts on")
		}
		want := pytext.Strip(obs)
		got := ExtractPrediction(Answer(obs))
		if got != want {
			t.Fatalf("ExtractPrediction(Answer(%q)) = %q, want %q", obs, got, want)
		}
	})
}

// FuzzExtractScanners: the scans that spare the usual answer the regexps
// give exactly what the regexps alone give.
func FuzzExtractScanners(f *testing.F) {
	for _, s := range []string{
		"plain", "<predicted_observation>\nx\n</predicted_observation>", "a</think>b", "<THINK>x</Think>y",
		"<think>x<predicted_observation>y", "<Predicted_Observation>a<PREDICTED_OBSERVATION>b</predicted_observation>c",
		"<thin\u212a>x</thin\u212a>y", "<think>a</think><THINK>b</think>c</think>d<think>e<predicted_observation>f", "<thi<think>x</think>nk>y</think>z", "<predicted_ob\u017fervation>z", "<<predicted_observation>", "<table><tr>", "</predicted_observation>x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, keep := range []bool{false, true} {
			a, th := splitThinking(s, keep)
			wa, wth := splitThinkingRegexp(s, keep)
			if a != wa || th != wth {
				t.Fatalf("splitThinking(%q, %v) = %q, %q; the regexps give %q, %q", s, keep, a, th, wa, wth)
			}
		}
		c, ok := LastTagContent(s)
		wc, wok := lastTagContentRegexp(s)
		if c != wc || ok != wok {
			t.Fatalf("LastTagContent(%q) = %q, %v; the regexps give %q, %v", s, c, ok, wc, wok)
		}
	})
}

// TestLeadingThinkingNotCopied: the usual generation, thinking then the
// answer, loses its thinking without a copy of the rest, whose text is
// what the regexps leave.
func TestLeadingThinkingNotCopied(t *testing.T) {
	gen := "<think>plan</think><THINK>more</think>\n<predicted_observation>$ ls\na.txt</predicted_observation>"
	if got, want := StripThinking(gen), gen[len("<think>plan</think><THINK>more</think>"):]; got != want {
		t.Fatalf("StripThinking = %q, want %q", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { _ = StripThinking(gen) }); n != 0 {
		t.Errorf("%v allocations to strip leading thinking, want 0", n)
	}
}
