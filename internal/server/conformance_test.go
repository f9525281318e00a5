package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentworld/agentworld/internal/testkit"
)

// TestConformance replays the protocol fixtures under testdata/conformance
// (one txtar file per scenario, go-sdk's mcp/testdata/conformance is the
// model): each "N.request" (METHOD PATH, then the body) is sent to a fresh
// server over the fake world model and its reply must equal "N.response"
// (the status, then the body); "N.send" and "N.recv" are the frames of one
// /ws connection. Replies are normalized before comparing: session ids
// become {{s1}}, {{s2}}… in order of appearance (requests use the same
// names), and measured values (latency_ms, timestamps) become
// "{{measured}}".
// `go test -run Conformance -update` rewrites the expected replies.
//
// The OpenEnv shapes follow meta-pytorch/OpenEnv (now huggingface/OpenEnv):
// src/openenv/core/env_server/http_server.py and types.py, as wire.go
// records.
func TestConformance(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "conformance", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	covered := map[string]bool{}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			ar := testkit.ParseTxtar(raw)
			h := newHarness(t, "", nil)
			c := &conformance{t: t, base: h.srv.URL, ids: map[string]string{}}
			defer c.closeWS()
			for i := 0; i < len(ar.Files); i++ { // -update inserts replies as it goes
				f := ar.Files[i]
				switch {
				case strings.HasSuffix(f.Name, ".request"):
					method, path, got := c.http(f.Data)
					covered[method+" "+routeOf(path)] = true
					c.expect(ar, f.Name, strings.TrimSuffix(f.Name, ".request")+".response", got)
				case strings.HasSuffix(f.Name, ".send"):
					covered["GET /ws"] = true
					got := c.ws(f.Data)
					c.expect(ar, f.Name, strings.TrimSuffix(f.Name, ".send")+".recv", got)
				}
			}
			if testkit.Update() {
				if err := os.WriteFile(file, ar.Format(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	// Every route of the session API, OpenEnv HTTP and /ws has a fixture.
	for _, r := range edgeRoutes {
		if !covered[r.method+" "+routeOf(r.path)] && !strings.HasPrefix(r.path, "/mcp/") {
			t.Errorf("no conformance fixture sends %s %s", r.method, routeOf(r.path))
		}
	}
}

// routeOf turns a request path into its route pattern's shape, with
// session ids and world names as {id} and {name}.
func routeOf(path string) string {
	path, _, _ = strings.Cut(path, "?")
	parts := strings.Split(path, "/")
	if len(parts) >= 4 && parts[1] == "v1" && (parts[2] == "sessions" || parts[2] == "worlds") {
		if parts[2] == "sessions" {
			parts[3] = "{id}"
		} else {
			parts[3] = "{name}"
		}
	}
	return strings.Join(parts, "/")
}

type conformance struct {
	t    *testing.T
	base string
	ids  map[string]string // real id -> placeholder
	conn *websocket.Conn
}

// subst replaces placeholders in a request by the ids they stand for.
func (c *conformance) subst(b []byte) []byte {
	s := string(b)
	for id, ph := range c.ids {
		s = strings.ReplaceAll(s, ph, id)
	}
	return []byte(s)
}

func (c *conformance) http(req []byte) (method, path, got string) {
	c.t.Helper()
	line, body, _ := bytes.Cut(c.subst(req), []byte("\n"))
	method, path, _ = strings.Cut(strings.TrimSpace(string(line)), " ")
	body = bytes.TrimSpace(body)
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	r, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if rd != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return method, c.unsubst(path), strconv.Itoa(resp.StatusCode) + "\n" + c.normalize(out, resp.Header.Get("Content-Type"))
}

// unsubst turns real ids in a path back into placeholders.
func (c *conformance) unsubst(s string) string {
	for id, ph := range c.ids {
		s = strings.ReplaceAll(s, id, ph)
	}
	return s
}

func (c *conformance) ws(frame []byte) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c.conn == nil {
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(c.base, "http")+"/ws", nil)
		if err != nil {
			c.t.Fatal(err)
		}
		c.conn = conn
	}
	if err := c.conn.Write(ctx, websocket.MessageText, bytes.TrimSpace(c.subst(frame))); err != nil {
		c.t.Fatal(err)
	}
	_, out, err := c.conn.Read(ctx)
	if err != nil {
		return "closed: " + websocket.CloseStatus(err).String() + "\n"
	}
	return c.normalize(out, "application/json")
}

func (c *conformance) closeWS() {
	if c.conn != nil {
		_ = c.conn.Close(websocket.StatusNormalClosure, "")
	}
}

// volatile are fields whose values are measured, not determined by the
// requests.
var volatile = map[string]bool{"latency_ms": true, "created_at": true, "updated_at": true}

// normalize renders a reply body for comparison: JSON indented with ids
// and measured values replaced, other text as is (Prometheus metrics as
// their metric names only, since counts and timings vary).
func (c *conformance) normalize(body []byte, ctype string) string {
	if strings.HasPrefix(ctype, "text/plain") && bytes.Contains(body, []byte("# TYPE")) {
		var names []string
		for _, l := range strings.Split(string(body), "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
				names = append(names, f[2]+" "+f[3])
			}
		}
		sort.Strings(names)
		return strings.Join(names, "\n") + "\n"
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return string(body) + "\n"
	}
	v = c.walk("", v)
	out, _ := json.MarshalIndent(v, "", "  ")
	return string(out) + "\n"
}

func (c *conformance) walk(key string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = c.walk(k, e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = c.walk("", e)
		}
		return x
	case string:
		if volatile[key] {
			return "{{measured}}"
		}
		if key == "session_id" || key == "episode_id" || key == "id" && strings.HasPrefix(x, "s_") {
			if _, ok := c.ids[x]; !ok && x != "" {
				c.ids[x] = fmt.Sprintf("{{s%d}}", len(c.ids)+1)
			}
		}
		return c.unsubst(x)
	case float64:
		if volatile[key] {
			return "{{measured}}"
		}
	}
	return v
}

// expect compares got with the archive file named want (or, with -update,
// writes it there).
func (c *conformance) expect(ar *testkit.Archive, sent, want, got string) {
	c.t.Helper()
	for i := range ar.Files {
		if ar.Files[i].Name == want {
			if testkit.Update() {
				ar.Files[i].Data = []byte(got)
				return
			}
			if string(ar.Files[i].Data) != got {
				c.t.Errorf("%s: reply differs from %s\n--- want\n%s--- got\n%s", sent, want, ar.Files[i].Data, got)
			}
			return
		}
	}
	if !testkit.Update() {
		c.t.Errorf("%s: no %s in the fixture", sent, want)
		return
	}
	// Insert the new reply right after the request.
	for i := range ar.Files {
		if ar.Files[i].Name == sent {
			ar.Files = append(ar.Files[:i+1], append([]testkit.File{{Name: want, Data: []byte(got)}}, ar.Files[i+1:]...)...)
			return
		}
	}
}
