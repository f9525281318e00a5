package sim

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// toolSpec is an inline MCP spec with n tools, each padded to about pad
// bytes of description.
func toolSpec(n, pad int) []byte {
	var b strings.Builder
	b.WriteString(`{"domain":"mcp","task_description":"a tracker","action_space":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"tool_%d","description":%q,"input_schema":{"type":"object"}}`, i, strings.Repeat("d", pad))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func TestInlineSpecBounds(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		raw   []byte
		field string // "" accepts
		kind  error
	}{
		{"small spec", Options{}, toolSpec(3, 10), "", nil},
		{"4.5 MB spec over the default byte limit", Options{}, toolSpec(4, 1_150_000), "world", ErrTooLarge},
		{"4.5 MB spec with no byte limit", Options{MaxInlineSpecBytes: -1}, toolSpec(4, 1_150_000), "", nil},
		{"one byte over a set limit", Options{MaxInlineSpecBytes: len(toolSpec(3, 10)) - 1}, toolSpec(3, 10), "world", ErrTooLarge},
		{"exactly a set limit", Options{MaxInlineSpecBytes: len(toolSpec(3, 10))}, toolSpec(3, 10), "", nil},
		{"tools over the default", Options{}, toolSpec(DefaultMaxInlineTools+1, 0), "world.action_space.tools", ErrTooLarge},
		{"tools at a set limit", Options{MaxInlineTools: 3}, toolSpec(3, 0), "", nil},
		{"tools over a set limit", Options{MaxInlineTools: 3}, toolSpec(4, 0), "world.action_space.tools", ErrTooLarge},
		{"tools with no limit", Options{MaxInlineTools: -1}, toolSpec(DefaultMaxInlineTools+1, 0), "", nil},
		{"unknown field", Options{}, []byte(`{"domain":"os","task_description":"t","action_space":"a","colour":1}`), "world.colour", ErrBadRequest},
		{"bad domain", Options{}, []byte(`{"domain":"chess","task_description":"t","action_space":"a"}`), "world.domain", ErrBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(&tc.opts)
			defer m.Close(context.Background())
			spec, err := m.ParseInlineSpec(tc.raw)
			if tc.field == "" {
				if err != nil || spec == nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			fe, ok := fielderr.As(err)
			if !ok || fe.Path != tc.field || !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want a FieldError on %s wrapping %v", err, tc.field, tc.kind)
			}
		})
	}
}

