package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/cluster"
	"github.com/agentworld/agentworld/internal/jetstore"
)

// fakeOwners says node "b" (at addr, alive) owns session "x" and a dead
// node owns the real-environment session "real"; this node is "a".
type fakeOwners struct{ addr string }

func (f fakeOwners) Self() string { return "a" }

func (f fakeOwners) Owner(_ context.Context, id string) (jetstore.Lease, error) {
	switch id {
	case "x":
		return jetstore.Lease{Owner: jetstore.Owner{Node: "b", Addr: f.addr, Backend: "model"}, Revision: 1, Alive: true}, nil
	case "real":
		return jetstore.Lease{Owner: jetstore.Owner{Node: "c", Addr: "http://127.0.0.1:1", Backend: "real:terminal"}, Revision: 1}, nil
	}
	return jetstore.Lease{}, nil
}

func (f fakeOwners) Claim(context.Context, string, jetstore.Lease) error { return nil }

func (f fakeOwners) Forget(string) {}

// TestOpenEnvSurfacesRouteToTheOwner: a server whose router says another
// server owns a session serves none of its OpenEnv requests itself (its
// model is never asked): HTTP /step and /state are forwarded, a JSON-RPC
// message on its WebSocket naming the session gets the owner's answer, a
// WebSocket attaching to the session is proxied to the owner; and a real
// environment's session whose node is gone is refused with cannot_move
// on each surface.
func TestOpenEnvSurfacesRouteToTheOwner(t *testing.T) {
	b := newHarness(t, "", nil)
	a := newHarness(t, "", &Options{Sessions: cluster.New(fakeOwners{addr: b.srv.URL}, nil)})
	if code := b.do("POST", "/reset", map[string]any{"episode_id": "x", "world_id": "term"}, nil); code != http.StatusOK {
		t.Fatalf("reset on the owner: %d", code)
	}
	act := json.RawMessage(`[{"keystrokes":"ls\n","duration":0.1}]`)
	var step struct {
		Observation struct {
			Turn int `json:"turn"`
		} `json:"observation"`
	}
	if code := a.do("POST", "/step", map[string]any{"session_id": "x", "turn": 1, "action": act}, &step); code != http.StatusOK || step.Observation.Turn != 1 {
		t.Fatalf("POST /step through the other server: %d %+v", code, step)
	}
	var st struct {
		StepCount int `json:"step_count"`
	}
	if code := a.do("GET", "/state?session_id=x", nil, &st); code != http.StatusOK || st.StepCount != 1 {
		t.Fatalf("GET /state through the other server: %d %+v", code, st)
	}
	rpc := map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": map[string]any{"session_id": "x"}}
	var owners any
	b.do("POST", "/mcp", rpc, &owners)

	ctx := t.Context()
	dial := func() *websocket.Conn {
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(a.srv.URL, "http")+"/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.CloseNow() })
		return c
	}
	type msg struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	talk := func(c *websocket.Conn, typ string, data any) msg {
		t.Helper()
		raw, _ := json.Marshal(data)
		if err := wsjson.Write(ctx, c, msg{Type: typ, Data: raw}); err != nil {
			t.Fatal(err)
		}
		var got msg
		if err := wsjson.Read(ctx, c, &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	c := dial()
	got := talk(c, "mcp", rpc)
	var gotRPC any
	_ = json.Unmarshal(got.Data, &gotRPC)
	if diff := cmp.Diff(owners, gotRPC); got.Type != "mcp" || diff != "" {
		t.Fatalf("JSON-RPC on the other server's WebSocket (-owner's answer +this one):\n%s", diff)
	}
	c = dial()
	if got := talk(c, "reset", map[string]any{"session_id": "x"}); got.Type != "observation" || !strings.Contains(string(got.Data), `"attached":true`) {
		t.Fatalf("attach through the other server: %s %s", got.Type, got.Data)
	}
	if got := talk(c, "step", map[string]any{"action": act}); got.Type != "observation" || !strings.Contains(string(got.Data), `"turn":2`) {
		t.Fatalf("step on the proxied WebSocket: %s %s", got.Type, got.Data)
	}
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	if n := len(a.model.Requests()); n != 0 {
		t.Errorf("the server that owns nothing asked its model %d times", n)
	}
	if n := len(b.model.Requests()); n != 2 {
		t.Errorf("the owner asked its model %d times, want 2 (the two steps)", n)
	}

	// A real environment's session whose node is gone.
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if code := a.do("POST", "/step", map[string]any{"session_id": "real", "action": act}, &e); code != http.StatusConflict || e.Error.Code != "cannot_move" {
		t.Errorf("POST /step of a real session whose node died: %d %+v", code, e)
	}
	if got := talk(dial(), "reset", map[string]any{"session_id": "real"}); got.Type != "error" || !strings.Contains(string(got.Data), `"status":409`) {
		t.Errorf("attach to a real session whose node died: %s %s", got.Type, got.Data)
	}
}
