package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// researchOnSessions runs research run over data (terminal trajectories)
// with a world model that repeats the last screen and an optimizer that
// appends a rule to the template, and returns the report.
func researchOnSessions(t *testing.T, data, out string) string {
	t.Helper()
	wm := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: "<predicted_observation>root@7f3c9e2a1b4d:/app# </predicted_observation>"}
	})
	cur := regexp.MustCompile(`(?s)<current_template>\n(.*)</current_template>`)
	opt := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		m := cur.FindStringSubmatch(r.Messages[len(r.Messages)-1].Content)
		if m == nil {
			return fakellm.Reply{Content: "no template"}
		}
		return fakellm.Reply{Content: "<rationale>add: keep the prompt line</rationale>\n<template>\n" + m[1] + "\nEnd every screen with the prompt line.\n</template>"}
	})
	t.Cleanup(func() { wm.Close(); opt.Close() })
	var stdout, stderr bytes.Buffer
	cmd := newResearchCmd()
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"run", "--data", data, "--domain", "terminal", "--out", out, "--model-url", wm.URL, "--model", "wm",
		"--optimizer-url", opt.URL, "--optimizer-model", "opt", "--judge", "rules", "--iterations", "2", "--minibatch", "3", "--concurrency", "4"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("research run on %s: %v\n%s", data, err, stderr.String())
	}
	return stdout.String()
}

// TestResearchFromServeSessions: sessions stepped through serve, exported
// with `data convert --from sessions --db`, carry their components and
// feed research run; so does the shipped example
// (examples/research/sessions.jsonl, such an export). A session reply
// saved as one JSON document reads as a trajectory too.
func TestResearchFromServeSessions(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "sessions.db")
	_, srv := startTestServe(t, func(f *simFlags) { f.noDB, f.cfg.DBPath = false, db })
	f, err := os.Open("../../examples/recordings/python-terminal.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var recorded [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var tr trajectory.Trajectory
		if err := json.Unmarshal(sc.Bytes(), &tr); err != nil {
			t.Fatal(err)
		}
		var acts []string
		for _, tu := range tr.Turns {
			acts = append(acts, tu.Action)
		}
		recorded = append(recorded, acts)
	}
	f.Close()
	sessions := 0
	var lastID string
	for rep := range 2 {
		for _, acts := range recorded {
			for k := 1; k <= len(acts); k++ {
				var created struct {
					SessionID string `json:"session_id"`
				}
				if code := postJSON(t, srv.URL+"/v1/sessions", map[string]any{"world_id": "python-terminal", "seed": rep*100 + k}, &created); code != 201 {
					t.Fatalf("create: %d", code)
				}
				for _, a := range acts[:k] {
					var step struct {
						Info struct {
							Approximate bool   `json:"approximate"`
							Error       string `json:"error"`
						} `json:"info"`
					}
					if code := postJSON(t, srv.URL+"/v1/sessions/"+created.SessionID+"/step", map[string]any{"action": a}, &step); code != 200 || step.Info.Approximate || step.Info.Error != "" {
						t.Fatalf("step %q: %d %+v", a, code, step)
					}
				}
				sessions++
				lastID = created.SessionID
			}
		}
	}
	exported := filepath.Join(dir, "sessions.jsonl")
	if _, stderr, err := runCLI(t, "data", "convert", "--from", "sessions", "--db", db, "-o", exported); err != nil {
		t.Fatalf("export: %v\n%s", err, stderr)
	}
	b, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != sessions {
		t.Fatalf("exported %d trajectories of %d sessions", len(lines), sessions)
	}
	for _, l := range lines {
		var tr trajectory.Trajectory
		if err := json.Unmarshal([]byte(l), &tr); err != nil || tr.Components == nil || tr.Components.TaskDescription == "" || tr.Source != "session" || len(tr.Turns) == 0 {
			t.Fatalf("exported line without components or turns: %v %.200s", err, l)
		}
	}

	// A session reply saved whole reads as a trajectory; one page of a
	// longer session is refused naming the page.
	reply := filepath.Join(dir, "reply.json")
	resp, err := srvGet(srv.URL + "/v1/sessions/" + lastID)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(reply, resp, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runCLI(t, "data", "validate", reply); err != nil {
		t.Fatalf("a saved session reply: %v\n%s", err, stderr)
	}
	page, err := srvGet(srv.URL + "/v1/sessions/" + lastID + "?limit=1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(reply, page, 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, err := runCLI(t, "data", "validate", reply); err == nil || !strings.Contains(stdout, "page: invalid record: one page of a session (turns 1 to 1 of") {
		t.Fatalf("a page of a session: %v\n%s%s", err, stdout, stderr)
	}

	for name, data := range map[string]string{"exported": exported, "shipped example": "../../examples/research/sessions.jsonl"} {
		report := researchOnSessions(t, data, filepath.Join(dir, "research-"+strings.ReplaceAll(name, " ", "-")))
		if !strings.Contains(report, "research terminal: seed v0") || !(strings.Contains(report, "\nimproved: ") || strings.Contains(report, "\nno significant improvement")) {
			t.Errorf("research on the %s sessions:\n%s", name, report)
		}
	}
}

func srvGet(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
