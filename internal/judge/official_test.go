package judge

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// writeOfficial writes a stand-in official checkout (our own words).
func writeOfficial(t testing.TB, templates string) string {
	return testkit.WriteOfficialPrompts(t, templates)
}

const testTemplates = testkit.OfficialTemplates

func TestLoadPromptsBuildsTheOfficialLayout(t *testing.T) {
	p, err := LoadPrompts(writeOfficial(t, testTemplates))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Official() || len(p.Files()) != 8 || !strings.HasPrefix(p.Digest(), "sha256:") {
		t.Fatalf("official=%v files=%v digest=%q", p.Official(), p.Files(), p.Digest())
	}
	if got := p.Unpinned(); len(got) != 8 {
		t.Errorf("our own words must differ from every pinned file, got %v", got)
	}
	if !strings.Contains(p.Label(), "differs from "+OfficialCommit) {
		t.Errorf("label %q", p.Label())
	}
	rec := &trajectory.Record{Task: "x/terminal", TurnIdx: 2,
		Prompt:        []string{"### Turn 1\n**Action:**\nls", "### Turn 2\n**Action:**\ncat a\nANSWER IN TAGS"},
		Response:      []string{"**Environment Observation:**\na", "**Environment Observation:**\nhello"},
		CurrentPrompt: "### Turn 2\n**Action:**\ncat a"}
	msgs, generic := Messages(p, rec, "  **Environment Observation:**\nhi  ")
	if generic {
		t.Error("terminal judged generically")
	}
	// What the official script builds, spelled out.
	wantUser := "# Context (Historical Interactions):\n\n" +
		"### Turn 1\n**Action:**\nls\n**Environment Observation:**\na\n\n" +
		"\n\n# Current Turn:\n\n### Turn 2\n**Action:**\ncat a" +
		"\n\n**World Model Output (Simulated):**\n```\nhi\n```" +
		"\n\n**Ground Truth (Real Output):**\n```\nhello\n```" +
		"\n\nRate it. Answer as {\"scores\": {\"format\": n}}.\nMind the manipulation."
	if d := cmp.Diff(wantUser, msgs[1].Content); d != "" {
		t.Errorf("user message (-want +got):\n%s", d)
	}
	if msgs[0].Content != "You judge terminal observations.\nBe fair.\n" {
		t.Errorf("system %q (read with universal newlines, not stripped)", msgs[0].Content)
	}

	// First turn: no history heading at all; the strip removes the blank
	// lines the empty context leaves.
	rec1 := &trajectory.Record{Task: "mcp", TurnIdx: 1, Prompt: []string{"P1"}, Response: []string{"R1"}}
	msgs, _ = Messages(p, rec1, "X")
	if !strings.HasPrefix(msgs[1].Content, "# Current Turn:\n\nP1\n\n**World Model Output") {
		t.Errorf("first turn: %q", msgs[1].Content)
	}

	// Pairwise templates: Python escapes decoded, doubled braces halved.
	msgs, _ = PairMessages(p, Turing, rec1, "**Environment Observation:** real", "fake")
	wantTuring := "# Current Turn:\n\nP1\n\nWhich is real?\n\n**Response A:**\n```\nreal\n```\n\n**Response B:**\n```\nfake\n```\n\nSay \\boxed{A} or \\boxed{B}."
	if d := cmp.Diff(wantTuring, msgs[1].Content); d != "" {
		t.Errorf("turing (-want +got):\n%s", d)
	}
	msgs, _ = PairMessages(p, Reference, rec1, "m", "r")
	if !strings.HasSuffix(msgs[1].Content, "**Response B:**\n```\nr\n```\n\n**Ground Truth (Real Output):**\n```\nR1\n```\n\nSay \\boxed{}.") {
		t.Errorf("reference: %q", msgs[1].Content)
	}

	// An unknown domain gets the empty system prompt and no marker
	// cleaning, as the official script does.
	msgs, generic = Messages(p, &trajectory.Record{Task: "inhouse/sheet", TurnIdx: 1, Prompt: []string{"P"}, Response: []string{"**Environment Observation:** R"}}, "X")
	if !generic || msgs[0].Content != "" || !strings.Contains(msgs[1].Content, "```\n**Environment Observation:** R\n```") {
		t.Errorf("unknown domain: generic=%v %q", generic, msgs)
	}
}

func TestOwnTextHasTheOfficialStructure(t *testing.T) {
	// Same record, both texts: with the instructions cut off, the messages
	// agree byte for byte; only the text differs.
	off, err := LoadPrompts(writeOfficial(t, testTemplates))
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range append(exampleRecords(t, "terminal"), exampleRecords(t, "mcp")...) {
		a, _ := Messages(nil, rec, "PRED")
		b, _ := Messages(off, rec, "PRED")
		truth := TruthLabel + "\n```\n" + cleanMarker(own, rec, groundTruth(rec)) + "\n```"
		cut := func(s string) string { return s[:strings.Index(s, TruthLabel)+len(truth)] }
		if d := cmp.Diff(cut(b[1].Content), cut(a[1].Content)); d != "" {
			t.Fatalf("structure differs (-official +own):\n%s", d)
		}
	}
	if Own().Label() != OwnLabel || Own().Digest() != "" || (*Prompts)(nil).Label() != OwnLabel {
		t.Error("own text label")
	}
}

