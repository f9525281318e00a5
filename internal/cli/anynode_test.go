package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
)

// anyNodeSessions is how many OpenEnv sessions TestAnyNodeServesEverySurface
// steps; enough that a ring placement differing from node 0's would move
// some of them.
const anyNodeSessions = 24

// TestAnyNodeServesEverySurface starts three nodes (embedded NATS each, as
// TestClusterSurvivesNodeKill does) over two model replicas, each a fake
// server counting the requests of every session. Node 0 is given replica
// b only, so its placements are not the ones the other nodes' rings would
// make (as under its own loads). Sessions begun on node 0 are used through
// the other nodes: OpenEnv HTTP /step and /state (forwarded), a WebSocket
// attaching to one (proxied to node 0), OpenEnv's JSON-RPC POST /mcp
// (forwarded: the same answer as node 0's own) and an MCP facade session
// (its Mcp-Session-Id routes to node 0), and JSON-RPC over a WebSocket
// naming node 0's session. Then node 0 is killed while idle,
// and every session is stepped again on the others, over HTTP, over a
// WebSocket attach and with MCP tool calls, once its lease runs out: each takes the next turn
// with its recorded answers (every transcript whole) and every model
// request of a session, before and after the takeover, reached the same
// replica.
func TestAnyNodeServesEverySurface(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	turnOf := regexp.MustCompile(`echo s(\d+) t(\d+)`)
	var mu sync.Mutex
	bySession := map[int]map[string]int{} // session → replica → requests
	fake := func(name string) *fakellm.Server {
		f := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
			m := turnOf.FindAllStringSubmatch(r.Messages[len(r.Messages)-1].Content, -1)
			if len(m) == 0 { // an MCP tool call
				return fakellm.Reply{Content: `{"issues": []}`}
			}
			s, _ := strconv.Atoi(m[len(m)-1][1])
			mu.Lock()
			if bySession[s] == nil {
				bySession[s] = map[string]int{}
			}
			bySession[s][name]++
			mu.Unlock()
			return fakellm.Reply{Content: fmt.Sprintf("out s%s t%s\n", m[len(m)-1][1], m[len(m)-1][2])}
		})
		t.Cleanup(f.Close)
		return f
	}
	fa, fb := fake("a"), fake("b")

	nodes := startCluster(ctx, t, time.Second, func(i int) ([]string, []string) {
		if i == 0 {
			return []string{"--model", fb.URL}, nil
		}
		return []string{"--model", fa.URL, "--replica", fb.URL}, nil
	})
	h := &http.Client{Timeout: 30 * time.Second}

	// OpenEnv sessions begun on node 0, stepped on nodes 1 and 2.
	id := func(s int) string { return fmt.Sprintf("oe-%d", s) }
	for s := range anyNodeSessions {
		if _, err := anyNodeDo(ctx, h, nodes[0], "POST", "/reset", map[string]any{"episode_id": id(s), "world_id": "python-terminal"}); err != nil {
			t.Fatal(err)
		}
		for turn := 1; turn <= 2; turn++ {
			if err := openEnvStep(ctx, h, nodes[1+turn%2], id(s), s, turn); err != nil {
				t.Fatal(err)
			}
		}
		out, err := anyNodeDo(ctx, h, nodes[2], "GET", "/state?session_id="+id(s), nil)
		if err != nil || !strings.Contains(string(out), `"step_count":2`) {
			t.Fatalf("GET /state of %s on node 2: %s, %v", id(s), out, err)
		}
	}
	// A WebSocket on node 1 attaching to a session of node 0: proxied.
	if err := wsAttachStep(ctx, nodes[1], id(0), 0, 3); err != nil {
		t.Fatal(err)
	}
	// OpenEnv's JSON-RPC on node 2 naming node 0's session: node 0's answer.
	rpc := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": map[string]any{"session_id": id(1)}}
	here, err := anyNodeDo(ctx, h, nodes[0], "POST", "/mcp", rpc)
	if err != nil {
		t.Fatal(err)
	}
	there, err := anyNodeDo(ctx, h, nodes[2], "POST", "/mcp", rpc)
	if err != nil || !bytes.Equal(here, there) {
		t.Fatalf("POST /mcp on node 2 answered %s (%v), node 0 itself %s", there, err, here)
	}
	// The same over a WebSocket on node 2 (a JSON-RPC message naming a
	// session that is not the connection's): node 0's answer too.
	if got, err := wsRPC(ctx, nodes[2], rpc); err != nil || !jsonEqual(got, here) {
		t.Fatalf("JSON-RPC over the WebSocket on node 2 answered %s (%v), node 0 itself %s", got, err, here)
	}
	// An MCP facade session begun on node 0, called through nodes 1 and 2.
	mcpID, err := mcpInitialize(ctx, h, nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	mcpCalls := func(rpcID int) {
		t.Helper()
		for i, n := range nodes[1:] {
			if err := mcpCall(ctx, h, n, mcpID, rpcID+i); err != nil {
				t.Fatalf("through node %d: %v", i+1, err)
			}
		}
	}
	mcpCalls(10)

	// Node 0 dies with no request in flight: every session it owns
	// continues on the others after its lease.
	_ = nodes[0].cmd.Process.Kill()
	_, _ = nodes[0].cmd.Process.Wait()
	start := time.Now()
	for s := 1; s < anyNodeSessions; s++ {
		if err := openEnvStep(ctx, h, nodes[1+s%2], id(s), s, 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := wsAttachStep(ctx, nodes[2], id(0), 0, 4); err != nil {
		t.Fatal(err)
	}
	mcpCalls(20) // the MCP session, resumed by the node that took it over
	t.Logf("every session stepped on after node 0's death within %v", time.Since(start).Round(time.Millisecond))
	for s := range anyNodeSessions {
		out, err := anyNodeDo(ctx, h, nodes[1], "GET", "/v1/sessions/"+id(s), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := 3
		if s == 0 {
			want = 4
		}
		for turn := 1; turn <= want; turn++ {
			if !strings.Contains(string(out), fmt.Sprintf("out s%d t%d", s, turn)) {
				t.Fatalf("session %s lacks turn %d's answer: %s", id(s), turn, out)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for s := range anyNodeSessions {
		if len(bySession[s]) != 1 {
			t.Errorf("session %s's model requests reached replicas %v: not one", id(s), bySession[s])
		}
	}
}

// startCluster starts three serve processes (TestHelperClusterNode), each
// with an embedded NATS server, clustered on loopback with the given node
// lease; node(i) gives node i's further flags (its model) and environment.
// It waits until every node is healthy; a failed test logs the end of
// every node's log.
func startCluster(ctx context.Context, t *testing.T, lease time.Duration, node func(int) (args, env []string)) []*clusterNode {
	t.Helper()
	return startEmbedded(ctx, t, 3, lease, node)
}

// startEmbedded is startCluster with n nodes, whose routes name every
// node (its own too, as the docs ask) and whose replicas are serve's
// default.
func startEmbedded(ctx context.Context, t *testing.T, n int, lease time.Duration, node func(int) (args, env []string)) []*clusterNode {
	t.Helper()
	ports := natstest.FreePorts(t, 2*n)
	httpPorts, routePorts := ports[:n], ports[n:]
	var routes []string
	for _, p := range routePorts {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(p))
	}
	return startNodes(ctx, t, httpPorts, lease, func(i int, dir string) []string {
		return []string{"--nats-listen", fmt.Sprintf("127.0.0.1:%d", routePorts[i]), "--nats-routes", strings.Join(routes, ","),
			"--nats-store", filepath.Join(dir, fmt.Sprintf("nats%d", i))}
	}, node)
}

// startNodes starts one serve process (TestHelperClusterNode) per HTTP
// port, node i named n<i>, with the given node lease; store(i, dir) gives
// node i's flags for where it keeps sessions (dir is a temporary
// directory of the test), node(i) its further flags (its model) and
// environment. It waits until every node is healthy; a failed test logs
// the end of every node's log.
func startNodes(ctx context.Context, t *testing.T, httpPorts []int, lease time.Duration, store func(i int, dir string) []string, node func(int) (args, env []string)) []*clusterNode {
	t.Helper()
	dir := t.TempDir()
	nodes := make([]*clusterNode, len(httpPorts))
	for i := range nodes {
		n := &clusterNode{url: fmt.Sprintf("http://127.0.0.1:%d", httpPorts[i]), log: filepath.Join(dir, fmt.Sprintf("node%d.log", i))}
		extra, env := node(i)
		args := append([]string{"serve",
			"--addr", fmt.Sprintf("127.0.0.1:%d", httpPorts[i]), "--node", fmt.Sprintf("n%d", i),
			"--lease", lease.String(), "--model-name", "m", "--log-level", "warn",
		}, store(i, dir)...)
		a, _ := json.Marshal(append(args, extra...))
		n.cmd = testkit.Child("TestHelperClusterNode", append([]string{"AGENTWORLD_TEST_CLUSTER_NODE=" + string(a)}, env...)...)
		f, err := os.Create(n.log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		n.cmd.Stdout, n.cmd.Stderr = f, f
		testkit.StartChild(t, n.cmd)
		nodes[i] = n
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, n := range nodes {
				b, _ := os.ReadFile(n.log)
				t.Logf("node %d log (last 3000 bytes):\n%s", i, b[max(0, len(b)-3000):])
			}
		}
	})
	c := &clusterClient{nodes: nodes, http: &http.Client{Timeout: 10 * time.Second}}
	for i, n := range nodes {
		if err := c.waitHealthy(ctx, n); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	return nodes
}

// anyNodeDo sends a request to node n, retrying (for up to a minute) while
// it answers 503 (a session's owner died and its lease has not yet run
// out, or a stream is electing a leader) or 504 (a load or an append
// outran the request while a stream's leader moved; the steps name their
// turn, so a retry is safe).
func anyNodeDo(ctx context.Context, h *http.Client, n *clusterNode, method, path string, body any) ([]byte, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequestWithContext(ctx, method, n.url+path, rd)
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s %s%s: %w", method, n.url, path, err)
		}
		out, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		switch {
		case err != nil:
			return nil, err
		case (resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout) && time.Now().Before(deadline):
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond): // a retry's pause, not a wait for an event
			}
			continue
		case resp.StatusCode/100 != 2:
			return nil, fmt.Errorf("%s %s%s: %d %s", method, n.url, path, resp.StatusCode, out)
		}
		return out, nil
	}
}

func anyNodeAction(s, turn int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`[{"keystrokes":"echo s%d t%d\n","duration":0.1}]`, s, turn))
}

