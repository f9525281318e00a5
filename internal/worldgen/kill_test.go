package worldgen

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

const killCount = 24

func killOpts(gen, wm, key string) Options {
	return Options{
		Count:     killCount,
		Generator: worldmodel.New(gen, "gen", &worldmodel.Options{MaxRetries: -1, APIKey: key}), GeneratorModel: "gen",
		WorldModel:  worldmodel.New(wm, "wm", &worldmodel.Options{MaxRetries: -1}),
		Concurrency: 4, Domains: []string{"mcp"}, Seed: 9, Shards: 4,
	}
}

// TestGenerateKilledResumes kills a generating child with SIGKILL once
// some answers are journaled, then resumes in this process: no journaled
// answer is asked for again, every candidate gets exactly one verdict,
// and the library holds each accepted world once.
func TestGenerateKilledResumes(t *testing.T) {
	gen, wm := fakellm.New(benchGenerator(0, 3)), fakellm.New(fakeWorldModel(30*time.Millisecond))
	defer gen.Close()
	defer wm.Close()
	dir := filepath.Join(t.TempDir(), "lib")
	cmd := testkit.Child("TestGenerateChild", "WORLDGEN_CHILD="+dir+"\n"+gen.URL+"\n"+wm.URL)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	answers := filepath.Join(dir, JournalDir, AnswersFile)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(answers)
		if bytes.Count(b, []byte("\n")) >= 6 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait() // out is written until then
			t.Fatalf("the child journaled too little in two minutes:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	b, _ := os.ReadFile(answers)
	journaled := bytes.Count(b, []byte("\n"))
	st, err := Run(context.Background(), dir, killOpts(gen.URL, wm.URL, ""))
	if err != nil {
		t.Fatal(err)
	}
	if st.Candidates != killCount {
		t.Errorf("%d candidates decided, want %d", st.Candidates, killCount)
	}
	// the generator is asked only for what was not journaled (answers in
	// flight at the kill are asked again). The killed child's requests carry
	// its own key: one it sent just before the kill may reach the server
	// after it.
	asked := gen.CountFunc(func(r *fakellm.Request) bool { return r.Header.Get("Authorization") == "Bearer "+killedKey })
	if got, want := gen.Count()-asked, killCount-journaled; got != want {
		t.Errorf("resume asked the generator %d times, want %d (%d journaled of %d asked before the kill)", got, want, journaled, asked)
	}
	v, _ := os.ReadFile(filepath.Join(dir, JournalDir, VerdictsFile))
	seen := map[string]bool{}
	for _, ln := range strings.Split(strings.TrimSpace(string(v)), "\n") {
		var vd verdict
		if err := json.Unmarshal([]byte(ln), &vd); err != nil {
			t.Fatalf("verdict line %q: %v", ln, err)
		}
		if seen[vd.Request] {
			t.Errorf("candidate %d decided twice", vd.I)
		}
		seen[vd.Request] = true
	}
	lib, _ := library.Open(dir)
	names := map[string]int{}
	lib.Worlds(library.Filter{}, func(w *library.WorldEntry) error { names[w.Spec.Name]++; return nil })
	for n, c := range names {
		if c > 1 {
			t.Errorf("world %s stored %d times", n, c)
		}
	}
	if len(names) != st.AcceptedWorlds || st.AcceptedWorlds != killCount {
		t.Errorf("library holds %d worlds, stats say %d accepted of %d", len(names), st.AcceptedWorlds, killCount)
	}
}

// killedKey is the generator API key of the child the test kills.
const killedKey = "killed-child"

// TestGenerateChild is the child TestGenerateKilledResumes kills.
func TestGenerateChild(t *testing.T) {
	v := testkit.ChildEnv(t, "WORLDGEN_CHILD", "TestGenerateKilledResumes")
	p := strings.Split(v, "\n")
	if _, err := Run(context.Background(), p[0], killOpts(p[1], p[2], killedKey)); err != nil {
		t.Fatal(err)
	}
}