func TestLoadPromptsRefusesBadInput(t *testing.T) {
	tests := []struct {
		name, templates string
		remove          string
		want            string // substrings of the error, in order
	}{
		{"missing domain file", testTemplates, "prompts/web/judge_system_prompt.txt", "prompts/web/judge_system_prompt.txt"},
		{"missing templates file", testTemplates, OfficialTemplatesFile, "task_configs.py"},
		{"unknown placeholder", strings.Replace(testTemplates, "Which is real?", "Which is {truth}?", 1), "", "task_configs.py:29: TURING_JUDGE_USER_PROMPT: unknown placeholder {truth}"},
		{"format spec", strings.Replace(testTemplates, "{response_b}\n\nSay", "{response_b!r}\n\nSay", 1), "", "task_configs.py:33: TURING_JUDGE_USER_PROMPT: placeholder {response_b!r} is not a bare name"},
		{"single brace", strings.Replace(testTemplates, "Rate it.", "Rate } it.", 1), "", "task_configs.py:21: JUDGE_USER_PROMPT: single '}'"},
		{"missing placeholder", strings.Replace(testTemplates, "{ground_truth}\n\nSay", "Say", 1), "", "REF_ANSWER_JUDGE_USER_PROMPT: placeholder {ground_truth} missing"},
		{"f-string", strings.Replace(testTemplates, `TURING_JUDGE_USER_PROMPT = """`, `TURING_JUDGE_USER_PROMPT = f"""`, 1), "", "task_configs.py:25: TURING_JUDGE_USER_PROMPT is not assigned a plain triple-quoted string"},
		{"concatenation", strings.Replace(testTemplates, `Mind the manipulation."""`, `Mind the manipulation.""" + X`, 1), "", `task_configs.py:22: JUDGE_USER_PROMPT: unexpected "+" after the string`},
		{"absent", strings.Replace(testTemplates, "REF_ANSWER_JUDGE_USER_PROMPT =", "OTHER =", 1), "", "no assignment REF_ANSWER_JUDGE_USER_PROMPT"},
		{"twice", testTemplates + "\nJUDGE_USER_PROMPT = \"\"\"{context}\"\"\"\n", "", "task_configs.py:51: JUDGE_USER_PROMPT is assigned again (first at line 13)"},
		{"unclosed", strings.TrimSuffix(testTemplates, "'''\n"), "", "task_configs.py:37: REF_ANSWER_JUDGE_USER_PROMPT: string not closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeOfficial(t, tt.templates)
			if tt.remove != "" {
				if err := os.Remove(filepath.Join(dir, filepath.FromSlash(tt.remove))); err != nil {
					t.Fatal(err)
				}
			}
			_, err := LoadPrompts(dir)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrPrompts) || !strings.Contains(filepath.ToSlash(err.Error()), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := LoadPrompts(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Error("missing directory accepted")
	}
}

func TestPythonEscapes(t *testing.T) {
	src := "X = \"\"\"a\\tb\\\\c\\x41\\u00e9\\101\\d\\\nz\"\"\"\nY = r'''\\n{{x}}'''\n"
	got, err := readPyStrings("f.py", []byte(src), "X", "Y")
	if err != nil {
		t.Fatal(err)
	}
	// Python: 'a\tb\\cAéA\\dz' and r'\n{{x}}'.
	if got["X"].Value != "a\tb\\cAéA\\dz" || got["Y"].Value != `\n{{x}}` || got["Y"].Line != 3 {
		t.Errorf("X=%q Y=%q line %d", got["X"].Value, got["Y"].Value, got["Y"].Line)
	}
}

func TestParseChoice(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{`reasoning... \boxed{A}`, "A", ""},
		{`\boxed{A} no, final: \boxed{ B }`, "B", ""},
		{`<think>\boxed{B}</think> so \boxed{A}`, "A", ""},
		{`either \boxed{A} or \boxed{B}`, "B", ""},
		{`\boxed{C}`, "", `boxed answer "C" is not A or B`},
		{`\boxed{a}`, "", `"a" is not A or B`},
		{`\boxed{\text{A}}`, "", `"\\text{A}" is not A or B`},
		{`Response A`, "", "no \\boxed{} answer"},
		{`\boxed{A`, "", "never closed"},
		{``, "", "no \\boxed{}"},
	}
	for _, tt := range tests {
		got, err := ParseChoice(tt.in)
		if tt.err == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParseChoice(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrUnparseable) || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParseChoice(%q) error %v, want %q", tt.in, err, tt.err)
		}
	}
}

func FuzzReadTemplates(f *testing.F) {
	f.Add(testTemplates)
	f.Add("JUDGE_USER_PROMPT = '''{x}'''")
	f.Add("a = '''\\")
	f.Fuzz(func(t *testing.T, src string) {
		strs, err := readPyStrings("f.py", []byte(src), "JUDGE_USER_PROMPT")
		if err != nil {
			return
		}
		s := strs["JUDGE_USER_PROMPT"]
		tm, err := parseTemplate("f.py", "JUDGE_USER_PROMPT", s.Value, s.lineAt, templateSpecs[Pointwise].fields, nil)
		if err != nil {
			return
		}
		_ = tm.Format(map[string]string{})
	})
}

func FuzzParseChoice(f *testing.F) {
	f.Add(`\boxed{A}`)
	f.Add(`\boxed{{B}`)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseChoice(s)
		if err == nil && got != "A" && got != "B" {
			t.Fatalf("ParseChoice(%q) = %q", s, got)
		}
	})
}
