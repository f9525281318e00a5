package worldgen

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// The fake generator answers by the seed description it is given: each
// names the kind of candidate to emit, good or bad in one planned way.
var kindRE = regexp.MustCompile(`KIND=([A-Z]+(?:-[A-Z]+)*)(?:-(\d+))?`)

var variationRE = regexp.MustCompile(`Variation seed: (\d+)`)

func trackerWorld(name, state string) map[string]any {
	return map[string]any{
		"name": name, "domain": "mcp", "description": "issue tracker",
		"task_description": "The MCP server of an issue tracker.",
		"action_space": []any{map[string]any{"name": "close_issue", "description": "Close an issue.",
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"key": map[string]any{"type": "string"}}, "required": []string{"key"}}},
			map[string]any{"name": "get_issue", "input_schema": map[string]any{"type": "object"}}},
		"initial_state":  state,
		"demonstrations": []any{map[string]any{"action": `{"name":"get_issue","arguments":{"key":"WS-1"}}`, "observation": `{"id":"WS-1","status":"closed"}`}},
	}
}

func closeTask(instr string) map[string]any {
	return map[string]any{"instruction": instr, "difficulty": "easy",
		"check":     map[string]any{"state": []any{map[string]any{"entity": "WS-9", "attribute": "status", "value": "closed"}}},
		"reference": []any{map[string]any{"name": "close_issue", "arguments": map[string]any{"key": "WS-9"}}, "done"}}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// fakeGenerator is the test generator.
func fakeGenerator(delay time.Duration) fakellm.Handler {
	return func(r *fakellm.Request) fakellm.Reply {
		user := r.Messages[len(r.Messages)-1].Content
		m := kindRE.FindStringSubmatch(user)
		kind, n := "GOOD", "0"
		if m != nil {
			kind, n = m[1], m[2]
		}
		if strings.Contains(r.Messages[0].Content, "fictional worlds") {
			kind = "FICTION"
			v := variationRE.FindStringSubmatch(user)[1]
			n = v[len(v)-3:]
		}
		var out string
		switch kind {
		case "GOOD":
			out = mustJSON(map[string]any{"world": trackerWorld("tracker", "Project WS: issue WS-9 is open; board "+n+"."),
				"tasks": []any{closeTask("Close issue WS-9 of board " + n + "."), closeTask("Close issue WS-9 of board " + n + ".")}})
		case "DUP":
			out = mustJSON(map[string]any{"world": trackerWorld("copy", "Project WS: issue WS-9 is open; board 0."),
				"tasks": []any{closeTask("Close WS-9 again.")}})
		case "BROKEN-JSON":
			out = `{"world": {"name": "half", }}`
		case "BAD-DOMAIN":
			w := trackerWorld("ship", "x")
			w["domain"] = "spaceship"
			out = mustJSON(map[string]any{"world": w, "tasks": []any{closeTask("fly")}})
		case "BAD-TOOL-SCHEMA":
			w := trackerWorld("ts", "y")
			w["action_space"] = []any{map[string]any{"name": "t", "input_schema": map[string]any{"type": 12}}}
			out = mustJSON(map[string]any{"world": w, "tasks": []any{closeTask("z")}})
		case "BAD-ACTION":
			w := trackerWorld("ba", "Issue WS-9 is open (ba).")
			t := closeTask("Close WS-9 via a tool that does not exist.")
			t["reference"] = []any{map[string]any{"name": "delete_everything", "arguments": map[string]any{}}, "done"}
			out = mustJSON(map[string]any{"world": w, "tasks": []any{t}})
		case "NOOP-SOLVED":
			w := trackerWorld("noop", "Issue WS-9 is open (noop).")
			t := closeTask("Say done.")
			t["check"] = map[string]any{"answer": map[string]any{"items": []string{"done"}}}
			t["reference"] = []any{"done"}
			out = mustJSON(map[string]any{"world": w, "tasks": []any{t}})
		case "INITIAL-SOLVED":
			w := trackerWorld("init", "Issue WS-9 is open (init).")
			t := closeTask("Look at WS-9.")
			t["check"] = map[string]any{"final_observation": "WS-9"}
			out = mustJSON(map[string]any{"world": w, "tasks": []any{t}})
		case "FLAKY":
			w := trackerWorld("flaky", "Issue WS-7 is open (flaky).")
			t := closeTask("Close WS-7.")
			t["check"] = map[string]any{"state": []any{map[string]any{"entity": "WS-7", "attribute": "status", "value": "closed"}}}
			t["reference"] = []any{map[string]any{"name": "close_issue", "arguments": map[string]any{"key": "WS-7"}}, "done"}
			out = mustJSON(map[string]any{"world": w, "tasks": []any{t}})
		case "LAX":
			// a check any closed issue meets: a random agent's call of
			// close_issue meets it too
			w := trackerWorld("lax", "Issue WS-9 is open (lax).")
			t := closeTask("Close WS-9 (lax check).")
			t["check"] = map[string]any{"final_observation": `"status": "closed"`}
			t["reference"] = []any{map[string]any{"name": "close_issue", "arguments": map[string]any{"key": "WS-9"}}, "done"}
			out = mustJSON(map[string]any{"world": w, "tasks": []any{t}})
		case "BAD-ARGS":
			// a reference that breaks close_issue's schema (no "key"),
			// which the lenient fake world model would still close
			w := trackerWorld("badargs", "Issue WS-9 is open (badargs).")
			t := closeTask("Close WS-9 (bad arguments).")
			t["reference"] = []any{map[string]any{"name": "close_issue", "arguments": map[string]any{"issue": "WS-9"}}, "done"}
			out = mustJSON(map[string]any{"world": w, "tasks": []any{t}})
		case "HUGE":
			return fakellm.Reply{ContentBytes: 50 << 20}
		case "FICTION":
			out = mustJSON(map[string]any{"fiction": fictionGraph(n)})
		}
		return fakellm.Reply{Content: "Here it is:\n```json\n" + out + "\n```", Delay: delay, PromptTokens: 900, CompletionTokens: len(out) / 4}
	}
}

func fictionGraph(n string) map[string]any {
	ent := func(id, typ, name string, attrs map[string]string) map[string]any {
		return map[string]any{"id": id, "type": typ, "name": name, "attributes": attrs}
	}
	return map[string]any{
		"name": "harbor-guild", "topic": "the shipwrights of Vellmar harbor " + n,
		"entities": []any{
			ent("guild", "guild", "Vellmar Shipwrights Guild "+n, map[string]string{"founded": "1712", "seat": "Vellmar"}),
			ent("orla", "shipwright", "Orla Test"+n, map[string]string{"born": "1690", "specialty": "keels"}),
			ent("bram", "shipwright", "Bram Kessing", map[string]string{"born": "1702", "specialty": "masts"}),
			ent("ysolde", "shipwright", "Ysolde Parr", map[string]string{"born": "1695", "specialty": "rigging"}),
		},
		"relations": []any{
			map[string]any{"subject": "orla", "predicate": "member_of", "object": "guild"},
			map[string]any{"subject": "bram", "predicate": "member_of", "object": "guild"},
			map[string]any{"subject": "ysolde", "predicate": "member_of", "object": "guild"},
		},
	}
}

// fakeWorldModel closes the issue a close_issue call names by its first
// argument, whatever the argument's name, as a lenient language model
// would (WS-7 only every other call: a flaky world), and answers anything
// else with an error. Delay is waited on every step.
func fakeWorldModel(delay time.Duration) fakellm.Handler {
	keyRE := regexp.MustCompile(`"arguments":\{"[^"]*":"([^"]*)"`)
	var flaky atomic.Int64
	return func(r *fakellm.Request) fakellm.Reply {
		user := r.Messages[len(r.Messages)-1].Content
		obs := `{"error": "invalid arguments"}`
		if strings.Contains(user, `"name":"close_issue"`) {
			if m := keyRE.FindStringSubmatch(user); m != nil {
				obs = fmt.Sprintf(`{"issue": {"id": %q, "status": "closed"}}`, m[1])
				if m[1] == "WS-7" {
					if flaky.Add(1)%2 == 0 {
						obs = `{"issue": {"id": "WS-7", "status": "open"}}`
					}
				}
			}
		} else if strings.Contains(user, `"name":"search"`) || strings.Contains(user, `"name":"open_page"`) {
			obs = "1. a result"
		}
		return fakellm.Reply{Content: "<predicted_observation>" + obs + "</predicted_observation>", Delay: delay, PromptTokens: 500, CompletionTokens: 20}
	}
}
