package mcpworld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/perturb"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/world"
)

// fakeSim records what the facade asks of the simulator; its answers come
// from answer (by action).
type fakeSim struct {
	mu     sync.Mutex
	opened []SessionOptions
	steps  []string // "session: action"
	closed []string
	answer func(action string) *StepOutcome
}

func (s *fakeSim) Open(_ context.Context, w string, o SessionOptions) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opened = append(s.opened, o)
	return fmt.Sprintf("%s-%d", w, len(s.opened)), nil
}

func (s *fakeSim) Step(_ context.Context, id, action string) (*StepOutcome, error) {
	s.mu.Lock()
	s.steps = append(s.steps, id+": "+action)
	s.mu.Unlock()
	return s.answer(action), nil
}

func (s *fakeSim) Close(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = append(s.closed, id)
	return nil
}

func (s *fakeSim) snapshot() (steps, closed []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.steps...), append([]string(nil), s.closed...)
}

var trackerSpec = &world.Spec{
	Name: "tracker", Domain: domain.MCP, TaskDescription: "An issue tracker.",
	ActionSpace: world.ActionSpace{Tools: []world.Tool{
		{Name: "get_issue", Description: "Fetch an issue.",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)},
		{Name: "delete_issue", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}}}`)},
	}},
}

func fakeAnswers(action string) *StepOutcome {
	switch {
	case strings.Contains(action, `"delete_issue"`) && strings.Contains(action, `"id":1}`):
		return &StepOutcome{Fault: &perturb.Fault{Kind: perturb.JSONRPCError, RPCCode: -32001, Message: "backend gone"}}
	case strings.Contains(action, `"delete_issue"`) && strings.Contains(action, `"id":2}`):
		return &StepOutcome{Fault: &perturb.Fault{Kind: perturb.HTTPError, HTTPStatus: 429, Message: "Too Many Requests"}}
	case strings.Contains(action, `"delete_issue"`):
		return &StepOutcome{Observation: "Error: issue 3 is locked"}
	}
	return &StepOutcome{Observation: `{"title":"Crash on start"}`}
}

func connectInMemory(t *testing.T, f *Facade, w string) *mcp.ClientSession {
	t.Helper()
	srv, err := f.Server(w, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestFacadeToolsAndCalls(t *testing.T) {
	leaks := testkit.Leaks(t)
	sim := &fakeSim{answer: fakeAnswers}
	f, err := NewFacade(sim, []*world.Spec{trackerSpec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := connectInMemory(t, f, "tracker")
	ctx := context.Background()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	if !cmp.Equal(names, []string{"delete_issue", "get_issue"}) && !cmp.Equal(names, []string{"get_issue", "delete_issue"}) {
		t.Errorf("tools %v", names)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_issue", Arguments: map[string]any{"id": 7}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || mustResult(t, res.StructuredContent) != `{"title":"Crash on start"}` {
		t.Errorf("structured result %s", mustResult(t, res))
	}
	// Schema violation: an MCP validation error, no step.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_issue", Arguments: map[string]any{"id": "seven"}})
	if err != nil || !res.IsError || res.Content[0].(*mcp.TextContent).Text != "MCP error -32602: Input validation error: Invalid arguments for tool get_issue: Invalid input: expected integer, received string at id" {
		t.Errorf("validation: %s %v", mustResult(t, res), err)
	}
	// Direct faults.
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_issue", Arguments: map[string]any{"id": 1}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32001 || rpcErr.Message != "backend gone" {
		t.Errorf("jsonrpc fault: %v", err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_issue", Arguments: map[string]any{"id": 2}})
	if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "HTTP 429 Too Many Requests") {
		t.Errorf("http fault: %s %v", mustResult(t, res), err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_issue", Arguments: map[string]any{"id": 3}})
	if err != nil || !res.IsError {
		t.Errorf("simulated error: %s %v", mustResult(t, res), err)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	steps, closed := sim.snapshot()
	want := []string{
		`tracker-1: {"arguments":{"id":7},"name":"get_issue"}`,
		`tracker-1: {"arguments":{"id":1},"name":"delete_issue"}`,
		`tracker-1: {"arguments":{"id":2},"name":"delete_issue"}`,
		`tracker-1: {"arguments":{"id":3},"name":"delete_issue"}`,
	}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if !cmp.Equal(closed, []string{"tracker-1"}) {
		t.Errorf("closed %v", closed)
	}
	if !cmp.Equal(sim.opened[0].Labels, map[string]string{"transport": "mcp"}) {
		t.Errorf("labels %v", sim.opened[0].Labels)
	}
	leaks.Goroutines(2)
}

func TestFacadeStreamableHTTPSessions(t *testing.T) {
	sim := &fakeSim{answer: fakeAnswers}
	f, err := NewFacade(sim, []*world.Spec{trackerSpec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp/{world}", f.Handler())
	ts := httptest.NewServer(mux)
	defer ts.Close()
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	var sessions []*mcp.ClientSession
	for i := 0; i < 2; i++ {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp/tracker?seed=5", DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, cs)
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_issue", Arguments: map[string]any{"id": i}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, cs := range sessions {
		_ = cs.Close()
	}
	if _, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp/nope", DisableStandaloneSSE: true}, nil); err == nil {
		t.Error("unknown world accepted")
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	steps, closed := sim.snapshot()
	if len(steps) != 2 || !strings.HasPrefix(steps[0], "tracker-1: ") || !strings.HasPrefix(steps[1], "tracker-2: ") {
		t.Errorf("each MCP session should map to its own simulator session: %v", steps)
	}
	if len(closed) != 2 {
		t.Errorf("closed %v", closed)
	}
	if len(sim.opened) != 2 || sim.opened[0].Seed == nil || *sim.opened[0].Seed != 5 {
		t.Errorf("seed from the query not passed: %+v", sim.opened)
	}
}

func TestFacadeDomains(t *testing.T) {
	search := &world.Spec{Name: "web", Domain: domain.Search, TaskDescription: "x", ActionSpace: world.ActionSpace{Description: "search, open_page"}}
	terminal := &world.Spec{Name: "term", Domain: domain.Terminal, TaskDescription: "x", ActionSpace: world.ActionSpace{Description: "keys"}}
	f, err := NewFacade(&fakeSim{answer: fakeAnswers}, []*world.Spec{search}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := connectInMemory(t, f, "web")
	defer cs.Close()
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lt.Tools) != 2 {
		t.Fatalf("search tools %v %v", lt, err)
	}
	if _, err := NewFacade(&fakeSim{}, []*world.Spec{terminal}, nil); !errors.Is(err, ErrNotServable) {
		t.Errorf("terminal world: %v", err)
	}
	if len(DefaultTools(domain.SWE)) != 4 {
		t.Error("swe default tools")
	}
}

// blockingSim is a fakeSim whose Open waits for release, so a test can
// call Close while an open is under way.
type blockingSim struct {
	fakeSim
	entered chan struct{}
	release chan struct{}
}

func (s *blockingSim) Open(ctx context.Context, w string, o SessionOptions) (string, error) {
	close(s.entered)
	<-s.release
	return s.fakeSim.Open(ctx, w, o)
}

// TestFacadeCloseDuringOpen: a session that opens while Close runs is
// waited for and closed, never left open past Close, and later sessions
// are refused.
func TestFacadeCloseDuringOpen(t *testing.T) {
	sim := &blockingSim{fakeSim: fakeSim{answer: fakeAnswers}, entered: make(chan struct{}), release: make(chan struct{})}
	f, err := NewFacade(sim, []*world.Spec{trackerSpec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &binding{f: f, world: f.worlds["tracker"]}
	srv, err := f.Server("tracker", SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ct; _ = ss.Close() })
	opened := make(chan error, 1)
	go func() { _, err := b.session(ctx, ss); opened <- err }()
	<-sim.entered
	closed := make(chan error, 1)
	go func() { closed <- f.Close(ctx) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a session was still opening", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(sim.release)
	if err := <-opened; !errors.Is(err, errFacadeClosed) {
		t.Errorf("open during Close: err = %v, want errFacadeClosed", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, closedIDs := sim.snapshot(); !cmp.Equal(closedIDs, []string{"tracker-1"}) {
		t.Errorf("simulator sessions closed: %v, want the one opened during Close", closedIDs)
	}
	if _, err := (&binding{f: f, world: f.worlds["tracker"]}).session(ctx, ss); !errors.Is(err, errFacadeClosed) {
		t.Errorf("open after Close: err = %v", err)
	}
}
