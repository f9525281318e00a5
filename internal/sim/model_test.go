package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// keepingModel keeps every request's messages, and them with one of its
// own appended (as a completer adding a message might), and copies of
// both made at the time, and answers with observations of random length.
type keepingModel struct {
	rng        *rand.Rand
	kept, copy [][]worldmodel.Message
}

func (m *keepingModel) Complete(_ context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	own := append(req.Messages, worldmodel.Message{Role: "user", Content: "the completer's own"})
	m.kept = append(m.kept, req.Messages, own)
	m.copy = append(m.copy, slices.Clone(req.Messages), slices.Clone(own))
	obs := strings.Repeat("output line\n", 1+m.rng.IntN(30))
	return &worldmodel.Response{Content: "<predicted_observation>" + obs + "</predicted_observation>", FinishReason: "stop"}, nil
}

// sent is the last request as it was sent.
func (m *keepingModel) sent() []worldmodel.Message { return m.kept[len(m.kept)-2] }

// newModelEnv is the world-model environment of a session of the test
// world with a context budget small enough to force truncation cuts.
func newModelEnv(t *testing.T, c worldmodel.Completer, system string, history []HistoryTurn) Environment {
	t.Helper()
	env, err := NewModelBackend(c, &ModelOptions{ContextBudget: 3000, MaxTokens: 1000})(context.Background(),
		SessionInfo{ID: "s", Root: "s", Spec: termWorld(), SystemPrompt: system, History: history})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestModelRequestsExtendInPlace: the world-model environment builds each
// request by extending the previous one, and what it sends is what
// BuildMessages makes of the history, cut and newest message, across
// truncation cuts and turns answered without the model (by a hook); no
// prefix break is reported; and every request a completer kept is, after
// the episode, still exactly as it was sent.
func TestModelRequestsExtendInPlace(t *testing.T) {
	for _, system := range []string{"You simulate a shell.", ""} {
		t.Run(fmt.Sprintf("system=%q", system), func(t *testing.T) { requestsExtendInPlace(t, system) })
	}
}

func requestsExtendInPlace(t *testing.T, system string) {
	rng := rand.New(rand.NewPCG(5, 6))
	model := &keepingModel{rng: rng}
	env := newModelEnv(t, model, system, nil)
	var history []HistoryTurn
	cuts := map[int]bool{}
	for turn := 1; turn <= 80; turn++ {
		act := fmt.Sprintf(`[{"keystrokes":"cmd %d %s\n"}]`, turn, strings.Repeat("x", rng.IntN(300)))
		if rng.IntN(6) == 0 { // answered by a hook: recorded, the model not asked
			msg := conversation.UserMessage(turn, act, "", "")
			history = append(history, HistoryTurn{Action: act, Observation: "fault", Message: msg, Assistant: conversation.ObservationResponse("fault")})
			continue
		}
		in := StepInput{Turn: turn, Action: conversation.Action{Text: act}, History: slices.Clip(history)}
		if rng.IntN(5) == 0 {
			in.Control = "Simulate a transient failure of this command."
		}
		obs, err := env.Step(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if obs.Info.PrefixBreak {
			t.Fatalf("turn %d: prefix break reported", turn)
		}
		cuts[obs.Info.HistoryCut] = true
		want := BuildMessages(system, history, obs.Info.HistoryCut, obs.Message)
		if diff := cmp.Diff(want, model.sent()); diff != "" {
			t.Fatalf("turn %d: request (-BuildMessages +sent):\n%s", turn, diff)
		}
		history = append(history, HistoryTurn{Action: act, Observation: obs.Text, Message: obs.Message, Assistant: conversation.ObservationResponse(obs.Text)})
	}
	if len(cuts) < 3 {
		t.Fatalf("cuts seen: %v; the budget does not force truncation", cuts)
	}
	for i := range model.kept {
		if diff := cmp.Diff(model.copy[i], model.kept[i]); diff != "" {
			t.Fatalf("request %d (%s) changed after it was sent (-as sent +now):\n%s", i/2+1, []string{"as handed over", "with the completer's own message"}[i%2], diff)
		}
	}
}

// TestModelPrefixBreakReported: a request that does not extend the
// previous one although no cut moved (a recorded message differs from
// what was sent) is reported in info.prefix_break, and is still the
// request BuildMessages makes; the next request, extending it, is not.
func TestModelPrefixBreakReported(t *testing.T) {
	model := &keepingModel{rng: rand.New(rand.NewPCG(1, 1))}
	env := newModelEnv(t, model, "You simulate a shell.", nil)
	step := func(turn int, history []HistoryTurn) Observation {
		t.Helper()
		in := StepInput{Turn: turn, Action: conversation.Action{Text: fmt.Sprintf("a%d", turn)}, History: history}
		obs, err := env.Step(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(BuildMessages("You simulate a shell.", history, 0, obs.Message), model.sent()); diff != "" {
			t.Fatalf("turn %d: request (-BuildMessages +sent):\n%s", turn, diff)
		}
		return obs
	}
	if obs := step(1, nil); obs.Info.PrefixBreak {
		t.Fatal("first request reported as a prefix break")
	}
	history := []HistoryTurn{{Action: "a1", Observation: "o1", Message: "not what was sent", Assistant: "o1"}}
	if obs := step(2, history); !obs.Info.PrefixBreak || obs.Info.HistoryCut != 0 {
		t.Fatalf("turn 2 rewrote turn 1's message: info %+v, want a prefix break", obs.Info)
	} else {
		history = append(history, HistoryTurn{Action: "a2", Observation: obs.Text, Message: obs.Message, Assistant: "o2"})
	}
	if obs := step(3, history); obs.Info.PrefixBreak {
		t.Fatalf("turn 3 extends turn 2's request: info %+v", obs.Info)
	}
}

// TestModelPrefixBreakReportedSameArray: when the history is the array
// the previous request was made from (a session's, between its growths),
// only the previous request's newest message is compared again, and a
// turn recorded with another message than the one sent is still reported.
func TestModelPrefixBreakReportedSameArray(t *testing.T) {
	model := &keepingModel{rng: rand.New(rand.NewPCG(2, 2))}
	env := newModelEnv(t, model, "You simulate a shell.", nil)
	hist := make([]HistoryTurn, 0, 8)
	for turn := 1; turn <= 4; turn++ {
		in := StepInput{Turn: turn, Action: conversation.Action{Text: fmt.Sprintf("a%d", turn)}, History: hist[:len(hist):len(hist)]}
		obs, err := env.Step(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(BuildMessages("You simulate a shell.", in.History, 0, obs.Message), model.sent()); diff != "" {
			t.Fatalf("turn %d: request (-BuildMessages +sent):\n%s", turn, diff)
		}
		if want := turn == 4; obs.Info.PrefixBreak != want {
			t.Fatalf("turn %d: prefix break %v, want %v", turn, obs.Info.PrefixBreak, want)
		}
		msg := obs.Message
		if turn == 3 {
			msg = "not what was sent"
		}
		hist = append(hist, HistoryTurn{Action: in.Action.Text, Observation: obs.Text, Message: msg, Assistant: conversation.ObservationResponse(obs.Text)})
	}
}
