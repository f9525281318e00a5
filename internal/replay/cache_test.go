package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/examples"
	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
)

// episode is a short search session used by the cache tests.
var episode = []sim.HistoryTurn{
	{Action: `{"arguments":{"query":"go"},"name":"search"}`, Observation: "1. The Go Programming Language\n   https://go.dev"},
	{Action: `{"arguments":{"url":"https://go.dev"},"name":"open_page"}`, Observation: "Build simple, secure, scalable systems with Go."},
	{Action: `{"arguments":{"query":"go generics"},"name":"search"}`, Observation: "1. Tutorial: Getting started with generics"},
}

const (
	testDomain = "search"
	testWorld  = "web-search"
)

// recordEpisode records every turn of hist the way a cache session does:
// one running chain, one Record per step.
func recordEpisode(t *testing.T, lib *Library, world string, hist []sim.HistoryTurn) {
	t.Helper()
	c := NewChain(testDomain, nil)
	for i, tu := range hist {
		a := At{Domain: testDomain, World: world, History: c.At(hist[:i])}
		if i > 0 {
			a.Prev = hist[i-1].Observation
		}
		if err := lib.Record(a, tu.Action, tu.Observation); err != nil {
			t.Fatal(err)
		}
	}
}

// oldCacheLines writes hist the way the previous version's Record did: one
// trajectory per step holding the whole history up to it.
func oldCacheLines(t *testing.T, world string, hist []sim.HistoryTurn) []byte {
	t.Helper()
	var buf bytes.Buffer
	for i := range hist {
		tr := trajectory.Trajectory{ID: fmt.Sprintf("cache-%d", i), Domain: testDomain, Source: BackendCache,
			SystemPrompt: "(recorded transition)", Meta: map[string]json.RawMessage{"world": json.RawMessage(fmt.Sprintf("%q", world))}}
		for _, h := range hist[:i+1] {
			tr.Turns = append(tr.Turns, trajectory.Turn{Action: h.Action, Observation: h.Observation})
		}
		line, err := trajectory.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// lookups looks every turn of hist up exactly, plus one action nobody
// recorded after the last turn (an approximate answer).
func lookups(lib *Library, world string, hist []sim.HistoryTurn) []Match {
	c := NewChain(testDomain, nil)
	var out []Match
	for i, tu := range hist {
		a := At{Domain: testDomain, World: world, History: c.At(hist[:i])}
		if i > 0 {
			a.Prev = hist[i-1].Observation
		}
		m, _ := lib.Lookup(a, tu.Action)
		out = append(out, m)
	}
	m, _ := lib.Lookup(At{Domain: testDomain, World: world, History: c.At(hist), Prev: hist[len(hist)-1].Observation}, `{"arguments":{"query":"go generics tutorial"},"name":"search"}`)
	return append(out, m)
}

func TestExactLookupsHitAfterRecordAndReload(t *testing.T) {
	want := []Match{
		{Observation: episode[0].Observation, Action: episode[0].Action, World: testWorld, Score: 1, ActionSimilarity: 1},
		{Observation: episode[1].Observation, Action: episode[1].Action, World: testWorld, Score: 1, ActionSimilarity: 1},
		{Observation: episode[2].Observation, Action: episode[2].Action, World: testWorld, Score: 1, ActionSimilarity: 1},
	}
	tests := []struct {
		name string
		// build fills a library with episode, recorded live or loaded from a
		// cache dir.
		build func(t *testing.T) *Library
	}{
		{"fresh library", func(t *testing.T) *Library {
			lib := New(nil)
			recordEpisode(t, lib, testWorld, episode)
			return lib
		}},
		{"reloaded transition lines", func(t *testing.T) *Library {
			dir := t.TempDir()
			rec := New(nil)
			if err := rec.RecordTo(dir); err != nil {
				t.Fatal(err)
			}
			recordEpisode(t, rec, testWorld, episode)
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
			return load(t, dir)
		}},
		{"reloaded trajectory lines of the previous version", func(t *testing.T) *Library {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "cache.jsonl"), oldCacheLines(t, testWorld, episode), 0o644); err != nil {
				t.Fatal(err)
			}
			return load(t, dir)
		}},
		{"reloaded old lines continued by new ones", func(t *testing.T) *Library {
			// A session cached by the previous version, resumed and
			// continued by this one, appends to the same file.
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "cache.jsonl"), oldCacheLines(t, testWorld, episode[:2]), 0o644); err != nil {
				t.Fatal(err)
			}
			rec := load(t, dir)
			if err := rec.RecordTo(dir); err != nil {
				t.Fatal(err)
			}
			a := At{Domain: testDomain, World: testWorld, History: NewChain(testDomain, episode[:2]).At(episode[:2]), Prev: episode[1].Observation}
			if err := rec.Record(a, episode[2].Action, episode[2].Observation); err != nil {
				t.Fatal(err)
			}
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
			return load(t, dir)
		}},
	}
	var approx []Match
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lib := tc.build(t)
			if lib.Len() != len(episode) {
				t.Errorf("library holds %d transitions, want %d", lib.Len(), len(episode))
			}
			got := lookups(lib, testWorld, episode)
			if diff := cmp.Diff(want, got[:len(episode)]); diff != "" {
				t.Errorf("exact lookups (-want +got):\n%s", diff)
			}
			last := got[len(episode)]
			if !last.Approximate || last.Observation != episode[2].Observation {
				t.Errorf("unrecorded action: %+v, want an approximate answer from the last turn", last)
			}
			approx = append(approx, last)
		})
	}
	// Loading restores the previous observation a transition line leaves
	// out, so nearest-neighbour scores do not depend on where a transition
	// came from.
	for i := 1; i < len(approx); i++ {
		if diff := cmp.Diff(approx[0], approx[i]); diff != "" {
			t.Errorf("approximate answer of %q differs from a fresh library's (-fresh +got):\n%s", tests[i].name, diff)
		}
	}
}

