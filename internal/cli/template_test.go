package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// addVersion stores a child of v0 whose template for the world's domain
// carries line under "# How to answer".
func addVersion(t *testing.T, dir, domainName, line string) *promptlib.Version {
	t.Helper()
	lib, err := promptlib.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	v0, _ := lib.Get("v0")
	src := strings.Replace(v0.Templates[domainName], "# How to answer\n", "# How to answer\n"+line+"\n", 1)
	if src == v0.Templates[domainName] {
		t.Fatalf("template of %s has no answer section", domainName)
	}
	c, err := v0.With(domain.Domain(domainName), src, "", "test edit")
	if err != nil {
		t.Fatal(err)
	}
	v, err := lib.Add(c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestServeTemplateChangesTheSystemPrompt checks, on the request the fake
// world model receives, that --template and template promote change the
// exact system-prompt bytes serve sends, and that without either serve
// sends the built-in prompt.
func TestServeTemplateChangesTheSystemPrompt(t *testing.T) {
	model := fakellm.New(func(*fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: "<predicted_observation>$ </predicted_observation>"}
	})
	defer model.Close()
	dir := t.TempDir()
	const world = "python-terminal"

	systemSent := func(configure func(*simFlags)) (string, *simulator) {
		t.Helper()
		model.Reset()
		s, srv := startTestServe(t, func(f *simFlags) {
			f.cfg.Model, f.cfg.ModelName = model.URL, "wm"
			configure(f)
		})
		return stepSystemPrompt(t, srv.URL, model, world), s
	}

	builtin, s := systemSent(func(f *simFlags) {})
	spec, ok := s.Manager.World(world)
	if !ok {
		t.Fatalf("no world %s", world)
	}
	want, err := promptlib.Builtin().Render(spec.Domain, sim.Components(spec))
	if err != nil || builtin != want {
		t.Fatalf("without --template serve sent a prompt other than v0's (%v)", err)
	}

	v1 := addVersion(t, dir, string(spec.Domain), "Answer ls with one name a line.")
	got, _ := systemSent(func(f *simFlags) { f.tmpl.dir, f.tmpl.ref = dir, "v1" })
	want, _ = v1.Render(spec.Domain, sim.Components(spec))
	if got != want || got == builtin || !strings.Contains(got, "Answer ls with one name a line.") {
		t.Fatalf("--template v1 sent:\n%s", got)
	}

	// No --template: v0 until v1 is promoted, then v1.
	if got, _ := systemSent(func(f *simFlags) { f.tmpl.dir = dir }); got != builtin {
		t.Fatal("a library with nothing promoted did not serve v0")
	}
	var out bytes.Buffer
	cmd := newTemplateCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"promote", "--template-dir", dir, v1.ID[:8]})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got, _ := systemSent(func(f *simFlags) { f.tmpl.dir = dir }); got != want {
		t.Fatalf("after promote v1 serve sent:\n%s", got)
	}

	_, err = (&templateFlags{dir: dir, ref: "v9"}).version()
	if err == nil || !strings.Contains(err.Error(), "--template") {
		t.Fatalf("unknown version: %v", err)
	}
}

// stepSystemPrompt creates a session of world on the serve at url, steps
// it once, and returns the system message model received last.
func stepSystemPrompt(t *testing.T, url string, model *fakellm.Server, world string) string {
	t.Helper()
	var created struct {
		SessionID string `json:"session_id"`
	}
	if code := postJSON(t, url+"/v1/sessions", map[string]any{"world_id": world}, &created); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	step := map[string]any{"action": []map[string]any{{"keystrokes": "ls\n", "duration": 1}}}
	if code := postJSON(t, url+"/v1/sessions/"+created.SessionID+"/step", step, nil); code != http.StatusOK {
		t.Fatalf("step: %d", code)
	}
	reqs := model.Requests()
	if len(reqs) == 0 || len(reqs[len(reqs)-1].Messages) == 0 || reqs[len(reqs)-1].Messages[0].Role != "system" {
		t.Fatalf("no system message reached the model: %+v", reqs)
	}
	return reqs[len(reqs)-1].Messages[0].Content
}

