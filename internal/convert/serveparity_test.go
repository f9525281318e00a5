package convert

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// scriptedModel answers turn k of a session with the k-th observation and
// keeps the messages of every request.
type scriptedModel struct {
	mu   sync.Mutex
	obs  []string
	reqs [][]worldmodel.Message
}

func (m *scriptedModel) Complete(_ context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	obs := m.obs[len(m.reqs)]
	m.reqs = append(m.reqs, req.Messages)
	return &worldmodel.Response{Content: conversation.Answer(obs), FinishReason: "stop"}, nil
}

// TestConvertedToolCallsPromptAsServeDoes converts an OpenAI chat log
// whose calls have unsorted, HTML-like arguments and steps the simulator
// (the manager behind `agentworld serve`) with the very calls an agent
// sends: every user and assistant message of every turn's sample is
// byte-identical to the request the simulator sends its world model, so
// what a model is trained on is what it is served.
func TestConvertedToolCallsPromptAsServeDoes(t *testing.T) {
	calls := []string{
		`{"name":"get_weather","arguments":"{\"units\":\"C\",\"city\":\"Paris <FR> & co\"}"}`,
		`{"name":"search","arguments":"{\"q\":\"rain\",\"filters\":{\"z\":1,\"a\":[2.50,true]},\"limit\":10}"}`,
		`{"name":"list_alerts","arguments":""}`,
	}
	observations := []string{`{"temp":21}`, "3 results:\n- a\n- b\n- c", "none"}
	msgs := []string{`{"role":"system","content":"You are a weather agent."}`, `{"role":"user","content":"weather?"}`}
	for i, c := range calls {
		id, _ := json.Marshal("call" + string(rune('a'+i)))
		msgs = append(msgs, `{"role":"assistant","tool_calls":[{"id":`+string(id)+`,"type":"function","function":`+c+`}]}`)
		content, _ := json.Marshal(observations[i])
		msgs = append(msgs, `{"role":"tool","tool_call_id":`+string(id)+`,"content":`+string(content)+`}`)
	}
	line := `{"id":"w1","messages":[` + strings.Join(msgs, ",") + `]}`
	tr, errs := ChatLogToTrajectory([]byte(line), "mcp", "log.jsonl", 1)
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	x, err := expand.NewExpander(&expand.ExpandOptions{Mode: expand.SFT})
	if err != nil {
		t.Fatal(err)
	}
	var samples []*expand.Sample
	if err := x.Expand(tr, func(s *expand.Sample) error { samples = append(samples, s); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(samples) != len(calls) {
		t.Fatalf("%d samples, want %d", len(samples), len(calls))
	}

	model := &scriptedModel{obs: observations}
	spec := &world.Spec{Name: "w", Domain: "mcp", TaskDescription: "weather tools", ActionSpace: world.ActionSpace{Description: "get_weather, search, list_alerts"}}
	m := sim.New(&sim.Options{
		Worlds:   map[string]*world.Spec{"w": spec},
		Backends: map[string]sim.BackendFactory{sim.BackendModel: sim.NewModelBackend(model, nil)},
	})
	defer m.Close(context.Background())
	ctx := context.Background()
	rep, err := m.Create(ctx, sim.CreateRequest{WorldID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range calls {
		// The agent's action as an OpenAI client sends it: the call object
		// with its arguments as a JSON string.
		if _, err := m.Step(ctx, rep.SessionID, sim.StepRequest{Action: json.RawMessage(`{"type":"function","function":` + c + `}`)}); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
	}
	if len(model.reqs) != len(calls) {
		t.Fatalf("%d world-model requests, want %d", len(model.reqs), len(calls))
	}
	for k, s := range samples {
		var want, got []expand.Message
		for _, m := range model.reqs[k] {
			if m.Role != "system" {
				want = append(want, expand.Message{Role: m.Role, Content: m.Content})
			}
		}
		for _, m := range s.Prompt() {
			if m.Role != "system" {
				got = append(got, m)
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("turn %d: sample prompt differs from the simulator's request (-serve +converted):\n%s", k+1, d)
		}
	}
}
