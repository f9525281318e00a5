package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/world"
)

// openEnvFixture is one file of testdata/openenv: the messages one of
// OpenEnv's clients sends, in order, with what its parser reads from each
// reply. Source names the file and commit they were taken from.
type openEnvFixture struct {
	Source    []string          `json:"source"`
	Parses    string            `json:"parses"`
	Cookies   bool              `json:"cookies"`
	Exchanges []openEnvExchange `json:"exchanges"`
	// Production holds the HTTP exchanges of a client's second mode
	// (MCPToolClient's JSON-RPC to POST /mcp).
	Production []openEnvExchange `json:"production"`
}

type openEnvExchange struct {
	Note string `json:"note"`
	// HTTP: Method, Path and Body; WebSocket: Send, one text frame.
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body"`
	Send   string          `json:"send"`
	// Status is the HTTP status wanted; Closes, that the server ends the
	// WebSocket without a reply.
	Status int  `json:"status"`
	Closes bool `json:"closes"`
	// Want maps dotted paths of the reply to their exact JSON values; Has
	// lists paths that must be present (null counts).
	Want map[string]any `json:"want"`
	Has  []string       `json:"has"`
	// Capture names a reply path whose value replaces $SESSION in the
	// exchanges after it.
	Capture string `json:"capture"`
}

// payload is what an exchange sends: $SESSION replaced, and a JSON string
// body sent as its raw text (a body that is not JSON).
func (x openEnvExchange) payload(session string) []byte {
	if x.Send != "" {
		return []byte(strings.ReplaceAll(x.Send, "$SESSION", session))
	}
	var str string
	if json.Unmarshal(x.Body, &str) == nil {
		return []byte(str)
	}
	return bytes.ReplaceAll(x.Body, []byte("$SESSION"), []byte(session))
}

func loadOpenEnvFixture(t *testing.T, name string) openEnvFixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "openenv", name))
	if err != nil {
		t.Fatal(err)
	}
	var f openEnvFixture
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(f.Source) == 0 || len(f.Exchanges) == 0 {
		t.Fatalf("%s: a fixture names its source and has exchanges", name)
	}
	return f
}

// lookup finds a dotted path (numbers index arrays) in a decoded JSON value.
func lookup(v any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[k]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// checkReply compares a reply with an exchange's Want and Has.
func checkReply(t *testing.T, i int, x openEnvExchange, raw []byte) any {
	t.Helper()
	var got any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Errorf("exchange %d (%s): reply %q is not JSON: %v", i, x.Note, raw, err)
		return nil
	}
	for _, p := range x.Has {
		if _, ok := lookup(got, p); !ok {
			t.Errorf("exchange %d (%s): reply has no %s: %s", i, x.Note, p, raw)
		}
	}
	for p, want := range x.Want {
		v, ok := lookup(got, p)
		if !ok {
			t.Errorf("exchange %d (%s): reply has no %s: %s", i, x.Note, p, raw)
			continue
		}
		if d := cmp.Diff(want, v); d != "" {
			t.Errorf("exchange %d (%s): %s (-want +got):\n%s\nreply: %s", i, x.Note, p, d, raw)
		}
	}
	return got
}

// runHTTPExchanges sends a fixture's HTTP exchanges in order and checks
// each reply; it returns the session id of the last successful /reset.
func runHTTPExchanges(t *testing.T, base string, client *http.Client, xs []openEnvExchange) (lastReset string) {
	t.Helper()
	var session string
	for i, x := range xs {
		var body io.Reader
		if x.Body != nil {
			body = bytes.NewReader(x.payload(session))
		}
		req, _ := http.NewRequest(x.Method, base+x.Path, body)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != x.Status {
			t.Fatalf("exchange %d (%s): status %d, want %d: %s", i, x.Note, resp.StatusCode, x.Status, raw)
		}
		got := checkReply(t, i, x, raw)
		if v, ok := lookup(got, x.Capture); ok && x.Capture != "" {
			session, _ = v.(string)
		}
		if v, ok := lookup(got, "observation.session_id"); ok && x.Path == "/reset" && resp.StatusCode == 200 {
			lastReset, _ = v.(string)
		}
	}
	return lastReset
}

// runWSExchanges sends a fixture's WebSocket frames on one connection and
// checks each reply.
func runWSExchanges(t *testing.T, base string, xs []openEnvExchange) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for i, x := range xs {
		if err := c.Write(ctx, websocket.MessageText, x.payload("")); err != nil {
			t.Fatalf("exchange %d (%s): %v", i, x.Note, err)
		}
		_, raw, err := c.Read(ctx)
		if x.Closes {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Fatalf("exchange %d (%s): want a normal close, got %q, %v", i, x.Note, raw, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("exchange %d (%s): %v", i, x.Note, err)
		}
		checkReply(t, i, x, raw)
	}
}