// openEnvStep takes turn of session s (id) with OpenEnv's HTTP /step on n.
func openEnvStep(ctx context.Context, h *http.Client, n *clusterNode, id string, s, turn int) error {
	out, err := anyNodeDo(ctx, h, n, "POST", "/step", map[string]any{"session_id": id, "turn": turn, "action": anyNodeAction(s, turn)})
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("out s%d t%d", s, turn); !strings.Contains(string(out), want) {
		return fmt.Errorf("POST /step of %s turn %d on %s answered %s, want %q", id, turn, n.url, out, want)
	}
	return nil
}

// wsAttachStep opens OpenEnv's WebSocket on n, attaches to session id and
// takes turn with it. An attach or a step answered 503 or 504 (the
// owner's lease has not yet run out, a stream electing a leader) is tried
// again on a new connection, for up to a minute.
func wsAttachStep(ctx context.Context, n *clusterNode, id string, s, turn int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		retry, err := wsAttachStepOnce(ctx, n, id, s, turn)
		if !retry || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // a retry's pause
		}
	}
}

func wsAttachStepOnce(ctx context.Context, n *clusterNode, id string, s, turn int) (retry bool, err error) {
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(n.url, "http")+"/ws", nil)
	if err != nil {
		return false, err
	}
	defer c.CloseNow()
	type msg struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	talk := func(m msg) (msg, error) {
		if err := wsjson.Write(ctx, c, m); err != nil {
			return msg{}, err
		}
		var got msg
		return got, wsjson.Read(ctx, c, &got)
	}
	got, err := talk(msg{Type: "reset", Data: json.RawMessage(fmt.Sprintf(`{"session_id":%q}`, id))})
	switch {
	case err != nil:
		return false, fmt.Errorf("attach to %s on %s: %w", id, n.url, err)
	case got.Type == "error" && (strings.Contains(string(got.Data), `"status":503`) || strings.Contains(string(got.Data), `"status":504`)):
		return true, fmt.Errorf("attach to %s on %s: %s", id, n.url, got.Data)
	case got.Type != "observation" || !strings.Contains(string(got.Data), `"attached":true`):
		return false, fmt.Errorf("attach to %s on %s answered %s %s", id, n.url, got.Type, got.Data)
	}
	step, _ := json.Marshal(map[string]any{"action": anyNodeAction(s, turn)})
	got, err = talk(msg{Type: "step", Data: step})
	if err != nil {
		return false, fmt.Errorf("step %s on %s: %w", id, n.url, err)
	}
	if got.Type == "error" && (strings.Contains(string(got.Data), `"status":503`) || strings.Contains(string(got.Data), `"status":504`)) {
		// not recorded (the store electing a leader, the session moved):
		// the same turn again is safe, as for an HTTP step
		return true, fmt.Errorf("step %s on %s: %s", id, n.url, got.Data)
	}
	if want := fmt.Sprintf("out s%d t%d", s, turn); got.Type != "observation" || !strings.Contains(string(got.Data), want) {
		return false, fmt.Errorf("step %s turn %d over the WebSocket on %s answered %s %s, want %q", id, turn, n.url, got.Type, got.Data, want)
	}
	return false, c.Close(websocket.StatusNormalClosure, "")
}

