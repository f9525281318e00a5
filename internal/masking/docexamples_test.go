package masking

import (
	"fmt"
	"testing"

	"github.com/agentworld/agentworld/internal/trajectory"
)

// docExample is one worked example of docs/masking.md: the numbers the
// page prints are checked here, so the page cannot drift from the code.
type docExample struct {
	name, category string
	action, obs    string
}

// docNumbers are the numbers docs/masking.md prints for each example.
var docNumbers = map[string]string{
	"empty, MCP":            "empty: OL 0.00, Nov 0.00, Jac 0.00, R 0.00 (4 action words, 0 observation words)",
	"echo, terminal":        "echo: OL 1.00, Nov 0.38, Jac 0.62, R 1.60 (5 action words, 8 observation words)",
	"android typing":        "transform: OL 0.75, Nov 0.57, Jac 0.38, R 1.75 (4 action words, 7 observation words)",
	"ack, SWE":              "ack: OL 0.12, Nov 0.40, Jac 0.12, R 0.18 (28 action words, 5 observation words)",
	"retrieval, search":     "retrieval: OL 0.83, Nov 0.92, Jac 0.08, R 14.83 (6 action words, 89 observation words)",
	"context, terminal":     "context: OL 1.00, Nov 0.73, Jac 0.27, R 8.33 (3 action words, 25 observation words)",
	"transform, SWE turn 2": "transform: OL 0.93, Nov 0.61, Jac 0.38, R 1.75 (24 action words, 42 observation words)",
	"reply, MCP":            "reply: OL 0.00, Nov 1.00, Jac 0.00, R 3.33 (3 action words, 10 observation words)",
}

// benchTurn is turn n of the longest record of an examples/bench file.
func benchTurn(t *testing.T, file string, n int) (string, string) {
	t.Helper()
	recs, err := trajectory.ReadFile("../../examples/bench/"+file, false)
	if err != nil {
		t.Fatal(err)
	}
	best := recs[0]
	for _, r := range recs {
		if len(r.Response) > len(best.Response) {
			best = r
		}
	}
	return best.Prompt[n-1], best.Response[n-1]
}

func TestDocExamples(t *testing.T) {
	trA, trO := benchTurn(t, "swe_test.jsonl", 2)
	examples := []docExample{
		{name: "empty, MCP", category: "empty", action: `{"name":"delete_file","arguments":{"path":"/tmp/cache.db"}}`, obs: `{}`},
		{name: "echo, terminal", category: "echo", action: `[{"keystrokes":"git commit -m \"fix parser\"","duration":0.5}]`, obs: `root@4c1f:/app# git commit -m "fix parser"`},
		{name: "android typing", category: "transform", action: `{"action_type":"type","text":"weekly grocery list"}`, obs: `EditText text="weekly grocery list" focused=true`},
		{name: "ack, SWE", category: "ack", action: `{"name":"write_file","arguments":{"path":"src/util.py","content":"import re\n\n\ndef slugify(text):\n    \"\"\"Lower-case text and join its words with hyphens.\"\"\"\n    return re.sub(r\"[^a-z0-9]+\", \"-\", text.lower()).strip(\"-\")\n"}}`, obs: "File written: src/util.py"},
		{name: "retrieval, search", category: "retrieval", action: `{"name":"search","arguments":{"query":"tokio vs async-std benchmark"}}`,
			obs: "1. Tokio vs async-std: a 2025 benchmark (https://example.org/rust/async-bench)\n   Throughput and tail latency of both runtimes on an HTTP echo server and a channel ping-pong, with work stealing on and off.\n" +
				"2. Choosing an async runtime in Rust (https://example.org/blog/runtimes)\n   Ecosystem size, compile times and the cost of switching later; most crates assume Tokio.\n" +
				"3. async-std is discontinued: what now? (https://example.org/news/async-std)\n   The maintainers recommend smol for new projects; migration notes for timers and tasks."},
		{name: "context, terminal", category: "context", action: `[{"keystrokes":"cat todo.txt\n","duration":0.5}]`,
			obs: "root@box:/app# cat todo.txt\nbuy milk\ncall the bank\nroot@box:/app# cat todo.txt\nbuy milk\ncall the bank\nroot@box:/app# "},
		{name: "transform, SWE turn 2", category: "transform", action: trA, obs: trO},
		{name: "reply, MCP", category: "reply", action: `{"name":"get_weather","arguments":{"city":"Paris","units":"metric"}}`, obs: `{"temperature": 14.2, "conditions": "light rain", "humidity": 81, "wind_kph": 17}`},
	}
	cfg, err := LoadMaskingConfig("")
	if err != nil {
		t.Fatal(err)
	}
	var sc Scorer
	for _, e := range examples {
		st := sc.Score(e.action, e.obs)
		c := cfg.Categories[cfg.Classify(&st)]
		got := fmt.Sprintf("%s: OL %.2f, Nov %.2f, Jac %.2f, R %.2f (%d action words, %d observation words)", c.Name, st.OL, st.Nov, st.Jac, st.R, st.ActWords, st.ObsWords)
		if c.Name != e.category || got != docNumbers[e.name] {
			t.Errorf("%s: %s\nwant (docs/masking.md) %s", e.name, got, docNumbers[e.name])
		}
	}
}
