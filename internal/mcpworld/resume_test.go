package mcpworld

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/world"
)

// sharedSim is one simulator two facades share, as two nodes of a cluster
// share a session store: sessions are opened under the id asked for, and
// any facade can resume an open one.
type sharedSim struct{ fakeSim }

func (s *sharedSim) Open(ctx context.Context, w string, o SessionOptions) (string, error) {
	if _, err := s.fakeSim.Open(ctx, w, o); err != nil {
		return "", err
	}
	if o.ID == "" {
		return "", fmt.Errorf("no session id asked for")
	}
	return o.ID, nil
}

func (s *sharedSim) Resume(_ context.Context, id string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.opened {
		if o.ID == id && !slices.Contains(s.closed, id) {
			return "tracker", nil
		}
	}
	return "", fmt.Errorf("no open session %s", id)
}

// hostSwitch sends every request to the server in to.
type hostSwitch struct{ to atomic.Pointer[url.URL] }

func (h *hostSwitch) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Host = h.to.Load().Host
	return http.DefaultTransport.RoundTrip(r)
}

// TestResumeSessionOfAnotherFacade: with SessionIDs, an MCP session begun
// on one facade is continued on another that shares its simulator (a node
// that took the session over): the Mcp-Session-Id is the simulator
// session's id, the second facade resumes it on the client's next request,
// and the client's DELETE ends it there, after which it is unknown.
func TestResumeSessionOfAnotherFacade(t *testing.T) {
	sim := &sharedSim{fakeSim{answer: fakeAnswers}}
	serve := func() *httptest.Server {
		f, err := NewFacade(sim, []*world.Spec{trackerSpec}, &Options{SessionIDs: true})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/mcp/{world}", f.Handler())
		ts := httptest.NewServer(mux)
		t.Cleanup(func() {
			ts.Close()
			_ = f.Close(context.Background())
		})
		return ts
	}
	a, b := serve(), serve()
	sw := &hostSwitch{}
	ua, _ := url.Parse(a.URL)
	sw.to.Store(ua)
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.URL + "/mcp/tracker", HTTPClient: &http.Client{Transport: sw}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_issue", Arguments: map[string]any{"id": 1}}); err != nil {
		t.Fatal(err)
	}
	ub, _ := url.Parse(b.URL)
	sw.to.Store(ub)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_issue", Arguments: map[string]any{"id": 2}}); err != nil {
		t.Fatalf("the call after the move: %v", err)
	}
	steps, _ := sim.snapshot()
	if len(steps) != 2 || !strings.HasPrefix(steps[0], cs.ID()+": ") || !strings.HasPrefix(steps[1], cs.ID()+": ") {
		t.Fatalf("both calls should be steps of simulator session %s: %v", cs.ID(), steps)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	// The DELETE closed the session where it was resumed; it is gone.
	req, _ := http.NewRequest(http.MethodPost, b.URL+"/mcp/tracker", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a request of the ended session answered %d, want 404", resp.StatusCode)
	}
}