func TestOpenEnvHTTPClientFixture(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	h := newHarness(t, db, nil)
	f := loadOpenEnvFixture(t, "http_client.json")
	client := &http.Client{Timeout: time.Minute}
	if f.Cookies {
		jar, _ := cookiejar.New(nil)
		client.Jar = jar
	}
	lastReset := runHTTPExchanges(t, h.srv.URL, client, f.Exchanges)
	// The extra fields of a reset are the session's labels.
	ro, err := store.OpenReadOnly(db)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rec, _, err := ro.LoadSession(context.Background(), "episode-001")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"episode_id": "episode-001"}, rec.Labels); d != "" {
		t.Errorf("episode-001 labels (-want +got):\n%s", d)
	}
	rec, _, err = ro.LoadSession(context.Background(), lastReset)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"difficulty": "hard"}, rec.Labels); d != "" {
		t.Errorf("labels of the session reset with difficulty (-want +got):\n%s", d)
	}
}

func TestOpenEnvWebSocketClientFixture(t *testing.T) {
	h := newHarness(t, "", nil)
	f := loadOpenEnvFixture(t, "ws_client.json")
	runWSExchanges(t, h.srv.URL, f.Exchanges)
}

// mcpToolsSpec is a small MCP world for OpenEnv's MCP tool client.
const mcpToolsSpec = `
name: tools
domain: mcp
task_description: An MCP server with an echo tool.
action_space:
  - name: echo_message
    description: Echo a message back.
    input_schema:
      type: object
      properties:
        message: {type: string}
      required: [message]
initial_state: "The server is ready."
`

func TestOpenEnvMCPClientFixture(t *testing.T) {
	h := newHarness(t, "", &Options{DefaultWorld: "tools"})
	spec, err := world.Parse([]byte(mcpToolsSpec), "tools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h.m.AddWorld(spec)
	f := loadOpenEnvFixture(t, "mcp_client.json")
	t.Run("simulation", func(t *testing.T) { runWSExchanges(t, h.srv.URL, f.Exchanges) })
	t.Run("production", func(t *testing.T) {
		runHTTPExchanges(t, h.srv.URL, &http.Client{Timeout: time.Minute}, f.Production)
	})
}

// TestOpenEnvHTTPClientsIsolated runs two HTTP clients side by side, each
// with its own cookie jar as OpenEnv's HTTPEnvClient (a requests.Session)
// has, plus a third that keeps no cookies: neither of the first two ever
// steps or reads the other's session, and the third is refused rather
// than given one of theirs.
func TestOpenEnvHTTPClientsIsolated(t *testing.T) {
	h := newHarness(t, "", nil)
	post := func(c *http.Client, path, body string) (int, map[string]any) {
		resp, err := c.Post(h.srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	const steps = 4
	var wg sync.WaitGroup
	for k := range 2 {
		wg.Go(func() {
			jar, _ := cookiejar.New(nil)
			c := &http.Client{Jar: jar, Timeout: time.Minute}
			st, r := post(c, "/reset", fmt.Sprintf(`{"client": "%d"}`, k))
			if st != 200 {
				t.Errorf("client %d: reset %d %v", k, st, r)
				return
			}
			mine, _ := lookup(r, "observation.session_id")
			for n := 1; n <= steps; n++ {
				st, r := post(c, "/step", `{"action": {"action": "[{\"keystrokes\":\"ls\\n\"}]"}}`)
				if st != 200 {
					t.Errorf("client %d: step %d: %d %v", k, n, st, r)
					return
				}
				id, _ := lookup(r, "observation.session_id")
				turn, _ := lookup(r, "observation.turn")
				if id != mine || turn != float64(n) {
					t.Errorf("client %d step %d stepped %v at turn %v, want its own %v at turn %d", k, n, id, turn, mine, n)
				}
			}
			resp, err := c.Get(h.srv.URL + "/state")
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var s map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&s)
			if s["episode_id"] != mine || s["step_count"] != float64(steps) {
				t.Errorf("client %d: state %v, want its own session %v at %d steps", k, s, mine, steps)
			}
		})
	}
	wg.Wait()
	if st, r := post(http.DefaultClient, "/step", `{"action": {"action": "[]"}}`); st != 400 {
		t.Errorf("a step naming no session from a client without the cookie: %d %v, want 400", st, r)
	}
}