// mcpPost sends one JSON-RPC message of MCP's streamable HTTP transport to
// the issue tracker's facade on n, in session sid ("" for initialize).
func mcpPost(ctx context.Context, h *http.Client, n *clusterNode, sid string, body any) (string, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", n.url+"/mcp/issue-tracker-mcp", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := h.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("MCP POST to %s: %d %s", n.url, resp.StatusCode, out)
	}
	if sid == "" {
		sid = resp.Header.Get("Mcp-Session-Id")
	}
	return sid + "\n" + string(out), err
}

// mcpInitialize begins an MCP session on n and returns its id.
func mcpInitialize(ctx context.Context, h *http.Client, n *clusterNode) (string, error) {
	out, err := mcpPost(ctx, h, n, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	if err != nil {
		return "", err
	}
	sid, _, _ := strings.Cut(out, "\n")
	if sid == "" {
		return "", fmt.Errorf("initialize answered no session id: %s", out)
	}
	_, err = mcpPost(ctx, h, n, sid, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return sid, err
}

// mcpCall calls a tool in MCP session sid through node n, retrying (for up
// to a minute) while n answers 503 or 504, as anyNodeDo does.
func mcpCall(ctx context.Context, h *http.Client, n *clusterNode, sid string, rpcID int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := mcpPost(ctx, h, n, sid, map[string]any{"jsonrpc": "2.0", "id": rpcID, "method": "tools/call",
			"params": map[string]any{"name": "list_issues", "arguments": map[string]any{}}})
		if err != nil && (strings.Contains(err.Error(), ": 503 ") || strings.Contains(err.Error(), ": 504 ")) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond): // a retry's pause
			}
			continue
		}
		if err != nil || !strings.Contains(out, `"result"`) || strings.Contains(out, `"error"`) {
			return fmt.Errorf("MCP tools/call in session %s: %s, %v", sid, out, err)
		}
		return nil
	}
}

// wsRPC sends one OpenEnv "mcp" message on a new WebSocket to n and
// returns the data of its answer.
func wsRPC(ctx context.Context, n *clusterNode, rpc any) ([]byte, error) {
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(n.url, "http")+"/ws", nil)
	if err != nil {
		return nil, err
	}
	defer c.CloseNow()
	data, _ := json.Marshal(rpc)
	if err := wsjson.Write(ctx, c, map[string]any{"type": "mcp", "data": json.RawMessage(data)}); err != nil {
		return nil, err
	}
	var got struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := wsjson.Read(ctx, c, &got); err != nil {
		return nil, err
	}
	if got.Type != "mcp" {
		return nil, fmt.Errorf("answered %s %s", got.Type, got.Data)
	}
	return got.Data, c.Close(websocket.StatusNormalClosure, "")
}

// jsonEqual says whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && cmp.Equal(x, y)
}