func load(t *testing.T, dir string) *Library {
	t.Helper()
	lib := New(nil)
	if err := lib.LoadDir(dir); err != nil {
		t.Fatal(err)
	}
	return lib
}

func TestChainOfAGivenHistoryEqualsTheSteppedOne(t *testing.T) {
	long := append(append([]sim.HistoryTurn(nil), episode...), sim.HistoryTurn{Action: "x", Observation: "y"})
	stepped := make([]Key, len(long)+1) // stepped[i]: chain after i turns, stepping one turn at a time
	c := NewChain(testDomain, nil)
	for i := range stepped {
		stepped[i] = c.At(long[:i])
	}
	edited := append([]sim.HistoryTurn(nil), long...)
	edited[1].Observation += " (edited)"
	tests := []struct {
		name string
		// seen are histories a session's chain saw before hist.
		seen []([]sim.HistoryTurn)
		hist []sim.HistoryTurn
		want Key
	}{
		{"new session", nil, nil, Root(testDomain)},
		{"resumed with the whole history", [][]sim.HistoryTurn{long}, long, stepped[len(long)]},
		{"forked at turn 2", [][]sim.HistoryTurn{long[:2]}, long[:2], stepped[2]},
		{"forked at turn 2 then stepped", [][]sim.HistoryTurn{long[:2]}, long[:3], stepped[3]},
		{"turns answered elsewhere in between", [][]sim.HistoryTurn{long[:1]}, long, stepped[len(long)]},
		{"rewound", [][]sim.HistoryTurn{long}, long[:1], stepped[1]},
		{"an earlier turn differs", [][]sim.HistoryTurn{long}, edited, Root(testDomain).Next(long[0].Action, long[0].Observation).
			Next(edited[1].Action, edited[1].Observation).Next(long[2].Action, long[2].Observation).Next(long[3].Action, long[3].Observation)},
		{"back to the original after an edit", [][]sim.HistoryTurn{long, edited}, long, stepped[len(long)]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c *Chain
			if len(tc.seen) == 0 {
				c = NewChain(testDomain, nil)
			} else {
				c = NewChain(testDomain, tc.seen[0])
				for _, h := range tc.seen[1:] {
					c.At(h)
				}
			}
			if got := c.At(tc.hist); got != tc.want {
				t.Errorf("chain = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestKeyFramingKeepsSplitsApart(t *testing.T) {
	r := Root("search")
	keys := map[string]Key{
		"root search":             r,
		"root searc":              Root("searc"),
		"ab|c":                    r.Next("ab", "c"),
		"a|bc":                    r.Next("a", "bc"),
		"abc|":                    r.Next("abc", ""),
		"a|b then c|":             r.Next("a", "b").Next("c", ""),
		"exact ab":                r.exact("ab"),
		"exact a after nothing":   r.exact("a"),
		"exact b after a|":        r.Next("a", "").exact("b"),
		"root holding turn bytes": Root("search\x01a"),
	}
	seen := map[Key]string{}
	for name, k := range keys {
		if other, ok := seen[k]; ok {
			t.Errorf("%s and %s share key %v", name, other, k)
		}
		seen[k] = name
	}
	back, err := ParseKey(r.String())
	if err != nil || back != r {
		t.Errorf("ParseKey(String()) = %v, %v; want %v", back, err, r)
	}
}

// TestForkedSessionHitsTheCache runs a session through a cache in front
// of a counting model, then forks it: the fork's environment gets the
// history all at once, and its next step must find what the parent
// recorded.
func TestForkedSessionHitsTheCache(t *testing.T) {
	calls := 0
	model := func(context.Context, sim.SessionInfo) (sim.Environment, error) { return countingModel{&calls}, nil }
	lib := New(nil)
	m := manager(t, map[string]sim.BackendFactory{sim.BackendModel: Cache(lib, "wm", model)}, sim.BackendModel)
	ctx := context.Background()
	rep, err := m.Create(ctx, sim.CreateRequest{WorldID: testWorld})
	if err != nil {
		t.Fatal(err)
	}
	var parent []string
	for _, tu := range episode {
		r, err := m.Step(ctx, rep.SessionID, sim.StepRequest{Action: json.RawMessage(tu.Action)})
		if err != nil {
			t.Fatal(err)
		}
		parent = append(parent, r.Observation)
	}
	fork, err := m.Fork(ctx, rep.SessionID, sim.ForkRequest{AtTurn: 2})
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.Step(ctx, fork.SessionID, sim.StepRequest{Action: json.RawMessage(episode[2].Action)})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{calls, r.Info.Backend, r.Observation}
	want := []any{len(episode), BackendCache, parent[2]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fork's step (-want +got):\n%s", diff)
	}
	// A control step bypasses the cache; the next plain step catches up.
	if _, err := m.Step(ctx, fork.SessionID, sim.StepRequest{Action: json.RawMessage(`{"arguments":{"query":"rust"},"name":"search"}`), Control: "answer with an error"}); err != nil {
		t.Fatal(err)
	}
	r, err = m.Step(ctx, fork.SessionID, sim.StepRequest{Action: json.RawMessage(`{"arguments":{"query":"zig"},"name":"search"}`)})
	if err != nil || r.Info.Backend != sim.BackendModel || calls != len(episode)+2 {
		t.Fatalf("step after a control step: %+v %v (calls %d)", r, err, calls)
	}
}

// TestResumedSessionHitsTheCache stops a manager mid-session and steps the
// session in a new manager over the same store: the resumed environment
// gets the recorded history at once and must find what was cached.
func TestResumedSessionHitsTheCache(t *testing.T) {
	worlds, err := world.LoadFS(examples.FS, "worlds")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	model := func(context.Context, sim.SessionInfo) (sim.Environment, error) { return countingModel{&calls}, nil }
	lib, st, ctx := New(nil), sim.NewMemStore(), context.Background()
	start := func() *sim.Manager {
		return sim.New(&sim.Options{Store: st, Worlds: worlds, Backends: map[string]sim.BackendFactory{sim.BackendModel: Cache(lib, "wm", model)}, DefaultBackend: sim.BackendModel})
	}
	step := func(m *sim.Manager, id string, tu sim.HistoryTurn) *sim.StepResult {
		t.Helper()
		r, err := m.Step(ctx, id, sim.StepRequest{Action: json.RawMessage(tu.Action)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := start()
	var ids []string
	for range 2 {
		rep, err := first.Create(ctx, sim.CreateRequest{WorldID: testWorld})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rep.SessionID)
	}
	for _, tu := range episode {
		step(first, ids[0], tu)
	}
	for _, tu := range episode[:2] {
		step(first, ids[1], tu)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	second := start()
	t.Cleanup(func() { _ = second.Close(context.Background()) })
	r := step(second, ids[1], episode[2])
	if r.Info.Backend != BackendCache || calls != len(episode) {
		t.Errorf("resumed step answered by %q after %d model calls, want %q after %d", r.Info.Backend, calls, BackendCache, len(episode))
	}
}

func TestCacheHitsOnlyItsOwnWorld(t *testing.T) {
	lib := New(nil)
	recordEpisode(t, lib, "another-search-world", episode[:1])
	a := At{Domain: testDomain, World: testWorld, History: Root(testDomain)}
	if obs, ok := lib.cached(a, episode[0].Action); ok {
		t.Errorf("cache hit %q from another world", obs)
	}
	// Replay still prefers, but does not require, the session's world.
	if m, _ := lib.Lookup(a, episode[0].Action); m.Approximate || m.Observation != episode[0].Observation {
		t.Errorf("replay across worlds: %+v", m)
	}
}

// TestCacheHitsOnlyItsOwnModel: a cache directory shared by two world
// models answers each from its own recordings, also after a reload, while
// transitions recorded without a model (recordings, older cache files)
// serve any model.
func TestCacheHitsOnlyItsOwnModel(t *testing.T) {
	dir := t.TempDir()
	lib := New(nil)
	if err := lib.RecordTo(dir); err != nil {
		t.Fatal(err)
	}
	a := At{Domain: testDomain, World: testWorld, History: Root(testDomain), Model: "model-a"}
	if err := lib.Record(a, episode[0].Action, "answer of a"); err != nil {
		t.Fatal(err)
	}
	if err := lib.Close(); err != nil {
		t.Fatal(err)
	}
	reloaded := New(nil)
	if err := reloaded.LoadDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Library{lib, reloaded} {
		if obs, ok := l.cached(a, episode[0].Action); !ok || obs != "answer of a" {
			t.Errorf("same model: %q %v", obs, ok)
		}
		b := a
		b.Model = "model-b"
		if obs, ok := l.cached(b, episode[0].Action); ok {
			t.Errorf("cache hit %q from another model", obs)
		}
	}
	old := New(nil)
	recordEpisode(t, old, testWorld, episode[:1]) // no model, as recordings are
	a.Model = "any-model"
	if obs, ok := old.cached(a, episode[0].Action); !ok || obs != episode[0].Observation {
		t.Errorf("model-less transition: %q %v, want a hit", obs, ok)
	}
}

func TestBadCacheLinesNameFileAndLine(t *testing.T) {
	good := func() string {
		var b bytes.Buffer
		s := step{parent: Root(testDomain), domain: testDomain, action: "a", observation: "o"}
		if err := s.writeLine(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}()
	tests := []struct {
		name, line string
		badLine    bool // wraps ErrBadLine
	}{
		{"not JSON", "{\"kind\":", false},
		{"unknown kind", `{"kind":"snapshot"}`, true},
		{"missing parent", `{"kind":"transition","domain":"search","action":"a","observation":"o"}`, true},
		{"short parent", `{"kind":"transition","parent":"abcd","domain":"search","action":"a","observation":"o"}`, true},
		{"parent not hex", `{"kind":"transition","parent":"` + strings.Repeat("z", 64) + `","domain":"search","action":"a","observation":"o"}`, true},
		{"unknown domain", strings.Replace(good, `"domain":"search"`, `"domain":"chess"`, 1), true},
		{"missing observation", strings.Replace(good, `,"observation":"o"`, "", 1), true},
		{"trajectory without turns", `{"id":"x","domain":"search","system_prompt":"s","turns":[]}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Blank lines count: the bad line is the fourth.
			err := New(nil).Read(strings.NewReader(good+"\n"+good+tc.line+"\n"), "cache.jsonl")
			var le *trajectory.LineError
			if !errors.As(err, &le) || le.File != "cache.jsonl" || le.Line != 4 {
				t.Fatalf("want a LineError at cache.jsonl:4, got %v", err)
			}
			if errors.Is(err, ErrBadLine) != tc.badLine {
				t.Errorf("errors.Is(%v, ErrBadLine) = %v, want %v", err, !tc.badLine, tc.badLine)
			}
		})
	}
}

func FuzzParseLine(f *testing.F) {
	var b bytes.Buffer
	s := step{parent: Root("mcp").Next("a", "b"), domain: "mcp", world: "w", action: `{"name":"x"}`, observation: "<ok> & done"}
	if err := s.writeLine(&b); err != nil {
		f.Fatal(err)
	}
	f.Add(b.String())
	f.Add(`{"kind":"transition","parent":"` + strings.Repeat("0", 64) + `","domain":"os","action":"","observation":""}`)
	f.Add(`{"id":"b","domain":"mcp","system_prompt":"s","turns":[{"action":"{\"name\":\"x\"}","observation":"y"}],"meta":{"world":"w"}}`)
	f.Add(`{"kind":"transition","parent":null}`)
	f.Add(`{"kind":7}`)
	f.Fuzz(func(t *testing.T, in string) {
		e, err := parseLine([]byte(in))
		if err != nil {
			return
		}
		if (e.traj == nil) == (e.step == nil) {
			t.Fatalf("parsed %q into %+v: want exactly one kind", in, e)
		}
		if e.step == nil {
			return
		}
		// A transition line written back reads the same (JSON strings are
		// UTF-8, so only valid text can round-trip).
		if !utf8.ValidString(e.step.world + e.step.action + e.step.observation) {
			return
		}
		var out bytes.Buffer
		if err := e.step.writeLine(&out); err != nil {
			t.Fatal(err)
		}
		again, err := parseLine(bytes.TrimSuffix(out.Bytes(), []byte("\n")))
		if err != nil {
			t.Fatalf("rewritten line %q: %v", out.String(), err)
		}
		if diff := cmp.Diff(*e.step, *again.step, cmp.AllowUnexported(step{})); diff != "" {
			t.Fatalf("round trip (-first +again):\n%s", diff)
		}
	})
}

// countingFile stands for the cache file: it counts bytes and syncs for
// free, so the benchmark measures the library, not the disk.
type countingFile struct{ n int64 }

func (c *countingFile) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
func (c *countingFile) Sync() error                 { return nil }
func (c *countingFile) Close() error                { return nil }

// screenModel answers step n with screens[n-1].
type screenModel struct{ screens []string }

func (screenModel) Reset(context.Context) (sim.Observation, error) { return sim.Observation{}, nil }
func (screenModel) Close() error                                   { return nil }
func (m screenModel) Step(_ context.Context, in sim.StepInput) (sim.Observation, error) {
	return sim.Observation{Text: m.screens[in.Turn-1]}, nil
}

// BenchmarkCacheStep steps a 200-turn terminal session (screens of about
// 1.6 KB) through a cache: lookup miss, model, record. It reports the mean
// time of a step around turn 10 (turns 5-15) and at the end (turns
// 190-200), their ratio (about 1 when a step's cost does not grow with the
// history), and the bytes the cache file receives per step.
func BenchmarkCacheStep(b *testing.B) {
	const turns = 200
	spec := &world.Spec{Name: "bench", Domain: domain.Terminal}
	ctx := context.Background()
	actions, screens := make([]string, turns), make([]string, turns)
	for i := range turns {
		actions[i] = fmt.Sprintf(`[{"duration":1,"keystrokes":"cat file%d.txt\n"}]`, i+1)
		screens[i] = fmt.Sprintf("turn %d\n%s", i+1, strings.Repeat("root@box:/app# ls -la\n", 70))
	}
	model := func(context.Context, sim.SessionInfo) (sim.Environment, error) { return screenModel{screens}, nil }
	var early, late time.Duration // summed over 11 turns each
	var written int64
	for b.Loop() {
		lib := New(nil)
		file := &countingFile{}
		lib.out = file
		env, err := Cache(lib, "wm", model)(ctx, sim.SessionInfo{Spec: spec})
		if err != nil {
			b.Fatal(err)
		}
		hist := make([]sim.HistoryTurn, 0, turns)
		for turn := 1; turn <= turns; turn++ {
			act := conversation.Action{Text: actions[turn-1]}
			start := time.Now()
			obs, err := env.Step(ctx, sim.StepInput{Turn: turn, Action: act, History: hist})
			took := time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			switch {
			case turn >= 5 && turn <= 15:
				early += took
			case turn >= turns-10:
				late += took
			}
			hist = append(hist, sim.HistoryTurn{Action: act.Text, Observation: obs.Text})
		}
		written += file.n
	}
	b.ReportMetric(float64(early.Nanoseconds())/float64(11*b.N), "ns/step@10")
	b.ReportMetric(float64(late.Nanoseconds())/float64(11*b.N), "ns/step@200")
	b.ReportMetric(float64(late)/float64(early), "ratio")
	b.ReportMetric(float64(written)/float64(b.N*turns), "B/step")
}

// A crash during Record can leave the cache's last line cut short: loading
// skips it with a log line (serve still starts), and recording again cuts
// it off so the next transition starts a line of its own.
func TestTornLastCacheLineIsSkippedAndCut(t *testing.T) {
	dir := t.TempDir()
	rec := New(nil)
	if err := rec.RecordTo(dir); err != nil {
		t.Fatal(err)
	}
	recordEpisode(t, rec, testWorld, episode[:2])
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cache.jsonl")
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(whole, []byte("\n"))
	torn := append(append([]byte(nil), lines[0]...), lines[1][:len(lines[1])/2]...)
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}

	var logged bytes.Buffer
	lib := New(&Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err := lib.LoadDir(dir); err != nil {
		t.Fatalf("a torn last line stopped loading: %v", err)
	}
	if lib.Len() != 1 {
		t.Errorf("loaded %d transitions, want the 1 whole line", lib.Len())
	}
	if !strings.Contains(logged.String(), "torn last line") || !strings.Contains(logged.String(), "cache.jsonl:2") {
		t.Errorf("log does not name the skipped line: %q", logged.String())
	}

	if err := lib.RecordTo(dir); err != nil {
		t.Fatal(err)
	}
	c := NewChain(testDomain, nil)
	a := At{Domain: testDomain, World: testWorld, History: c.At(episode[:1]), Prev: episode[0].Observation}
	if err := lib.Record(a, episode[1].Action, episode[1].Observation); err != nil {
		t.Fatal(err)
	}
	if err := lib.Close(); err != nil {
		t.Fatal(err)
	}
	again := load(t, dir)
	if again.Len() != 2 {
		t.Errorf("reloaded %d transitions after recording past the torn line, want 2", again.Len())
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, whole) {
		t.Errorf("cache file after the cut and one record:\n%s\nwant:\n%s", got, whole)
	}
}

func TestBadLastLineWithItsNewlineIsAnError(t *testing.T) {
	// Only a line without its newline is torn; a whole bad line is damage
	// a user must see.
	err := New(nil).Read(strings.NewReader("{\"kind\":\"snapshot\"}\n"), "cache.jsonl")
	var le *trajectory.LineError
	if !errors.As(err, &le) || le.Line != 1 {
		t.Fatalf("want a LineError at cache.jsonl:1, got %v", err)
	}
}
