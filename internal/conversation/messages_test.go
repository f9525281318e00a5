package conversation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/pytext"
)

func TestUserMessage(t *testing.T) {
	reminder := AnswerReminder
	tests := []struct {
		name                     string
		n                        int
		action, state, control   string
		want                     string
		wantAction               string // what ParseUserMessage gives back; "" means action
		wantState, wantControlBk string
	}{
		{name: "plain", n: 1, action: `[{"keystrokes":"ls\n"}]`,
			want: "### Turn 1\n**Action:**\n[{\"keystrokes\":\"ls\\n\"}]\n\n" + reminder},
		{name: "world state", n: 2, action: "a", state: "  the cat is Tom \n",
			want:      "### Turn 2\n**Action:**\na\n\n" + WorldStateHeading + "\nthe cat is Tom\n\n" + reminder,
			wantState: "the cat is Tom"},
		{name: "both", n: 3, action: "a", state: "s", control: "make it fail",
			want:      "### Turn 3\n**Action:**\na\n\n" + WorldStateHeading + "\ns\n\n" + ControlHeading + "\nmake it fail\n\n" + reminder,
			wantState: "s", wantControlBk: "make it fail"},
		{name: "control only", n: 4, action: "", control: "slow",
			want:          "### Turn 4\n**Action:**\n\n\n" + ControlHeading + "\nslow\n\n" + reminder,
			wantControlBk: "slow"},
		{name: "action from a record keeps its heading", n: 9, action: "### Turn 2\n**Action:**\npwd",
			want:       "### Turn 2\n**Action:**\npwd\n\n" + reminder,
			wantAction: "pwd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := UserMessage(tt.n, tt.action, tt.state, tt.control)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("UserMessage (-want +got):\n%s", diff)
			}
			n, a, s, c, err := ParseUserMessage(got)
			wantN, wantA := tt.n, tt.action
			if tt.wantAction != "" {
				wantN, wantA, _ = ParseActionPrompt(tt.action)
			}
			if err != nil || n != wantN || a != wantA || s != tt.wantState || c != tt.wantControlBk {
				t.Fatalf("ParseUserMessage = %d %q %q %q %v", n, a, s, c, err)
			}
		})
	}
	for _, bad := range []string{"", "### Turn 1\n**Action:**\nls", "Turn 1\n**Action:**\nls\n\n" + reminder, "### Turn x\n**Action:**\nls\n\n" + reminder} {
		if _, _, _, _, err := ParseUserMessage(bad); err == nil {
			t.Errorf("ParseUserMessage(%q) accepted", bad)
		}
	}
}

func TestActionPrompt(t *testing.T) {
	tests := []struct {
		n      int
		action string
		want   string
	}{
		{1, "ls", "### Turn 1\n**Action:**\nls"},
		{12, "", "### Turn 12\n**Action:**\n"},
		{3, "### Turn 2\n**Action:**\npwd", "### Turn 2\n**Action:**\npwd"},
		{3, "### Turn of events", "### Turn of events"},
	}
	for _, tt := range tests {
		if got := ActionPrompt(tt.n, tt.action); got != tt.want {
			t.Errorf("ActionPrompt(%d, %q) = %q, want %q", tt.n, tt.action, got, tt.want)
		}
	}
}

