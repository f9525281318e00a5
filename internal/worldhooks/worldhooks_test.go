package worldhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/perturb"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// recorder is a world model that answers with answer(request) and keeps
// every request it received.
type recorder struct {
	mu     sync.Mutex
	reqs   []worldmodel.Request
	answer func(worldmodel.Request) string
}

func (r *recorder) Complete(_ context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return &worldmodel.Response{Content: "<predicted_observation>" + r.answer(req) + "</predicted_observation>", FinishReason: "stop"}, nil
}

func (r *recorder) requests() []worldmodel.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]worldmodel.Request(nil), r.reqs...)
}

func lastUser(req worldmodel.Request) string {
	return req.Messages[len(req.Messages)-1].Content
}

func newManager(t *testing.T, c worldmodel.Completer, hooks []sim.StepHook, specs ...*world.Spec) *sim.Manager {
	t.Helper()
	worlds := map[string]*world.Spec{}
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		worlds[s.Name] = s
	}
	m := sim.New(&sim.Options{
		Worlds:   worlds,
		Backends: map[string]sim.BackendFactory{sim.BackendModel: sim.NewModelBackend(c, &sim.ModelOptions{MaxTokens: 256})},
		Hooks:    hooks,
		MaxTurns: 1000,
	})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

func prob(p float64) *float64 { return &p }

var trackerTools = []world.Tool{
	{Name: "get_issue", InputSchema: json.RawMessage(`{"type":"object"}`)},
	{Name: "update_issue", InputSchema: json.RawMessage(`{"type":"object"}`)},
}

// TestRulesFireAtTheirRatesThroughSessions runs 1,000 steps (20 seeded
// sessions of 50, so the run is deterministic) through the session manager: each rule fires at
// its configured rate within 4 sigma, every firing is recorded on the
// step's stored labels, instructed rules put control text in the last user
// message only, and direct faults never reach the model.
func TestRulesFireAtTheirRatesThroughSessions(t *testing.T) {
	spec := &world.Spec{
		Name: "tracker", Domain: "mcp", TaskDescription: "An issue tracker.",
		ActionSpace: world.ActionSpace{Tools: trackerTools},
		Perturbations: &perturb.Config{Seed: 99, Rules: []perturb.Rule{
			{Name: "throttle", When: perturb.When{Tool: "update_issue", Probability: prob(0.3)}, Inject: perturb.Inject{Kind: perturb.RateLimit}},
			{Name: "stale", When: perturb.When{Tool: "get_issue", Turns: &perturb.TurnRange{From: 5}, Probability: prob(0.1)}, Inject: perturb.Inject{Kind: perturb.StaleData}},
			{Name: "slow", When: perturb.When{Probability: prob(0.15)}, Inject: perturb.Inject{Kind: perturb.Latency, LatencyMS: 40}},
			{Name: "rpc", When: perturb.When{Tool: "get_issue", Probability: prob(0.05)}, Inject: perturb.Inject{Kind: perturb.JSONRPCError, Code: -32000}},
		}},
	}
	rec := &recorder{answer: func(worldmodel.Request) string { return `{"content":[{"type":"text","text":"ok"}]}` }}
	hook := NewPerturbations(nil)
	var slept sync.Map
	hook.Sleep = func(_ context.Context, d time.Duration) error { slept.Store(d, true); return nil }
	m := newManager(t, rec, []sim.StepHook{hook}, spec)
	ctx := context.Background()

	eligible := map[string]int{}
	fired := map[string]int{}
	faults := 0
	steps := 0
	var sessions []string
	for s := 0; s < 20; s++ {
		seed := int64(1000 + s)
		rep, err := m.Create(ctx, sim.CreateRequest{WorldID: "tracker", Seed: &seed})
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, rep.SessionID)
		for turn := 1; turn <= 50; turn++ {
			tool := trackerTools[(s+turn)%2].Name
			action := fmt.Sprintf(`{"name":%q,"arguments":{"key":"LL-%d"}}`, tool, turn)
			before := len(rec.requests())
			res, err := m.Step(ctx, rep.SessionID, sim.StepRequest{Action: json.RawMessage(action)})
			if err != nil {
				t.Fatal(err)
			}
			steps++
			eligible["slow"]++
			if tool == "update_issue" {
				eligible["throttle"]++
			} else {
				eligible["rpc"]++
				if turn >= 5 {
					eligible["stale"]++
				}
			}
			rules := res.Info.Labels[perturb.LabelRules]
			for _, r := range strings.Split(rules, ",") {
				if r != "" {
					fired[r]++
				}
			}
			reqs := rec.requests()
			called := len(reqs) > before
			if strings.Contains(rules, "rpc") {
				faults++
				if called {
					t.Fatalf("session %d turn %d: a direct fault called the model", s, turn)
				}
				if res.Info.Backend != BackendPerturb || !strings.Contains(res.Observation, "-32000") {
					t.Fatalf("fault step %+v", res)
				}
				continue
			}
			if !called {
				t.Fatalf("session %d turn %d: model not called", s, turn)
			}
			last := reqs[len(reqs)-1]
			msg := lastUser(last)
			instructed := strings.Contains(rules, "throttle") || strings.Contains(rules, "stale")
			if instructed != strings.Contains(msg, perturb.ControlHeader) {
				t.Fatalf("turn %d rules %q: control text present=%v in %q", turn, rules, !instructed, msg)
			}
			if strings.Contains(rules, "throttle") && !strings.Contains(msg, perturb.Instruction(perturb.RateLimit)) {
				t.Fatalf("rate-limit instruction missing: %q", msg)
			}
			// Control text only ever enters the newest message: the system
			// prompt never carries it.
			if strings.Contains(last.Messages[0].Content, perturb.ControlHeader) {
				t.Fatal("control text in the system prompt")
			}
		}
	}
	if steps != 1000 {
		t.Fatalf("%d steps", steps)
	}
	rates := map[string]float64{"throttle": 0.3, "stale": 0.1, "slow": 0.15, "rpc": 0.05}
	for r, p := range rates {
		n := float64(eligible[r])
		mean, sigma := n*p, math.Sqrt(n*p*(1-p))
		got := float64(fired[r])
		t.Logf("%-8s p=%.2f eligible=%4.0f fired=%4.0f expected %.1f ± %.1f (4σ)", r, p, n, got, mean, 4*sigma)
		if math.Abs(got-mean) > 4*sigma {
			t.Errorf("rule %s fired %v times, want %.1f ± %.1f", r, got, mean, 4*sigma)
		}
	}
	if _, ok := slept.Load(40 * time.Millisecond); !ok {
		t.Error("latency rule never delayed a step")
	}
	// The labels are stored with each turn of the trajectory.
	stored := 0
	for _, id := range sessions {
		tr, err := m.Trajectory(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, turn := range tr.Turns {
			var info sim.StepInfo
			if err := json.Unmarshal(turn.Meta["info"], &info); err != nil {
				t.Fatal(err)
			}
			for _, r := range strings.Split(info.Labels[perturb.LabelRules], ",") {
				if r != "" {
					stored++
				}
			}
		}
	}
	total := 0
	for _, n := range fired {
		total += n
	}
	if stored != total || total == 0 {
		t.Errorf("stored firings %d, returned %d", stored, total)
	}
	t.Logf("%d direct faults answered without the model", faults)
}