func TestTemplateCommands(t *testing.T) {
	dir := t.TempDir()
	v1 := addVersion(t, dir, "os", "Keep listings sorted.")
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		cmd := newTemplateCmd()
		cmd.SetOut(&out)
		cmd.SetArgs(append(args, "--template-dir", dir))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
	list := run("list")
	if !strings.Contains(list, "* v0 ") || !strings.Contains(list, "  v1     "+v1.Short()+" parent "+v1.Parent[:12]+"  test edit") {
		t.Fatalf("list:\n%s", list)
	}
	if got := run("show", "v1", "os"); got != v1.Templates["os"] {
		t.Fatalf("show printed %q", got)
	}
	if got := run("diff", "v0", "v1"); !strings.Contains(got, "+Keep listings sorted.\n") {
		t.Fatalf("diff:\n%s", got)
	}
	mixes := dir + "/mixes.yaml"
	if err := os.WriteFile(mixes, []byte("sft:\n  - {version: v1, weight: 2}\ncpt:\n  - {version: v0, weight: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run("mixes", mixes); got != "cpt v0 ("+promptlib.Builtin().Short()+") weight 1\nsft v1 ("+v1.Short()+") weight 2\n" {
		t.Fatalf("mixes:\n%s", got)
	}
}

// TestDataTemplateVersion checks that data expand and export --mode cpt
// render trajectories with components under --template and pin the
// version in every sample and document, and that the version's text is the
// one serve would send.
func TestDataTemplateVersion(t *testing.T) {
	dir := t.TempDir()
	v1 := addVersion(t, dir, "os", "Keep listings sorted.")
	in := writeResearchData(t, dir)                // os trajectories with components only
	out := filepath.Join(t.TempDir(), "sft.jsonl") // not in the library: its .meta.json would be read as a version
	if _, stderr, err := runBenchCLI(t, "data", "expand", "--template", "v1", "--template-dir", dir, in, "-o", out); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 160 {
		t.Fatalf("%d samples", len(lines))
	}
	var sample map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &sample); err != nil {
		t.Fatal(err)
	}
	if sample["template"] != "v1" || sample["template_id"] != v1.ID || !strings.Contains(sample["system"].(string), "Keep listings sorted.") {
		t.Fatalf("sample: template %v id %v", sample["template"], sample["template_id"])
	}
	cpt := filepath.Join(dir, "cpt")
	if _, stderr, err := runBenchCLI(t, "data", "export", "--mode", "cpt", "--template", "v1", "--template-dir", dir, in, "-o", cpt); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	shards, _ := filepath.Glob(filepath.Join(cpt, "*.jsonl*"))
	var all []byte
	for _, p := range shards {
		b, _ := os.ReadFile(p)
		all = append(all, b...)
	}
	if !bytes.Contains(all, []byte(`"template_id":"`+v1.ID+`"`)) || !bytes.Contains(all, []byte("Keep listings sorted.")) {
		t.Fatalf("cpt shards %v do not pin v1", shards)
	}
	if _, _, err := runBenchCLI(t, "data", "expand", "--template", "v1", "--template-dir", dir, "--mixes", "x.yaml", in, "-o", out); err == nil || !strings.Contains(err.Error(), "give one") {
		t.Fatalf("--template with --mixes: %v", err)
	}
}

// TestOneVersionSameBytesInServeBenchData: a version selected in serve,
// bench and data renders the same system-prompt bytes for one
// environment: serve's request to the world model, the request bench sends
// after re-rendering a benchmark row made from a trajectory with the
// world's components (its system_str rendered by v0), and the system
// prompt of that trajectory's samples.
func TestOneVersionSameBytesInServeBenchData(t *testing.T) {
	model := fakellm.New(func(*fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: "<predicted_observation>$ </predicted_observation>"}
	})
	defer model.Close()
	lib := t.TempDir()
	const world = "python-terminal"

	v1 := addVersion(t, lib, "terminal", "Print the prompt after every command.")

	// serve
	s, srv := startTestServe(t, func(f *simFlags) {
		f.cfg.Model, f.cfg.ModelName = model.URL, "wm"
		f.tmpl.dir, f.tmpl.ref = lib, "v1"
	})
	spec, ok := s.Manager.World(world)
	if !ok || spec.Domain != domain.Terminal {
		t.Fatalf("world %s: %v %v", world, ok, spec.Domain)
	}
	served := stepSystemPrompt(t, srv.URL, model, world)
	if !strings.Contains(served, "Print the prompt after every command.") {
		t.Fatalf("serve did not use v1:\n%s", served)
	}

	// data
	dir := t.TempDir()
	comps := sim.Components(spec)
	tr := trajectory.Trajectory{ID: "t1", Domain: string(spec.Domain), Components: &comps,
		Turns: []trajectory.Turn{{Action: `[{"keystrokes": "ls\n", "duration": 1}]`, Observation: "$ ls\nREADME.md\n$ "}}}
	line, _ := json.Marshal(tr)
	trajs := filepath.Join(dir, "trajs.jsonl")
	os.WriteFile(trajs, append(line, '\n'), 0o644)
	samples := filepath.Join(dir, "samples.jsonl")
	if _, stderr, err := runBenchCLI(t, "data", "expand", "--progress=false", "--template", "v1", "--template-dir", lib, trajs, "-o", samples); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var sample struct {
		System     string `json:"system"`
		TemplateID string `json:"template_id"`
	}
	b, _ := os.ReadFile(samples)
	if err := json.Unmarshal(b, &sample); err != nil || sample.TemplateID != v1.ID {
		t.Fatalf("sample: %v %q", err, sample.TemplateID)
	}

	// bench: the row's system_str is v0's; bench re-renders it under v1.
	rows := filepath.Join(dir, "terminal_test.jsonl")
	if _, stderr, err := runBenchCLI(t, "data", "convert", "--progress=false", "--to", "bench", trajs, "-o", rows); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if b, _ := os.ReadFile(rows); !bytes.Contains(b, []byte(`"system_str":`)) || bytes.Contains(b, []byte("Print the prompt after every command.")) {
		t.Fatal("the row's system_str is not v0's")
	}
	model.Reset()
	out := filepath.Join(dir, "run")
	if _, stderr, err := runBenchCLI(t, "bench", "infer", "--data", rows, "--model-url", model.URL, "--model", "wm",
		"--template", "v1", "--template-dir", lib, "--out", out); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	reqs := model.Requests()
	if len(reqs) != 1 || reqs[0].Messages[0].Role != "system" {
		t.Fatalf("bench sent %d requests", len(reqs))
	}
	benched := reqs[0].Messages[0].Content
	if served != sample.System || served != benched {
		t.Fatalf("one version, different bytes:\nserve vs data:\n%s\nserve vs bench:\n%s", cmp.Diff(served, sample.System), cmp.Diff(served, benched))
	}
	if meta, _ := os.ReadFile(filepath.Join(out, "run.json")); !bytes.Contains(meta, []byte(`"id": "`+v1.ID+`"`)) {
		t.Fatalf("run.json does not pin v1:\n%s", meta)
	}
}
