package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// OfficialTemplates is a stand-in for the official repository's
// eval/lwm_eval_utils/task_configs.py: the same layout (other assignments,
// a docstring quoting a template name, the three judge user templates as
// triple-quoted strings with str.format placeholders, doubled braces and a
// \\ escape), written in our own words. The official text is not ours to
// ship, so tests of the --prompts reader use this.
const OfficialTemplates = `"""
Settings of the test suite.
JUDGE_USER_PROMPT = '''not this one'''
"""

# Dimensions.
DIMS = ["a", "b"]

CONFIGS = {
    "mcp": {"tag": "x"},
}

JUDGE_USER_PROMPT = """{context}

{world_model_input}

{predicted_observation}

{ground_truth}

Rate it. Answer as {{"scores": {{"format": n}}}}.
Mind the manipulation."""

# Pairwise.
TURING_JUDGE_USER_PROMPT = """{context}

{world_model_input}

Which is real?

{response_a}

{response_b}

Say \\boxed{{A}} or \\boxed{{B}}."""  # trailing comment is fine

REF_ANSWER_JUDGE_USER_PROMPT = '''{context}

{world_model_input}

A is the model's.

{response_a}

{response_b}

{ground_truth}

Say \\boxed{{}}.'''
`

// officialDomains are the seven domains of the official prompts directory.
var officialDomains = []string{"mcp", "search", "terminal", "swe", "android", "web", "os"}

// WriteOfficialPrompts writes a stand-in checkout of the official
// repository (prompts/<domain>/judge_system_prompt.txt in our words, with a
// CRLF to exercise universal newlines, world-model system_prompt.txt files
// with the official placeholders in mcp and swe, task_configs.py holding
// templates, and a .git HEAD at commit 0123456) and returns its directory.
func WriteOfficialPrompts(t testing.TB, templates string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range officialDomains {
		write("prompts/"+d+"/judge_system_prompt.txt", "You judge "+d+" observations.\r\nBe fair.\n")
		sys := "You simulate the " + d + " environment. Answer inside <predicted_observation> tags.\n"
		if d == "mcp" || d == "swe" {
			sys += "\n# Tools\n{tool_definitions}\n\n# Examples\n{demonstrations}\n"
		}
		write("prompts/"+d+"/system_prompt.txt", sys)
	}
	write("eval/lwm_eval_utils/task_configs.py", templates)
	// A git checkout's HEAD, as a clone leaves it (the commit is made up).
	write(".git/HEAD", "ref: refs/heads/main\n")
	write(".git/packed-refs", "# pack-refs with: peeled fully-peeled sorted\n0123456789abcdef0123456789abcdef01234567 refs/heads/main\n")
	return dir
}