// TestPerturbationsAreReproducible: the same seed and turn give the same
// firings, so a rerun, a retried or a forked step is perturbed alike; a
// branch given another seed draws anew; unseeded forks share their root's
// draws.
func TestPerturbationsAreReproducible(t *testing.T) {
	info := func(id string, seed *int64) sim.SessionInfo {
		return sim.SessionInfo{ID: id, Root: "root-1", Seed: seed, Spec: &world.Spec{
			Name: "w", Domain: "mcp", ActionSpace: world.ActionSpace{Tools: trackerTools},
			Perturbations: &perturb.Config{Rules: []perturb.Rule{{Name: "r", When: perturb.When{Probability: prob(0.5)}, Inject: perturb.Inject{Kind: perturb.Timeout}}}},
		}}
	}
	h := NewPerturbations(nil)
	seq := func(s sim.SessionInfo) string {
		var b strings.Builder
		for turn := 1; turn <= 64; turn++ {
			in := &sim.StepInput{Turn: turn, Action: conversation.Action{Text: "x"}}
			if _, err := h.BeforeStep(context.Background(), s, in); err != nil {
				t.Fatal(err)
			}
			if in.Labels[perturb.LabelRules] != "" {
				b.WriteByte('1')
			} else {
				b.WriteByte('0')
			}
		}
		return b.String()
	}
	seed := int64(3)
	other := int64(4)
	a, fork, branch := seq(info("root-1", &seed)), seq(info("child", &seed)), seq(info("child2", &other))
	if a != fork {
		t.Errorf("fork with the parent's seed differs:\n%s\n%s", a, fork)
	}
	if a == branch {
		t.Error("a branch with another seed drew the same perturbations")
	}
	rerun := info("unrelated", &seed)
	rerun.Root = "unrelated"
	if seq(rerun) != a {
		t.Error("a session with the same seed drew different perturbations")
	}
	u1, u2, u1fork := info("u1", nil), info("u2", nil), info("u1-fork", nil)
	u1.Root, u2.Root, u1fork.Root = "u1", "u2", "u1"
	if seq(u1) != seq(u1fork) || seq(u1) == seq(u2) {
		t.Error("unseeded sessions: forks must share their root's draws, other sessions must not")
	}
	// A bad per-session override is a field error naming the parameter.
	s := info("x", nil)
	s.Params = map[string]json.RawMessage{ParamPerturbations: json.RawMessage(`[{"when":{"probability":3},"inject":{"kind":"timeout"}}]`)}
	_, err := h.BeforeStep(context.Background(), s, &sim.StepInput{Turn: 1})
	if err == nil || !strings.Contains(err.Error(), "params.perturbations") || !strings.Contains(err.Error(), "when.probability") {
		t.Errorf("bad override: %v", err)
	}
	// A valid override replaces the spec's rule of the same name.
	s.Params = map[string]json.RawMessage{ParamPerturbations: json.RawMessage(`[{"name":"r","when":{"probability":0},"inject":{"kind":"timeout"}}]`)}
	if got := seq(s); strings.Contains(got, "1") {
		t.Errorf("override to probability 0 still fires: %s", got)
	}
}