func TestTrimHeadingAndMarker(t *testing.T) {
	tests := []struct {
		in      string
		escaped bool
		want    string
	}{
		{"### Turn 12\n**Action:**\nls", false, "\nls"},
		{`### Turn 12\n**Action:**\nls`, true, `\nls`},
		{`### Turn 12\n**Action:**\nls`, false, `### Turn 12\n**Action:**\nls`},
		{"### Turn x\n**Action:** ls", false, "### Turn x\n**Action:** ls"},
		{"### Turn 1 **Action:** ls", false, "### Turn 1 **Action:** ls"},
		{"### Turn 1\n", false, "### Turn 1\n"},
		{"ls", false, "ls"},
	}
	for _, tt := range tests {
		if got := TrimActionHeading(tt.in, tt.escaped); got != tt.want {
			t.Errorf("TrimActionHeading(%q, %v) = %q, want %q", tt.in, tt.escaped, got, tt.want)
		}
		if got := string(TrimActionHeading([]byte(tt.in), tt.escaped)); got != tt.want {
			t.Errorf("TrimActionHeading([]byte(%q), %v) = %q, want %q", tt.in, tt.escaped, got, tt.want)
		}
	}
	for in, want := range map[string]string{
		"**Environment Observation:**\na.txt": "a.txt",
		"**Environment Observation:**":        "",
		"**Environment Observation:** x":      " x",
		"ok **Environment Observation:**":     "ok **Environment Observation:**",
	} {
		if got := TrimObservationMarker(in); got != want {
			t.Errorf("TrimObservationMarker(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTrimIsFree: the dataset statistics trim every turn of a corpus, so
// trimming a byte slice must not copy it.
func TestTrimIsFree(t *testing.T) {
	act := []byte(`### Turn 12\n**Action:**\n[{\"keystrokes\":\"ls\\n\"}]`)
	obs := []byte("**Environment Observation:**\na.txt")
	if n := testing.AllocsPerRun(100, func() {
		_ = TrimActionHeading(act, true)
		_ = TrimObservationMarker(obs)
	}); n != 0 {
		t.Errorf("%v allocations per trim, want 0", n)
	}
}

func TestObservationResponse(t *testing.T) {
	if got := ObservationResponse("a.txt"); got != "**Environment Observation:**\na.txt" {
		t.Errorf("got %q", got)
	}
	if got := ObservationResponse("**Environment Observation:**\na.txt"); got != "**Environment Observation:**\na.txt" {
		t.Errorf("a marked observation changed: %q", got)
	}
}

func TestStripObservationMarker(t *testing.T) {
	for in, want := range map[string]string{
		"**Environment Observation:**\n a.txt \n":                   "a.txt",
		"ok **Environment Observation:** done":                      "ok  done",
		"**Environment Observation:**x**Environment Observation:**": "x**Environment Observation:**",
		"  plain ": "plain",
	} {
		if got := StripObservationMarker(in); got != want {
			t.Errorf("StripObservationMarker(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExample(t *testing.T) {
	if got, want := Example(2, " list_notes\n", "[]"), "## Example 2\n**Action:**\nlist_notes\n**Environment Observation:**\n[]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// FuzzActionPromptRoundTrip: ParseActionPrompt undoes ActionPrompt for any
// action that does not already carry a heading, and TrimActionHeading
// agrees with it on raw text and on the text inside a JSON string.
func FuzzActionPromptRoundTrip(f *testing.F) {
	for _, s := range []string{"ls", "", "### Turn 2\n**Action:**\npwd", "[{\"keystrokes\":\"ls\\n\"}]", "多\n"} {
		f.Add(uint16(1), s)
	}
	f.Fuzz(func(t *testing.T, n uint16, action string) {
		p := ActionPrompt(int(n), action)
		gotN, gotA, ok := ParseActionPrompt(p)
		if strings.HasPrefix(action, turnHeading) {
			if p != action {
				t.Fatalf("a headed action %q was changed to %q", action, p)
			}
			return
		}
		if !ok || gotN != int(n) || gotA != action {
			t.Fatalf("ParseActionPrompt(%q) = %d, %q, %v; want %d, %q", p, gotN, gotA, ok, n, action)
		}
		if got := TrimActionHeading(p, false); got != "\n"+action {
			t.Fatalf("TrimActionHeading(%q) = %q", p, got)
		}
		lit := string(mustJSON(p))
		raw := lit[1 : len(lit)-1]
		if got := TrimActionHeading([]byte(raw), true); string(got) != raw[len(raw)-len(got):] || !strings.HasPrefix(string(got), `\n`) {
			t.Fatalf("TrimActionHeading(%q, escaped) = %q", raw, got)
		}
	})
}

// FuzzUserMessageRoundTrip: ParseUserMessage undoes UserMessage whenever
// the parts do not themselves hold the headings that delimit them.
func FuzzUserMessageRoundTrip(f *testing.F) {
	f.Add(uint16(1), `[{"keystrokes":"ls\n"}]`, "", "")
	f.Add(uint16(7), "click(\"3\")", "the shop is open", "")
	f.Add(uint16(2), "x", "", "answer with an error")
	f.Fuzz(func(t *testing.T, n uint16, action, state, control string) {
		for _, part := range []string{action, state, control} {
			if strings.Contains(part, WorldStateHeading) || strings.Contains(part, ControlHeading) || strings.Contains(part, AnswerReminder) {
				t.Skip("a part holds a heading")
			}
		}
		if strings.HasPrefix(action, turnHeading) {
			t.Skip("a headed action keeps its own turn number")
		}
		msg := UserMessage(int(n), action, state, control)
		gotN, a, s, c, err := ParseUserMessage(msg)
		if err != nil || gotN != int(n) || a != action || s != strings.TrimSpace(state) || c != strings.TrimSpace(control) {
			t.Fatalf("ParseUserMessage(%q) = %d %q %q %q %v", msg, gotN, a, s, c, err)
		}
	})
}

// userMessageReference is UserMessage written plainly, piece by piece:
// the bytes the sized one must reproduce.
func userMessageReference(n int, action, worldState, control string) string {
	msg := ActionPrompt(n, action) + "\n"
	if s := strings.TrimSpace(worldState); s != "" {
		msg += "\n" + WorldStateHeading + "\n" + s + "\n"
	}
	if s := strings.TrimSpace(control); s != "" {
		msg += "\n" + ControlHeading + "\n" + s + "\n"
	}
	return msg + "\n" + AnswerReminder
}

// FuzzUserMessageBytes: UserMessage, which writes into a buffer of the
// size it computes, renders every input exactly as the plain
// concatenation does.
func FuzzUserMessageBytes(f *testing.F) {
	f.Add(1, `[{"keystrokes":"ls\n"}]`, "", "")
	f.Add(-12, "### Turn 3\n**Action:**\nx", " the shop is open\n", "\t")
	f.Add(1<<40, "", "é", "answer with an error")
	f.Fuzz(func(t *testing.T, n int, action, state, control string) {
		want := userMessageReference(n, action, state, control)
		if got := UserMessage(n, action, state, control); got != want {
			t.Fatalf("UserMessage(%d, %q, %q, %q)\n%q\nwant\n%q", n, action, state, control, got, want)
		}
	})
}

// TestUserMessageAllocatesOnce: every step renders a user message, into
// one buffer of the right size.
func TestUserMessageAllocatesOnce(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() {
		_ = UserMessage(12, `[{"keystrokes":"ls\n"}]`, "disk usage: 71%", "Simulate a transient failure.")
		_ = UserMessage(3, "### Turn 3\n**Action:**\nx", "", "")
	}); n != 2 {
		t.Errorf("%v allocations for two messages, want 2", n)
	}
}

// FuzzObservationRoundTrip: TrimObservationMarker undoes
// ObservationResponse, StripObservationMarker (the published judge's
// reading) gives the observation stripped, and a response is a fixed point
// of ObservationResponse.
func FuzzObservationRoundTrip(f *testing.F) {
	for _, s := range []string{"", "a.txt", "**Environment Observation:**\nx", "\nlead"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, obs string) {
		r := ObservationResponse(obs)
		if ObservationResponse(r) != r {
			t.Fatalf("ObservationResponse is not idempotent on %q", obs)
		}
		if strings.HasPrefix(obs, ObservationMarker) {
			return
		}
		if got := TrimObservationMarker(r); got != obs {
			t.Fatalf("TrimObservationMarker(%q) = %q, want %q", r, got, obs)
		}
		if strings.Contains(obs, ObservationMarker) {
			return
		}
		if got, want := StripObservationMarker(r), pytext.Strip(obs); got != want {
			t.Fatalf("StripObservationMarker(%q) = %q, want %q", r, got, want)
		}
	})
}
