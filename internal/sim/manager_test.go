package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// scriptedModel returns canned responses in order and records budgets.
type scriptedModel struct {
	mu      sync.Mutex
	replies []worldmodel.Response
	budgets []int
}

func (m *scriptedModel) Complete(_ context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.budgets = append(m.budgets, req.MaxTokens)
	r := m.replies[0]
	if len(m.replies) > 1 {
		m.replies = m.replies[1:]
	}
	return &r, nil
}

func termWorld() *world.Spec {
	return &world.Spec{Name: "t", Domain: "terminal", TaskDescription: "a shell", ActionSpace: world.ActionSpace{Description: "keys"}, InitialState: "$ "}
}

func newTestManager(t *testing.T, c worldmodel.Completer, o Options) *Manager {
	t.Helper()
	o.Worlds = map[string]*world.Spec{"t": termWorld()}
	o.Backends = map[string]BackendFactory{BackendModel: NewModelBackend(c, &ModelOptions{MaxTokens: 1000})}
	m := New(&o)
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

var ls = StepRequest{Action: json.RawMessage(`[{"keystrokes":"ls\n"}]`)}

// stepOnce opens a session of the test world answered by c and steps ls.
func stepOnce(t *testing.T, c worldmodel.Completer) *StepResult {
	t.Helper()
	m := newTestManager(t, c, Options{})
	rep, err := m.Create(context.Background(), CreateRequest{WorldID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.Step(context.Background(), rep.SessionID, ls)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEmptyOrCutAnswersRetryOnceThenReport(t *testing.T) {
	cases := []struct {
		name    string
		replies []worldmodel.Response
		obs     string
		errText string
	}{
		{"clean", []worldmodel.Response{{Content: "<predicted_observation>a</predicted_observation>", FinishReason: "stop"}}, "a", ""},
		{"empty then good", []worldmodel.Response{{Content: "", FinishReason: "length"}, {Content: "<think>t</think><predicted_observation>b</predicted_observation>", FinishReason: "stop"}}, "b", ""},
		{"cut twice", []worldmodel.Response{{Content: "<think>long", FinishReason: "length"}, {Content: "<think>longer", FinishReason: "length"}}, conversation.NoOutput, "cut by the token budget"},
		{"empty twice", []worldmodel.Response{{Content: "", FinishReason: "stop"}}, conversation.NoOutput, "empty answer after one retry"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			model := &scriptedModel{replies: c.replies}
			r := stepOnce(t, model)
			if r.Observation != c.obs || !strings.Contains(r.Info.Error, c.errText) || (c.errText == "") != (r.Info.Error == "") {
				t.Fatalf("observation %q error %q", r.Observation, r.Info.Error)
			}
			if len(c.replies) > 1 || c.errText != "" {
				if len(model.budgets) != 2 || model.budgets[1] != 2*model.budgets[0] || r.Info.Retries != 1 {
					t.Fatalf("want one retry with twice the budget, got budgets %v retries %d", model.budgets, r.Info.Retries)
				}
			}
		})
	}
}

// TestReasoningKeptAside checks that the model's thinking reaches
// info.reasoning and never the observation, whether the server separates it,
// the generation carries a <think> pair, or the chat template opened the
// block in the prompt so the generation starts inside it.
func TestReasoningKeptAside(t *testing.T) {
	cases := []struct {
		name  string
		reply worldmodel.Response
		want  string
	}{
		{"server-separated", worldmodel.Response{Content: "<predicted_observation>a</predicted_observation>", Reasoning: "plan", FinishReason: "stop"}, "plan"},
		{"pair", worldmodel.Response{Content: "<think>plan</think><predicted_observation>a</predicted_observation>", FinishReason: "stop"}, "plan"},
		{"headless", worldmodel.Response{Content: "plan\n</think>\n\n<predicted_observation>a</predicted_observation>", FinishReason: "stop"}, "plan"},
		{"none", worldmodel.Response{Content: "<predicted_observation>a</predicted_observation>", FinishReason: "stop"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := stepOnce(t, &scriptedModel{replies: []worldmodel.Response{c.reply}})
			if r.Observation != "a" || r.Info.Reasoning != c.want {
				t.Fatalf("observation %q reasoning %q, want a and %q", r.Observation, r.Info.Reasoning, c.want)
			}
		})
	}
}

func TestTransportRetriesReported(t *testing.T) {
	cases := []struct {
		name    string
		replies []worldmodel.Response
		want    int
	}{
		{"first attempt", []worldmodel.Response{{Content: "<predicted_observation>a</predicted_observation>", FinishReason: "stop", Attempts: 1}}, 0},
		{"two 503s then ok", []worldmodel.Response{{Content: "<predicted_observation>a</predicted_observation>", FinishReason: "stop", Attempts: 3}}, 2},
		{"answer retry, each call retried once", []worldmodel.Response{{FinishReason: "length", Attempts: 2}, {Content: "<predicted_observation>a</predicted_observation>", FinishReason: "stop", Attempts: 2}}, 2},
		{"uncounted", []worldmodel.Response{{Content: "<predicted_observation>a</predicted_observation>", FinishReason: "stop"}}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := stepOnce(t, &scriptedModel{replies: c.replies})
			if r.Observation != "a" || r.Info.TransportRetries != c.want {
				t.Fatalf("observation %q transport retries %d, want a and %d", r.Observation, r.Info.TransportRetries, c.want)
			}
		})
	}
}

func TestCapacityAndIdleExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	model := &scriptedModel{replies: []worldmodel.Response{{Content: "<predicted_observation>x</predicted_observation>", FinishReason: "stop"}}}
	m := newTestManager(t, model, Options{MaxSessions: 2, IdleTTL: time.Hour, Now: clock})
	ctx := context.Background()
	a, _ := m.Create(ctx, CreateRequest{WorldID: "t"})
	b, _ := m.Create(ctx, CreateRequest{WorldID: "t"})
	if _, err := m.Create(ctx, CreateRequest{WorldID: "t"}); !errors.Is(err, ErrCapacity) {
		t.Fatalf("third session: %v, want ErrCapacity", err)
	}
	// An ended session frees its slot at once.
	if r, err := m.Step(ctx, a.SessionID, StepRequest{Action: json.RawMessage(`[]`)}); err != nil || !r.Terminated {
		t.Fatalf("end: %+v %v", r, err)
	}
	c, err := m.Create(ctx, CreateRequest{WorldID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	// Leaked sessions expire after the idle TTL and free capacity.
	mu.Lock()
	now = now.Add(30 * time.Minute)
	mu.Unlock()
	if _, err := m.Step(ctx, c.SessionID, ls); err != nil { // c stays fresh
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(45 * time.Minute)
	mu.Unlock()
	if n := m.ReapIdle(); n != 1 {
		t.Fatalf("reaped %d, want 1 (b)", n)
	}
	if _, err := m.Step(ctx, b.SessionID, ls); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("step on expired session: %v", err)
	}
	if _, err := m.Create(ctx, CreateRequest{WorldID: "t"}); err != nil {
		t.Fatalf("capacity not freed: %v", err)
	}
	// The expired session's transcript is still readable.
	if tr, err := m.Trajectory(ctx, b.SessionID); err != nil || string(tr.Meta["status"]) != `"expired"` {
		t.Fatalf("expired trajectory: %v %v", tr, err)
	}
}

// hookFault is a StepHook that answers turn 2 itself and labels every step.
type hookFault struct{ after []StepResult }

func (h *hookFault) BeforeStep(_ context.Context, s SessionInfo, in *StepInput) (*Observation, error) {
	in.Labels = map[string]string{"rule": "r1"}
	in.Control = "make it fail"
	if in.Turn == 2 {
		return &Observation{Text: "HTTP 429 Too Many Requests"}, nil
	}
	return nil, nil
}

func (h *hookFault) AfterStep(_ context.Context, s SessionInfo, in StepInput, out StepResult) {
	h.after = append(h.after, out)
}

func TestHooksControlLabelsAndDirectFaults(t *testing.T) {
	fake := &scriptedModel{replies: []worldmodel.Response{{Content: "<predicted_observation>ok</predicted_observation>", FinishReason: "stop"}}}
	h := &hookFault{}
	m := newTestManager(t, fake, Options{Hooks: []StepHook{h}})
	ctx := context.Background()
	rep, _ := m.Create(ctx, CreateRequest{WorldID: "t"})
	r1, err := m.Step(ctx, rep.SessionID, ls)
	if err != nil || r1.Info.Labels["rule"] != "r1" || r1.Info.Backend != BackendModel {
		t.Fatalf("turn 1: %+v %v", r1, err)
	}
	r2, err := m.Step(ctx, rep.SessionID, ls)
	if err != nil || r2.Observation != "HTTP 429 Too Many Requests" || r2.Info.Backend != "hook" || len(fake.budgets) != 1 {
		t.Fatalf("turn 2 should be a direct fault without a model call: %+v %v (model calls %d)", r2, err, len(fake.budgets))
	}
	tr, _ := m.Trajectory(ctx, rep.SessionID)
	var msg string
	_ = json.Unmarshal(tr.Turns[0].Meta["message"], &msg)
	if !strings.Contains(msg, "make it fail") || !strings.HasSuffix(msg, conversation.AnswerReminder) {
		t.Fatalf("control text not in the step's message: %q", msg)
	}
	if len(h.after) != 2 {
		t.Fatalf("AfterStep saw %d steps", len(h.after))
	}
}

// TestForkRefusedWhenHistoryCannotRebuild: a backend whose state its
// history cannot rebuild (a real sandbox) refuses a fork at fork time, and
// no child session is made; a fork of a backend that can is answered by the
// environment the fork made.
func TestForkRefusedWhenHistoryCannotRebuild(t *testing.T) {
	model := &scriptedModel{replies: []worldmodel.Response{{Content: "<predicted_observation>a</predicted_observation>", FinishReason: "stop"}}}
	sandbox := func(_ context.Context, s SessionInfo) (Environment, error) {
		if len(s.History) > 0 {
			return nil, fmt.Errorf("%w: real state", ErrNotResumable)
		}
		return fixedEnv{}, nil
	}
	m := New(&Options{Worlds: map[string]*world.Spec{"t": termWorld()},
		Backends: map[string]BackendFactory{BackendModel: NewModelBackend(model, &ModelOptions{MaxTokens: 1000}), "real:test": sandbox}})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	ctx := context.Background()
	for _, backend := range []string{"real:test", BackendModel} {
		rep, err := m.Create(ctx, CreateRequest{WorldID: "t", Backend: backend})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Step(ctx, rep.SessionID, ls); err != nil {
			t.Fatal(err)
		}
		before := m.Len()
		fork, err := m.Fork(ctx, rep.SessionID, ForkRequest{})
		if backend == "real:test" {
			if !errors.Is(err, ErrNotResumable) || fork != nil || m.Len() != before {
				t.Fatalf("fork of a real session: %v (%d sessions, were %d), want ErrNotResumable and no child", err, m.Len(), before)
			}
			continue
		}
		if err != nil {
			t.Fatalf("fork of a model session: %v", err)
		}
		if r, err := m.Step(ctx, fork.SessionID, ls); err != nil || r.Observation != "a" {
			t.Fatalf("step of the fork: %v %+v", err, r)
		}
	}
}

// TestForkOfAnEndedRealSessionRefused: a real session whose episode ended
// is refused a fork too (409 on the wire), as a live one is; an ended
// model session forks into an ended child.
func TestForkOfAnEndedRealSessionRefused(t *testing.T) {
	sandbox := func(_ context.Context, s SessionInfo) (Environment, error) {
		if len(s.History) > 0 {
			return nil, fmt.Errorf("%w: real state", ErrNotResumable)
		}
		return fixedEnv{}, nil
	}
	model := &scriptedModel{replies: []worldmodel.Response{{Content: "<predicted_observation>a</predicted_observation>", FinishReason: "stop"}}}
	m := New(&Options{Worlds: map[string]*world.Spec{"t": termWorld()},
		Backends: map[string]BackendFactory{BackendModel: NewModelBackend(model, &ModelOptions{MaxTokens: 1000}), "real:test": sandbox}})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	ctx := context.Background()
	end := StepRequest{Action: json.RawMessage(`[]`)}
	for _, backend := range []string{"real:test", BackendModel} {
		rep, err := m.Create(ctx, CreateRequest{WorldID: "t", Backend: backend})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := m.Step(ctx, rep.SessionID, end); err != nil || !r.Terminated {
			t.Fatalf("%s: end the episode: %v %+v", backend, err, r)
		}
		fork, err := m.Fork(ctx, rep.SessionID, ForkRequest{})
		if backend == "real:test" {
			if !errors.Is(err, ErrNotResumable) || fork != nil {
				t.Fatalf("fork of an ended real session: %+v, %v; want ErrNotResumable", fork, err)
			}
			continue
		}
		if err != nil || !fork.Info.Terminated {
			t.Fatalf("fork of an ended model session: %+v, %v", fork, err)
		}
	}
}

// fixedEnv answers every step with "real".
type fixedEnv struct{}

func (fixedEnv) Reset(context.Context) (Observation, error) { return Observation{Text: "$ "}, nil }
func (fixedEnv) Step(context.Context, StepInput) (Observation, error) {
	return Observation{Text: "real"}, nil
}
func (fixedEnv) Close() error { return nil }

// historyHook keeps the history each step was given.
type historyHook struct{ seen [][]HistoryTurn }

func (h *historyHook) BeforeStep(_ context.Context, s SessionInfo, in *StepInput) (*Observation, error) {
	h.seen = append(h.seen, in.History)
	return nil, nil
}

func (h *historyHook) AfterStep(context.Context, SessionInfo, StepInput, StepResult) {}

// Each step sees every earlier turn, and a history handed to one step
// stays as it was while later steps are recorded (the session shares it
// rather than copying it per step).
func TestStepHistoryIsEveryEarlierTurnAndStaysPut(t *testing.T) {
	h := &historyHook{}
	m := newTestManager(t, &instantEcho{}, Options{Hooks: []StepHook{h}})
	rep, err := m.Create(context.Background(), CreateRequest{WorldID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var want []HistoryTurn
	for i := 1; i <= 12; i++ {
		r, err := m.Step(context.Background(), rep.SessionID, StepRequest{Action: json.RawMessage(fmt.Sprintf(`[{"keystrokes":"echo %d\n"}]`, i))})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := m.Trajectory(context.Background(), rep.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		last := tr.Turns[len(tr.Turns)-1]
		if last.Observation != r.Observation {
			t.Fatalf("turn %d: trajectory ends with %q, the step said %q", i, last.Observation, r.Observation)
		}
		want = append(want, HistoryTurn{Action: last.Action, Observation: last.Observation})
	}
	for i, got := range h.seen {
		if len(got) != i {
			t.Fatalf("step %d saw %d earlier turns", i+1, len(got))
		}
		for j, g := range got {
			if g.Action != want[j].Action || g.Observation != want[j].Observation || g.Message == "" {
				t.Fatalf("step %d, turn %d: %+v, want %+v with its message", i+1, j+1, g, want[j])
			}
		}
	}
}

// instantEcho answers each request with its last message.
type instantEcho struct{}

func (instantEcho) Complete(_ context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	return &worldmodel.Response{Content: "<predicted_observation>" + req.Messages[len(req.Messages)-1].Content + "</predicted_observation>", FinishReason: "stop"}, nil
}

// TestTurnsKeptAcrossChunks: a session keeps its turns' results in chunks;
// over several of them every recorded turn answers its retry with its
// result, a fork takes the first turns and their results exactly, and the
// trajectory and the store hold every turn in order, as does a manager
// that resumes the session from the store.
func TestTurnsKeptAcrossChunks(t *testing.T) {
	ctx := context.Background()
	st := NewMemStore()
	m := newTestManager(t, instantEcho{}, Options{Store: st})
	rep, err := m.Create(ctx, CreateRequest{WorldID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	const turns = 3*resultChunk + 2
	action := func(i int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`[{"keystrokes":"echo %d\n"}]`, i)) }
	var results []*StepResult
	for i := 1; i <= turns; i++ {
		r, err := m.Step(ctx, rep.SessionID, StepRequest{Action: action(i), Turn: i})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
	}
	// retried steps turns 1 to n of session id of m again, each of which
	// must answer with the first result.
	retried := func(what string, m *Manager, id string, n int) {
		t.Helper()
		for i := 1; i <= n; i++ {
			again, err := m.Step(ctx, id, StepRequest{Action: action(i), Turn: i})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(results[i-1], again); diff != "" {
				t.Fatalf("%s: turn %d retried (-first +again):\n%s", what, i, diff)
			}
		}
	}
	retried("session", m, rep.SessionID, turns)
	_, stored, err := st.LoadSession(ctx, rep.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := m.Trajectory(ctx, rep.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != turns || len(tr.Turns) != turns {
		t.Fatalf("%d turns stored, %d in the trajectory, want %d", len(stored), len(tr.Turns), turns)
	}
	for i, s := range stored {
		if s.Turn != i+1 || tr.Turns[i].Action != s.Action || tr.Turns[i].Observation != results[i].Observation {
			t.Fatalf("turn %d: stored %+v, trajectory %+v", i+1, s, tr.Turns[i])
		}
	}
	at := resultChunk + 1
	fork, err := m.Fork(ctx, rep.SessionID, ForkRequest{AtTurn: at})
	if err != nil {
		t.Fatal(err)
	}
	_, forked, err := st.LoadSession(ctx, fork.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored[:at], forked); diff != "" {
		t.Fatalf("forked turns (-parent's +fork's):\n%s", diff)
	}
	retried("fork", m, fork.SessionID, at)
	if st, err := m.State(ctx, fork.SessionID); err != nil || st.StepCount != at || st.LastObservation != results[at-1].Observation {
		t.Fatalf("fork's state %+v, %v", st, err)
	}
	// Another manager over the same store resumes the session from it.
	m2 := newTestManager(t, instantEcho{}, Options{Store: st})
	retried("resumed session", m2, rep.SessionID, turns)
	if _, err := m2.Step(ctx, rep.SessionID, StepRequest{Action: action(turns + 1), Turn: turns + 1}); err != nil {
		t.Fatal(err)
	}
}

// TestLoadedWorldPreparedOnce: the system prompt and spec JSON of a loaded
// world are made by its first session and reused by the next, until the
// world is replaced; an inline spec's are made for each session. Every
// session's record holds what rendering and encoding its spec give.
func TestLoadedWorldPreparedOnce(t *testing.T) {
	ctx := context.Background()
	renders := 0
	st := NewMemStore()
	m := newTestManager(t, instantEcho{}, Options{Store: st, SystemPrompt: func(d domain.Domain, c trajectory.Components) (string, error) {
		renders++
		return trajectory.WorldSystemPrompt(d, c)
	}})
	check := func(id string, spec *world.Spec) {
		t.Helper()
		rec, _, err := st.LoadSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		sys, err := SystemPrompt(spec)
		if err != nil {
			t.Fatal(err)
		}
		specJSON, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		if rec.SystemPrompt != sys || string(rec.Spec) != string(specJSON) {
			t.Fatalf("session %s: system prompt %q and spec %s, want %q and %s", id, rec.SystemPrompt, rec.Spec, sys, specJSON)
		}
	}
	create := func(req CreateRequest, spec *world.Spec, wantRenders int) {
		t.Helper()
		rep, err := m.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if renders != wantRenders {
			t.Fatalf("%d renders after creating %+v, want %d", renders, req, wantRenders)
		}
		check(rep.SessionID, spec)
	}
	loaded, _ := m.World("t")
	for range 3 {
		create(CreateRequest{WorldID: "t"}, loaded, 1)
	}
	changed := termWorld()
	changed.TaskDescription = "a different shell"
	m.AddWorld(changed)
	create(CreateRequest{WorldID: "t"}, changed, 2)
	create(CreateRequest{WorldID: "t"}, changed, 2)
	inline := termWorld()
	inline.Name = "mine"
	create(CreateRequest{World: inline}, inline, 3)
	create(CreateRequest{World: inline}, inline, 4)
}

// TestPrivateSessionsAreUnknownToClients: every client-facing operation on
// a private session answers as for an id that does not exist, also once
// it has been reloaded from the store; ForkPrivate and DeletePrivate reach
// it, and its forks name a digest of it, never its id.
func TestPrivateSessionsAreUnknownToClients(t *testing.T) {
	model := &scriptedModel{replies: []worldmodel.Response{{Content: "<predicted_observation>a</predicted_observation>", FinishReason: "stop"}}}
	st := NewMemStore()
	m := newTestManager(t, model, Options{Store: st})
	ctx := context.Background()
	rep, err := m.Create(ctx, CreateRequest{WorldID: "t", Private: true})
	if err != nil {
		t.Fatal(err)
	}
	id := rep.SessionID
	refused := func(when string) {
		t.Helper()
		_, stepErr := m.Step(ctx, id, ls)
		_, forkErr := m.Fork(ctx, id, ForkRequest{})
		_, stateErr := m.State(ctx, id)
		_, trajErr := m.Trajectory(ctx, id)
		_, specErr := m.SessionSpec(ctx, id)
		delErr := m.Delete(ctx, id)
		for name, err := range map[string]error{"Step": stepErr, "Fork": forkErr, "State": stateErr, "Trajectory": trajErr, "SessionSpec": specErr, "Delete": delErr} {
			if !errors.Is(err, ErrUnknownSession) {
				t.Errorf("%s: %s of a private session: %v, want ErrUnknownSession", when, name, err)
			}
		}
	}
	refused("resident")
	f, err := m.ForkPrivate(ctx, id, ForkRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if f.Info.Parent != PrivateRootName(id) || strings.Contains(f.Info.Parent, id) {
		t.Fatalf("a fork's parent is %q, want %q", f.Info.Parent, PrivateRootName(id))
	}
	tr, err := m.Trajectory(ctx, f.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(tr.Meta); strings.Contains(string(b), id) {
		t.Fatalf("the fork's trajectory names the private session: %s", b)
	}
	if _, err := m.Step(ctx, f.SessionID, ls); err != nil {
		t.Fatalf("a fork of a private session is an ordinary one: %v", err)
	}
	if _, err := m.ForkPrivate(ctx, f.SessionID, ForkRequest{}); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("ForkPrivate of an ordinary session: %v", err)
	}
	// Closed, and read back from the store: still private.
	if err := m.DeletePrivate(ctx, id); err != nil {
		t.Fatal(err)
	}
	refused("closed")
	if _, err := m.ForkPrivate(ctx, id, ForkRequest{}); err != nil {
		t.Fatalf("ForkPrivate of the closed private session: %v", err)
	}
	m = newTestManager(t, model, Options{Store: st})
	refused("closed, after a restart")
	live, err := m.Create(ctx, CreateRequest{WorldID: "t", Private: true})
	if err != nil {
		t.Fatal(err)
	}
	id = live.SessionID
	m = newTestManager(t, model, Options{Store: st})
	refused("active, after a restart")
	if _, err := m.ForkPrivate(ctx, id, ForkRequest{}); err != nil {
		t.Fatalf("ForkPrivate after a restart: %v", err)
	}
}