// TestFictionalWorldSharesFacts: a fact session A's observation invents
// appears in session B's prompt; the spec's facts are in every session's
// system prompt; B contradicting A is found by the ledger check.
func TestFictionalWorldSharesFacts(t *testing.T) {
	spec := &world.Spec{
		Name: "quillfern", Domain: "search", TaskDescription: "Search about an invented company.",
		ActionSpace: world.ActionSpace{Description: "search(query), open_page(url)"},
		Facts:       &fiction.Facts{Entities: []fiction.Entity{{ID: "quillfern", Type: "company", Name: "Quillfern Instruments", Attributes: map[string]string{"founded": "2011"}}}},
	}
	var mu sync.Mutex
	answers := map[string]string{
		"A": `{"results":[{"id":"emp-9","name":"Oona Pale","title":"Head of Optics","url":"https://quillfern.example/team/oona"}]}`,
		"B": "Employee ID: emp-9\nName: Oona Pale\nTitle: Janitor",
	}
	current := "A"
	rec := &recorder{answer: func(worldmodel.Request) string {
		mu.Lock()
		defer mu.Unlock()
		return answers[current]
	}}
	store, err := fiction.NewFileStore(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	led := fiction.NewLedger(store, nil)
	m := newManager(t, rec, []sim.StepHook{NewLedger(led, nil), NewPerturbations(nil)}, spec)
	ctx := context.Background()
	a, err := m.Create(ctx, sim.CreateRequest{WorldID: "quillfern"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Create(ctx, sim.CreateRequest{WorldID: "quillfern"})
	if err != nil {
		t.Fatal(err)
	}
	step := func(id, action string) {
		t.Helper()
		if _, err := m.Step(ctx, id, sim.StepRequest{Action: json.RawMessage(action)}); err != nil {
			t.Fatal(err)
		}
	}
	step(a.SessionID, `{"name":"search","arguments":{"query":"quillfern optics lead"}}`)
	mu.Lock()
	current = "B"
	mu.Unlock()
	step(b.SessionID, `{"name":"search","arguments":{"query":"quillfern staff"}}`)

	reqs := rec.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	for i, r := range reqs {
		if !strings.Contains(r.Messages[0].Content, "Quillfern Instruments") || !strings.Contains(r.Messages[0].Content, "founded: 2011") {
			t.Errorf("request %d: system prompt lacks the spec's facts:\n%s", i, r.Messages[0].Content)
		}
	}
	if strings.Contains(lastUser(reqs[0]), "emp-9") {
		t.Error("session A's first prompt already mentions emp-9")
	}
	bPrompt := lastUser(reqs[1])
	for _, want := range []string{fiction.StateHeader, "emp-9", "title: Head of Optics", "name: Oona Pale"} {
		if !strings.Contains(bPrompt, want) {
			t.Errorf("session B's prompt lacks %q:\n%s", want, bPrompt)
		}
	}
	cs, err := led.Contradictions(ctx, "quillfern", spec.Facts)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Entity != "emp-9" || cs[0].Attribute != "title" || cs[0].Was.Value != "Head of Optics" || cs[0].Now.Value != "Janitor" {
		t.Errorf("contradictions %+v", cs)
	}
}

// TestInjectedLatencyIsCapped: a rule asking for an hour per step sleeps
// at most the step cap, and a session stops sleeping once its budget is
// spent; both cuts are labelled on the step. A session's budget is its own.
func TestInjectedLatencyIsCapped(t *testing.T) {
	h := NewPerturbations(nil)
	h.Limits = perturb.Limits{MaxStepLatency: 2 * time.Second, MaxSessionLatency: 5 * time.Second}
	var slept []time.Duration
	h.Sleep = func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		return nil
	}
	info := func(id string) sim.SessionInfo {
		return sim.SessionInfo{ID: id, Spec: &world.Spec{Name: "w", Domain: "mcp", ActionSpace: world.ActionSpace{Tools: trackerTools},
			Perturbations: &perturb.Config{Rules: []perturb.Rule{{Name: "slow", Inject: perturb.Inject{Kind: perturb.Latency, LatencyMS: 3600 * 1000}}}}}}
	}
	var capped []string
	for turn := 1; turn <= 4; turn++ {
		in := &sim.StepInput{Turn: turn, Action: conversation.Action{Text: "x"}}
		if _, err := h.BeforeStep(context.Background(), info("a"), in); err != nil {
			t.Fatal(err)
		}
		capped = append(capped, in.Labels[LabelLatencyCapped])
	}
	in := &sim.StepInput{Turn: 1, Action: conversation.Action{Text: "x"}}
	if _, err := h.BeforeStep(context.Background(), info("b"), in); err != nil {
		t.Fatal(err)
	}
	s := time.Second
	if diff := cmp.Diff([]time.Duration{2 * s, 2 * s, 1 * s, 2 * s}, slept); diff != "" {
		t.Errorf("slept (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"step", "step", "session", "session"}, capped); diff != "" {
		t.Errorf("cap labels (-want +got):\n%s", diff)
	}
}

// TestInlineSpecsHaveTheirOwnLedgers: an inline spec that names itself
// like a loaded fictional world neither reads nor writes that world's
// ledger; inline specs share a ledger only when they are the same spec (a
// fork keeps its parent's), and unnamed ones do not all share one.
func TestInlineSpecsHaveTheirOwnLedgers(t *testing.T) {
	facts := func(founded string) *fiction.Facts {
		return &fiction.Facts{Entities: []fiction.Entity{{ID: "quillfern", Name: "Quillfern Instruments", Attributes: map[string]string{"founded": founded}}}}
	}
	served := &world.Spec{Name: "quillfern", Domain: "search", TaskDescription: "Search about an invented company.",
		ActionSpace: world.ActionSpace{Description: "search(query)"}, Facts: facts("2011")}
	inline := func(name, founded string) *world.Spec {
		s := *served
		s.Name, s.Facts = name, facts(founded)
		return &s
	}
	rec := &recorder{answer: func(r worldmodel.Request) string {
		return `{"id":"emp-9","name":"Oona Pale","title":"` + map[bool]string{true: "Janitor", false: "Head of Optics"}[strings.Contains(lastUser(r), "janitor")] + `"}`
	}}
	store := &fiction.MemStore{}
	led := fiction.NewLedger(store, nil)
	m := newManager(t, rec, []sim.StepHook{NewLedger(led, nil)}, served)
	ctx := context.Background()
	open := func(req sim.CreateRequest) string {
		t.Helper()
		rep, err := m.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return rep.SessionID
	}
	step := func(id, query string) {
		t.Helper()
		if _, err := m.Step(ctx, id, sim.StepRequest{Action: json.RawMessage(`{"name":"search","arguments":{"query":"` + query + `"}}`)}); err != nil {
			t.Fatal(err)
		}
	}
	worldFacts := func(world string) int {
		t.Helper()
		fs, err := store.WorldFacts(ctx, world)
		if err != nil {
			t.Fatal(err)
		}
		return len(fs)
	}

	// The loaded world learns emp-9 as Head of Optics.
	step(open(sim.CreateRequest{WorldID: "quillfern"}), "optics lead")
	servedFacts := worldFacts("quillfern")
	if servedFacts == 0 {
		t.Fatal("the loaded world's ledger learned nothing")
	}
	// An impostor under the same name says emp-9 is a janitor.
	impostor := open(sim.CreateRequest{World: inline("quillfern", "1999")})
	before := len(rec.requests())
	step(impostor, "janitor")
	if strings.Contains(lastUser(rec.requests()[before]), "emp-9") {
		t.Error("the inline spec was shown the loaded world's facts")
	}
	if got := worldFacts("quillfern"); got != servedFacts {
		t.Errorf("the inline spec wrote the loaded world's ledger: %d facts, want %d", got, servedFacts)
	}
	cs, err := led.Contradictions(ctx, "quillfern", served.Facts)
	if err != nil || len(cs) != 0 {
		t.Errorf("the loaded world's contradictions after an impostor: %v %v", cs, err)
	}

	// A fork of the impostor, and a second session of the same inline
	// spec, are shown its ledger's facts; a different unnamed spec is not.
	fork, err := m.Fork(ctx, impostor, sim.ForkRequest{})
	if err != nil {
		t.Fatal(err)
	}
	same := open(sim.CreateRequest{World: inline("quillfern", "1999")})
	other := open(sim.CreateRequest{World: inline("", "1999")})
	for _, tc := range []struct {
		id      string
		sees    bool
		session string
	}{{fork.SessionID, true, "fork"}, {same, true, "same inline spec"}, {other, false, "another inline spec"}} {
		n := len(rec.requests())
		step(tc.id, "anything")

		if got := strings.Contains(lastUser(rec.requests()[n]), "emp-9"); got != tc.sees {
			t.Errorf("%s: sees the inline ledger's facts = %v, want %v", tc.session, got, tc.sees)
		}
	}
}

func TestLedgerWorld(t *testing.T) {
	spec := &world.Spec{Name: "quillfern"}
	digest := strings.Repeat("ab", 32)
	tests := []struct {
		s    sim.SessionInfo
		want string
	}{
		{sim.SessionInfo{Spec: spec}, "quillfern"},
		{sim.SessionInfo{Spec: spec, Inline: digest}, "inline/" + digest[:32]},
	}
	for _, tc := range tests {
		if got := LedgerWorld(tc.s); got != tc.want {
			t.Errorf("LedgerWorld(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

// TestEnginesAreBoundedAndGoWithTheirSpec: compiled perturbation engines
// are cached within maxEngineBytes however many specs come (each client's
// inline spec is its own), and a spec's engines are dropped once the spec
// is collected (its session ended), without waiting for eviction.
func TestEnginesAreBoundedAndGoWithTheirSpec(t *testing.T) {
	h := NewPerturbations(nil)
	spec := func(i int) *world.Spec {
		var rules []perturb.Rule
		for r := range 6 {
			// About 350 KiB each (capture slots, charged per
			// instruction) in 158 instructions: six stay within
			// perturb.MaxActionInsts, and parse in microseconds.
			rules = append(rules, perturb.Rule{Name: fmt.Sprint("r", r), When: perturb.When{Action: strings.Repeat(`(x)`, 50) + fmt.Sprintf(`|spec%d`, i)}, Inject: perturb.Inject{Kind: perturb.Timeout}})
		}
		return &world.Spec{Name: "w", Domain: "mcp", ActionSpace: world.ActionSpace{Tools: trackerTools}, Perturbations: &perturb.Config{Rules: rules}}
	}
	step := func(s *world.Spec) {
		t.Helper()
		if _, err := h.BeforeStep(context.Background(), sim.SessionInfo{ID: "s", Spec: s}, &sim.StepInput{Turn: 1, Action: conversation.Action{Text: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	var alive []*world.Spec
	for i := range 48 { // about 100 MiB of engines: past the bound
		s := spec(i)
		alive = append(alive, s)
		step(s)
		if n, b := h.cached(); b > maxEngineBytes || n > maxEngines {
			t.Fatalf("after %d specs: %d engines holding %d bytes, over %d", i+1, n, b, maxEngineBytes)
		}
	}
	n, b := h.cached()
	if n == 0 || n == len(alive) {
		t.Fatalf("%d engines (%d bytes) cached for %d specs: want some, within the bound", n, b, len(alive))
	}
	runtime.KeepAlive(alive)
	alive = nil
	deadline := time.Now().Add(time.Minute) // a hang guard: collections run the cleanups
	for {
		runtime.GC()
		if n, b := h.cached(); n == 0 && b == 0 {
			break
		}
		if time.Now().After(deadline) {
			n, b := h.cached()
			t.Fatalf("%d engines (%d bytes) still cached after their specs were collected", n, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.bySpec) != 0 || h.lru.Len() != 0 {
		t.Fatalf("index left behind: %d specs, %d in the LRU", len(h.bySpec), h.lru.Len())
	}
}