// TestCreateBoundsInlineTools: an inline spec handed to Create in process
// (not through ParseInlineSpec) meets the same tool bound.
func TestCreateBoundsInlineTools(t *testing.T) {
	m := newTestManager(t, &scriptedModel{}, Options{MaxInlineTools: 2})
	spec, err := New(nil).ParseInlineSpec(toolSpec(3, 0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Create(context.Background(), CreateRequest{World: spec})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "world.action_space.tools") {
		t.Fatalf("create with 3 tools over a limit of 2: %v", err)
	}
}

// BenchmarkInlineSessionMemory reports the heap one session of an inline
// spec at the default byte limit holds, and what refusing a 4.5 MB spec
// costs:
//
//	go test ./internal/sim -run '^$' -bench InlineSessionMemory -benchtime 1x
func BenchmarkInlineSessionMemory(b *testing.B) {
	const sessions = 20
	raw := toolSpec(50, DefaultMaxInlineSpecBytes/50-120)
	big := toolSpec(4, 1_150_000)
	var perSession float64
	for b.Loop() {
		m := New(&Options{Backends: map[string]BackendFactory{BackendModel: NewModelBackend(&scriptedModel{}, nil)}})
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range sessions {
			spec, err := m.ParseInlineSpec(raw)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := m.Create(context.Background(), CreateRequest{World: spec}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perSession = float64(after.HeapAlloc-before.HeapAlloc) / sessions
		runtime.KeepAlive(m)
		_ = m.Close(context.Background())
	}
	m := New(nil)
	const refusals = 1000
	start := time.Now()
	for range refusals {
		if _, err := m.ParseInlineSpec(big); !errors.Is(err, ErrTooLarge) {
			b.Fatal(err)
		}
	}
	refuse := time.Since(start) / refusals
	b.ReportMetric(float64(len(raw))/1e6, "spec-MB")
	b.ReportMetric(perSession/1e6, "heap-MB/session")
	b.ReportMetric(perSession/float64(len(raw)), "heap/spec-bytes")
	b.ReportMetric(float64(refuse.Nanoseconds()), "refuse-4.5MB-ns")
}

// TestClientsChooseOnlyWhatTheOperatorAllows creates sessions through the
// real model client against a fake model server: an inline spec's
// extra_body and a session's model name are refused unless the operator
// listed them, an inline spec's max_tokens may only lower the server's
// budget, and what is allowed reaches the upstream request as sent.
func TestClientsChooseOnlyWhatTheOperatorAllows(t *testing.T) {
	srv := fakellm.New(func(*fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: "<predicted_observation>ok</predicted_observation>"}
	})
	defer srv.Close()
	spec := func(extra string) *world.Spec {
		raw := `{"domain":"terminal","task_description":"a shell","action_space":"keys","sampling":{"extra_body":` + extra + `}}`
		s, err := world.Parse([]byte(raw), "inline")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	inlineTokens := func(n int) *world.Spec {
		s := termWorld()
		s.Name = ""
		s.Sampling = &world.Sampling{MaxTokens: n}
		return s
	}
	tests := []struct {
		name  string
		opts  Options
		req   CreateRequest
		field string         // "" creates and steps
		sent  map[string]any // upstream body fields, when created
	}{
		{"extra_body refused by default", Options{}, CreateRequest{World: spec(`{"top_k":5}`)}, "world.sampling.extra_body.top_k", nil},
		{"extra_body key not on the list", Options{ExtraBodyKeys: []string{"top_k"}}, CreateRequest{World: spec(`{"top_k":5,"min_p":0.1}`)}, "world.sampling.extra_body.min_p", nil},
		{"allowed extra_body reaches the request", Options{ExtraBodyKeys: []string{"top_k"}}, CreateRequest{World: spec(`{"top_k":5}`)}, "", map[string]any{"top_k": float64(5), "model": "wm"}},
		{"a model not served", Options{Models: []string{"wm"}}, CreateRequest{WorldID: "t", Model: "gpt-4o"}, "model", nil},
		{"no model choice at all", Options{}, CreateRequest{WorldID: "t", Model: "wm"}, "model", nil},
		{"an allowed model", Options{Models: []string{"wm", "wm-lora"}}, CreateRequest{WorldID: "t", Model: "wm-lora"}, "", map[string]any{"model": "wm-lora"}},
		{"an inline spec may lower max_tokens", Options{}, CreateRequest{World: inlineTokens(100)}, "", map[string]any{"max_tokens": float64(100)}},
		{"an inline spec may not raise max_tokens", Options{}, CreateRequest{World: inlineTokens(1_000_000)}, "", map[string]any{"max_tokens": float64(32768)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv.Reset()
			tc.opts.Worlds = map[string]*world.Spec{"t": termWorld()}
			tc.opts.Backends = map[string]BackendFactory{BackendModel: NewModelBackend(worldmodel.New(srv.URL, "wm", &worldmodel.Options{MaxRetries: -1}), nil)}
			m := New(&tc.opts)
			defer m.Close(context.Background())
			rep, err := m.Create(context.Background(), tc.req)
			if tc.field != "" {
				fe, ok := fielderr.As(err)
				if !ok || fe.Path != tc.field || !errors.Is(err, ErrBadRequest) {
					t.Fatalf("got %v, want a bad request on %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Step(context.Background(), rep.SessionID, ls); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d upstream requests, want 1", len(reqs))
			}
			for k, v := range tc.sent {
				if !cmp.Equal(reqs[0].Body[k], v) {
					t.Errorf("upstream %s = %v, want %v", k, reqs[0].Body[k], v)
				}
			}
		})
	}
}

// TestSessionSizeLimit: the step that takes a session to MaxSessionBytes
// ends its episode as truncated, naming the limit; a spec that alone
// reaches it is refused.
func TestSessionSizeLimit(t *testing.T) {
	obs := strings.Repeat("o", 1000)
	c := &scriptedModel{replies: []worldmodel.Response{{Content: "<predicted_observation>" + obs + "</predicted_observation>", FinishReason: "stop"}}}
	m := newTestManager(t, c, Options{MaxSessionBytes: 12_000})
	ctx := context.Background()
	rep, err := m.Create(ctx, CreateRequest{WorldID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var turns int
	var last *StepResult
	for turns = 1; turns <= 20; turns++ {
		last, err = m.Step(ctx, rep.SessionID, ls)
		if err != nil {
			t.Fatal(err)
		}
		if last.Truncated {
			break
		}
	}
	// Each turn holds the observation about three times over (~3 KB,
	// beside the spec and system prompt): the limit falls at turn 3 or 4.
	if !last.Truncated || turns < 3 || turns > 4 || !strings.Contains(last.Info.EndReason, "session size limit of 12000 bytes") {
		t.Fatalf("after %d turns: truncated %v, end reason %q; want truncation at turn 3 or 4 naming the limit", turns, last.Truncated, last.Info.EndReason)
	}
	if _, err := m.Step(ctx, rep.SessionID, ls); !errors.Is(err, ErrEpisodeOver) {
		t.Errorf("a step after the limit: %v, want ErrEpisodeOver", err)
	}

	big := termWorld()
	big.TaskDescription = strings.Repeat("t", 12_000)
	_, err = m.Create(ctx, CreateRequest{World: big})
	if fe, ok := fielderr.As(err); !ok || fe.Path != "world" || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a spec over the session limit: %v, want ErrTooLarge on world", err)
	}
}

// TestInlineCompiledStateCountsInTheSessionSize: what an inline spec's
// schemas and patterns compile into counts in MaxSessionBytes, at create
// and as the session grows; a loaded world's, shared by its sessions,
// does not.
func TestInlineCompiledStateCountsInTheSessionSize(t *testing.T) {
	props := make([]string, 400)
	for i := range props {
		props[i] = fmt.Sprintf(`"p%d":{"type":"string"}`, i)
	}
	raw := `{"domain":"mcp","task_description":"t","initial_state":"s","action_space":{"tools":[{"name":"get","output_schema":{"type":"object","properties":{` + strings.Join(props, ",") + `}}}]}}`
	spec, err := world.Parse([]byte(raw), "inline")
	if err != nil {
		t.Fatal(err)
	}
	compiled := spec.CompiledBytes()
	if compiled < 400*world.SchemaNodeBytes {
		t.Fatalf("CompiledBytes %d", compiled)
	}
	// Room for the spec's text and prompt, not for what it compiles into.
	m := newTestManager(t, &scriptedModel{}, Options{MaxSessionBytes: compiled / 2})
	if _, err := m.Create(context.Background(), CreateRequest{World: spec}); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "compile") {
		t.Fatalf("create: %v, want ErrTooLarge naming what the spec compiles into", err)
	}
	m = newTestManager(t, &scriptedModel{}, Options{MaxSessionBytes: compiled * 2})
	rep, err := m.Create(context.Background(), CreateRequest{World: spec})
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	s := m.sessions[rep.SessionID]
	m.mu.Unlock()
	s.mu.Lock()
	size := s.sizeLocked()
	s.mu.Unlock()
	if size < compiled {
		t.Fatalf("session size %d leaves out the %d compiled bytes", size, compiled)
	}
	m.AddWorld(spec)
	rep, err = m.Create(context.Background(), CreateRequest{WorldID: spec.Name})
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	s = m.sessions[rep.SessionID]
	m.mu.Unlock()
	if s.compiled != 0 {
		t.Fatalf("a loaded world's session counts %d compiled bytes", s.compiled)
	}
}

// TestForksAndReloadsKeepTheCompiledSize: a fork of an inline session,
// and the session read back from the store, count what its spec
// compiles into like the original.
func TestForksAndReloadsKeepTheCompiledSize(t *testing.T) {
	raw := `{"domain":"mcp","task_description":"t","initial_state":"s","action_space":{"tools":[{"name":"get","output_schema":{"type":"object","properties":{"a":{"type":"string","pattern":"^[a-z]{1,9}$"}}}}]}}`
	spec, err := world.Parse([]byte(raw), "inline")
	if err != nil {
		t.Fatal(err)
	}
	st := NewMemStore()
	m := newTestManager(t, &scriptedModel{}, Options{Store: st})
	ctx := context.Background()
	rep, err := m.Create(ctx, CreateRequest{World: spec})
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.Fork(ctx, rep.SessionID, ForkRequest{})
	if err != nil {
		t.Fatal(err)
	}
	compiled := func(m *Manager, id string) int {
		t.Helper()
		s, err := m.acquire(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		defer m.release(s)
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.compiled
	}
	want := spec.CompiledBytes()
	m2 := newTestManager(t, &scriptedModel{}, Options{Store: st})
	for name, got := range map[string]int{"created": compiled(m, rep.SessionID), "fork": compiled(m, f.SessionID), "reloaded": compiled(m2, rep.SessionID)} {
		if got != want || want == 0 {
			t.Errorf("%s: %d compiled bytes, want %d", name, got, want)
		}
	}
}
