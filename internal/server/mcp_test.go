package server

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/app"
)

// TestServeMountsMCPWorlds: `serve`'s app exposes MCP worlds at
// /mcp/{world} behind the API key, each tools/call is a recorded step, and
// a graceful shutdown is not held up by an open MCP session's stream.
func TestServeMountsMCPWorlds(t *testing.T) {
	a, s := newAppServer(t, app.Config{}, &Options{APIKey: "k3y"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()

	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "serve-test", Version: "1"}, nil)
	if _, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp/perturbed-tracker", DisableStandaloneSSE: true}, nil); err == nil {
		t.Error("connected without the API key")
	}
	authed := &http.Client{Transport: bearer{"k3y"}}
	// Keep the standalone SSE stream open, as long-lived clients do.
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp/perturbed-tracker", HTTPClient: authed}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lt, err := cs.ListTools(cctx, nil)
	if err != nil || len(lt.Tools) != 4 {
		t.Fatalf("tools %v %v", lt, err)
	}
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "get_issue", Arguments: map[string]any{"key": "LL-7"}})
	if err != nil || len(res.Content) == 0 {
		t.Fatalf("call %v %v", res, err)
	}
	// The step is a session step like any other.
	if sessions := a.Manager.Len(); sessions != 1 {
		t.Errorf("%d sessions held, want the MCP session's one", sessions)
	}
	if _, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp/python-terminal", HTTPClient: authed, DisableStandaloneSSE: true}, nil); err == nil || !strings.Contains(err.Error(), "Bad Request") {
		t.Errorf("terminal world over MCP: %v", err)
	}

	// A shutdown held up by the stream waits out the drain timeout (30 s)
	// and Serve then returns its deadline error; the select only bounds a
	// hang.
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve: %v (shutdown held up by the open MCP session?)", err)
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("shutdown held up by the open MCP session")
	}
	_ = cs.Close()
}

type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestBareMCPEndpointPointsToWorlds: an MCP client given /mcp (the MCP
// Inspector posts initialize there) is told where the MCP worlds are, and
// /mcp?world=NAME serves that world as /mcp/NAME does.
func TestBareMCPEndpointPointsToWorlds(t *testing.T) {
	_, s := newAppServer(t, app.Config{}, nil)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	h := &harness{t: t, srv: srv}
	var rep rpcResponse
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"inspector","version":"0.15.0"}}}`
	if st := h.do("POST", "/mcp", init, &rep); st != 200 || rep.Error == nil {
		t.Fatalf("initialize at /mcp: %d %+v", st, rep)
	}
	for _, want := range []string{"/mcp/WORLD", "/mcp?world=issue-tracker-mcp", "perturbed-tracker"} {
		if !strings.Contains(rep.Error.Message, want) {
			t.Errorf("initialize error %q does not mention %s", rep.Error.Message, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "bare-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp?world=perturbed-tracker", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if init := cs.InitializeResult(); init.ServerInfo.Name != "perturbed-tracker" {
		t.Errorf("server %+v", init.ServerInfo)
	}
	if lt, err := cs.ListTools(ctx, nil); err != nil || len(lt.Tools) != 4 {
		t.Fatalf("tools %v %v", lt, err)
	}
}
