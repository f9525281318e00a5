package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// TestFictionalWorldEndToEnd runs the bundled quillfern-search world on
// serve's app with a fake world model: session A's observation invents an
// employee, session B's prompt receives that fact, B's observation then
// contradicts it, and `world check` on serve's database reports it.
func TestFictionalWorldEndToEnd(t *testing.T) {
	model := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		last := r.Messages[len(r.Messages)-1].Content
		obs := `{"results":[{"id":"emp-9","name":"Oona Pale","title":"Head of Optics","url":"https://quillfern.example/team/oona"}]}`
		if strings.Contains(last, "session B") {
			obs = "Employee ID: emp-9\nName: Oona Pale\nTitle: Janitor"
		}
		return fakellm.Reply{Content: "<predicted_observation>" + obs + "</predicted_observation>", FinishReason: "stop"}
	})
	defer model.Close()
	dbPath := filepath.Join(t.TempDir(), "sessions.db")
	var f simFlags
	f.cfg = app.Config{Model: model.URL, ModelName: "fake", DBPath: dbPath, MaxTokens: 256}
	sim, err := f.serve(&cobra.Command{})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close(context.Background())
	ts := httptest.NewServer(sim.Server.Handler())
	defer ts.Close()
	post := func(path string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(ts.URL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, raw)
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return out
	}
	a := post("/v1/sessions", map[string]any{"world_id": "quillfern-search"})["session_id"].(string)
	b := post("/v1/sessions", map[string]any{"world_id": "quillfern-search"})["session_id"].(string)
	post("/v1/sessions/"+a+"/step", map[string]any{"action": map[string]any{"name": "search", "arguments": map[string]any{"query": "quillfern optics, session A"}}})
	post("/v1/sessions/"+b+"/step", map[string]any{"action": map[string]any{"name": "search", "arguments": map[string]any{"query": "quillfern staff, session B"}}})

	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if !strings.Contains(reqs[0].Messages[0].Content, "Quillfern Instruments") {
		t.Error("the spec's facts are not in the system prompt")
	}
	bLast := reqs[1].Messages[len(reqs[1].Messages)-1].Content
	for _, want := range []string{"emp-9", "title: Head of Optics"} {
		if !strings.Contains(bLast, want) {
			t.Errorf("session B's prompt lacks %q invented in session A:\n%s", want, bLast)
		}
	}
	if err := sim.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCLI(t, "world", "check", "quillfern-search", "--db", dbPath)
	if !errors.Is(err, errContradictions) || !strings.Contains(out, `emp-9.title: "Head of Optics" (session `+a+` turn 1) vs "Janitor" (session `+b+` turn 1)`) {
		t.Fatalf("world check: %v\n%s\n%s", err, out, stderr)
	}
}
