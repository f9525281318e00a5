package replay

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/examples"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
)

func manager(t *testing.T, backends map[string]sim.BackendFactory, def string) *sim.Manager {
	t.Helper()
	worlds, err := world.LoadFS(examples.FS, "worlds")
	if err != nil {
		t.Fatal(err)
	}
	m := sim.New(&sim.Options{Worlds: worlds, Backends: backends, DefaultBackend: def})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

func TestBundledRecordingsReplayExactlyAndApproximately(t *testing.T) {
	lib := New(nil)
	if err := lib.LoadFS(examples.FS, "recordings"); err != nil {
		t.Fatal(err)
	}
	if got := len(lib.Domains()); got != 7 {
		t.Fatalf("recordings cover %d domains, want 7: %v", got, lib.Domains())
	}
	m := manager(t, map[string]sim.BackendFactory{BackendReplay: Backend(lib)}, BackendReplay)
	ctx := context.Background()
	rep, err := m.Create(ctx, sim.CreateRequest{WorldID: "python-terminal"})
	if err != nil {
		t.Fatal(err)
	}
	// The recorded first action, written with another key order: exact.
	r, err := m.Step(ctx, rep.SessionID, sim.StepRequest{Action: json.RawMessage(`[{"duration":0.5,"keystrokes":"ls\n"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Info.Backend != BackendReplay || r.Info.Approximate || !strings.Contains(r.Observation, "pyproject.toml") {
		t.Fatalf("exact replay: %+v", r)
	}
	// Following the recording stays exact.
	r, err = m.Step(ctx, rep.SessionID, sim.StepRequest{Action: json.RawMessage(`[{"keystrokes":"python -m pytest -q\n","duration":5}]`)})
	if err != nil || r.Info.Approximate || !strings.Contains(r.Observation, "1 failed, 4 passed") {
		t.Fatalf("second exact step: %+v %v", r, err)
	}
	// An unrecorded action gets the nearest transition, marked approximate
	// and naming the recorded action it answers.
	r, err = m.Step(ctx, rep.SessionID, sim.StepRequest{Action: json.RawMessage(`[{"keystrokes":"python -m pytest -q tests\n","duration":5}]`)})
	if err != nil || !r.Info.Approximate || !strings.Contains(r.Observation, "pytest") {
		t.Fatalf("approximate step: %+v %v", r, err)
	}
	var near Nearest
	if err := json.Unmarshal(r.Info.Extra[ExtraNearest], &near); err != nil {
		t.Fatalf("approximate step without info.extra.%s: %v (%s)", ExtraNearest, err, r.Info.Extra[ExtraNearest])
	}
	if !strings.Contains(near.Action, "pytest") || strings.Contains(near.Action, "tests\\n") || near.World != "python-terminal" || !(near.Similarity > 0 && near.Similarity < 1.2) {
		t.Fatalf("nearest %+v: want the recorded pytest action of python-terminal", near)
	}
	if _, ok := rExact(t, m, ctx); ok {
		t.Fatal("an exact answer carries no nearest-transition note")
	}
}

// rExact steps a fresh python-terminal session with its recorded first
// action and reports whether the answer names a nearest transition.
func rExact(t *testing.T, m *sim.Manager, ctx context.Context) (json.RawMessage, bool) {
	t.Helper()
	rep, err := m.Create(ctx, sim.CreateRequest{WorldID: "python-terminal"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.Step(ctx, rep.SessionID, sim.StepRequest{Action: json.RawMessage(`[{"keystrokes":"ls\n","duration":0.5}]`)})
	if err != nil || r.Info.Approximate {
		t.Fatalf("exact step: %+v %v", r, err)
	}
	raw, ok := r.Info.Extra[ExtraNearest]
	return raw, ok
}

// TestStrictReplayRefusesApproximateAnswers: with Strict, an action that
// was not recorded after its history is refused as a bad request naming
// the action and the nearest recorded one, and nothing is recorded; an
// exact match is answered as ever.
func TestStrictReplayRefusesApproximateAnswers(t *testing.T) {
	lib := New(&Options{Strict: true})
	if err := lib.LoadFS(examples.FS, "recordings"); err != nil {
		t.Fatal(err)
	}
	m := manager(t, map[string]sim.BackendFactory{BackendReplay: Backend(lib)}, BackendReplay)
	ctx := context.Background()
	rExact(t, m, ctx)
	rep, err := m.Create(ctx, sim.CreateRequest{WorldID: "python-terminal"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Step(ctx, rep.SessionID, sim.StepRequest{Action: json.RawMessage(`[{"keystrokes":"cat /etc/hostname\n","duration":1}]`)})
	if !errors.Is(err, sim.ErrBadRequest) || !strings.Contains(err.Error(), "strict replay") || !strings.Contains(err.Error(), "nearest recorded action") {
		t.Fatalf("unrecorded action under strict replay: %v, want a bad request", err)
	}
	if tr, err := m.Trajectory(ctx, rep.SessionID); err != nil || len(tr.Turns) != 0 {
		t.Fatalf("a refused step was recorded: %v %+v", err, tr)
	}
}

// countingModel is a fake world-model environment that counts its calls.
type countingModel struct{ calls *int }

func (c countingModel) Reset(context.Context) (sim.Observation, error) { return sim.Observation{}, nil }
func (c countingModel) Close() error                                   { return nil }
func (c countingModel) Step(_ context.Context, in sim.StepInput) (sim.Observation, error) {
	*c.calls++
	return sim.Observation{Text: "model says " + in.Action.Text, Info: sim.StepInfo{Backend: sim.BackendModel}}, nil
}

func TestCacheAnswersRepeatsAndRecordsToDisk(t *testing.T) {
	dir := t.TempDir()
	calls := 0
	model := func(context.Context, sim.SessionInfo) (sim.Environment, error) { return countingModel{&calls}, nil }
	lib := New(nil)
	if err := lib.RecordTo(dir); err != nil {
		t.Fatal(err)
	}
	m := manager(t, map[string]sim.BackendFactory{sim.BackendModel: Cache(lib, "wm", model)}, sim.BackendModel)
	ctx := context.Background()
	run := func() []sim.StepResult {
		rep, err := m.Create(ctx, sim.CreateRequest{WorldID: "web-search"})
		if err != nil {
			t.Fatal(err)
		}
		var out []sim.StepResult
		for _, a := range []string{`{"name":"search","arguments":{"query":"go"}}`, `{"name":"open_page","arguments":{"url":"https://go.dev"}}`} {
			r, err := m.Step(ctx, rep.SessionID, sim.StepRequest{Action: json.RawMessage(a)})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, *r)
		}
		return out
	}
	first := run()
	second := run()
	if calls != 2 || first[0].Info.Backend != sim.BackendModel || second[0].Info.Backend != BackendCache || second[1].Observation != first[1].Observation {
		t.Fatalf("calls=%d first=%+v second=%+v", calls, first, second)
	}
	if err := lib.Close(); err != nil {
		t.Fatal(err)
	}
	// The cache file replays in a fresh library.
	again := New(nil)
	if err := again.LoadDir(dir); err != nil {
		t.Fatal(err)
	}
	if again.Len() != 2 { // one line per recorded step
		t.Fatalf("reloaded cache holds %d transitions", again.Len())
	}
}

func TestBadRecordingNamesTheLine(t *testing.T) {
	err := New(nil).Read(strings.NewReader("{\"id\":\"a\",\"domain\":\"terminal\",\"system_prompt\":\"s\",\"turns\":[{\"action\":\"[]\",\"observation\":\"\"}]}\n{\"id\":\"b\",\"domain\":\"chess\",\"system_prompt\":\"s\",\"turns\":[{\"action\":\"x\",\"observation\":\"y\"}]}\n"), "rec.jsonl")
	if err == nil || !strings.Contains(err.Error(), "rec.jsonl:2") {
		t.Fatalf("want an error at rec.jsonl:2, got %v", err)
	}
}

func FuzzRead(f *testing.F) {
	f.Add(`{"id":"a","domain":"terminal","system_prompt":"s","turns":[{"action":"[]","observation":""}]}`)
	f.Add(`{"id":"b","domain":"mcp","system_prompt":"s","turns":[{"action":"{\"name\":\"x\"}","observation":"y"}],"meta":{"world":"w"}}`)
	f.Add("{}\n[")
	f.Add(`{"kind":"transition","parent":"` + Root("mcp").String() + `","domain":"mcp","world":"w","action":"{\"name\":\"x\"}","observation":"y"}`)
	f.Fuzz(func(t *testing.T, in string) {
		lib := New(nil)
		if err := lib.Read(strings.NewReader(in), "f.jsonl"); err != nil {
			return
		}
		// Whatever loaded can be looked up without panicking.
		for _, d := range lib.Domains() {
			lib.Lookup(At{Domain: d, World: "w", History: Root(d)}, "x")
		}
	})
}

// TestUnrecordedActionsAreNotAnsweredWithAnotherAction: an action far from
// every recording (below MinSimilarity) is answered with the "unrecorded
// action" observation naming the nearest recorded actions, never with the
// answer to another action; a negative MinSimilarity answers with the
// nearest however far.
func TestUnrecordedActionsAreNotAnsweredWithAnotherAction(t *testing.T) {
	lib := New(nil)
	if err := lib.LoadFS(examples.FS, "recordings"); err != nil {
		t.Fatal(err)
	}
	m := manager(t, map[string]sim.BackendFactory{BackendReplay: Backend(lib)}, BackendReplay)
	ctx := context.Background()
	cases := []struct {
		world, action, nearest string
	}{
		{"python-terminal", `[{"keystrokes":"echo step1\n","duration":0.5}]`, "keystrokes"},
		{"web-search", `{"name":"search","arguments":{"query":"who founded Zentrix Robotics"}}`, "tallest building"},
	}
	for _, c := range cases {
		rep, err := m.Create(ctx, sim.CreateRequest{WorldID: c.world})
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.Step(ctx, rep.SessionID, sim.StepRequest{Action: json.RawMessage(c.action)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(r.Observation, "[replay: unrecorded action]") || !strings.Contains(r.Observation, c.nearest) || !strings.Contains(r.Info.Error, "unrecorded action") {
			t.Errorf("%s %s: %q (error %q), want the unrecorded-action answer naming %q", c.world, c.action, r.Observation, r.Info.Error, c.nearest)
		}
		var near []Nearest
		if err := json.Unmarshal(r.Info.Extra[ExtraUnrecorded], &near); err != nil || len(near) == 0 || len(near) > 3 {
			t.Fatalf("%s: info.extra.%s = %s (%v)", c.world, ExtraUnrecorded, r.Info.Extra[ExtraUnrecorded], err)
		}
		if near[0].World != c.world || near[0].ActionSimilarity >= DefaultMinSimilarity {
			t.Errorf("%s: nearest %+v", c.world, near)
		}
		for i := 1; i < len(near); i++ {
			if near[i].Similarity > near[i-1].Similarity || near[i].Action == near[i-1].Action {
				t.Errorf("%s: nearest not best first, one per action: %+v", c.world, near)
			}
		}
	}

	any := New(&Options{MinSimilarity: -1})
	if err := any.LoadFS(examples.FS, "recordings"); err != nil {
		t.Fatal(err)
	}
	match, _ := any.Lookup(At{Domain: "terminal", World: "python-terminal", History: Root("terminal")}, `[{"duration":0.5,"keystrokes":"echo step1\n"}]`)
	if match.Unrecorded || !match.Approximate || match.Observation == "" {
		t.Errorf("MinSimilarity -1: %+v, want the nearest answer", match)
	}
}
