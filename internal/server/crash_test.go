package server

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// TestHelperServeProcess is the server process that TestKill9Restart
// starts and kills and that BenchmarkStepOverhead steps through; it does
// nothing in a normal run. The environment says where the model is, which
// store to use (AGENTWORLD_TEST_SERVE_DB; empty keeps sessions in memory),
// where to write the listening address, and how long to serve at most.
func TestHelperServeProcess(t *testing.T) {
	addrFile := os.Getenv("AGENTWORLD_TEST_SERVE_ADDR")
	if addrFile == "" {
		t.Skip("helper process of TestKill9RestartContinuesSession and BenchmarkStepOverhead")
	}
	var serve func(context.Context, net.Listener) error
	if os.Getenv("AGENTWORLD_TEST_SERVE_HOP") != "" {
		serve = func(ctx context.Context, ln net.Listener) error {
			srv := &http.Server{Handler: nullHop(t, os.Getenv("AGENTWORLD_TEST_SERVE_MODEL"))}
			go func() {
				<-ctx.Done()
				_ = srv.Shutdown(context.Background())
			}()
			return srv.Serve(ln)
		}
	} else {
		serve = helperServer(t).Serve
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(addrFile+".tmp", []byte(ln.Addr().String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(addrFile+".tmp", addrFile); err != nil {
		t.Fatal(err)
	}
	// Serve until killed or stopped, or, as a safety net, for a minute.
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, time.Minute)
	defer cancelT()
	_ = serve(ctx, ln)
}

// helperServer is the simulator's HTTP API over the term world, with the
// store AGENTWORLD_TEST_SERVE_DB names (empty: in memory).
func helperServer(t *testing.T) *Server {
	spec, err := world.Parse([]byte(termSpec), "term.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var st sim.Store
	if path := os.Getenv("AGENTWORLD_TEST_SERVE_DB"); path != "" {
		db, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		st = db
	}
	c := worldmodel.New(os.Getenv("AGENTWORLD_TEST_SERVE_MODEL"), "wm", &worldmodel.Options{MaxRetries: -1})
	m := sim.New(&sim.Options{Store: st, Worlds: map[string]*world.Spec{"term": spec},
		Backends: map[string]sim.BackendFactory{sim.BackendModel: sim.NewModelBackend(c, nil)}})
	return New(m, nil)
}

// startServeProcess starts TestHelperServeProcess against modelURL (with
// AGENTWORLD_TEST_SERVE_HOP=1 in env, the null hop instead of the server) and
// returns the process and the server's base URL. The process is killed at
// the end of the test if it still runs.
func startServeProcess(t testing.TB, modelURL, dbPath string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServeProcess$")
	cmd.Env = append(os.Environ(), "AGENTWORLD_TEST_SERVE_DB="+dbPath, "AGENTWORLD_TEST_SERVE_MODEL="+modelURL, "AGENTWORLD_TEST_SERVE_ADDR="+addrFile)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(addrFile); err == nil {
			return cmd, "http://" + string(b)
		}
		if time.Now().After(deadline) {
			t.Fatal("server process did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKill9RestartContinuesSession kills the server process with SIGKILL
// while a step is in flight, restarts it on the same database, and
// continues the session: recorded turns are intact, the interrupted turn
// was not recorded and simulates when retried, and the database passes
// SQLite's integrity check.
func TestKill9RestartContinuesSession(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	model := newFakeModel(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "s.db")
	start := func() (*exec.Cmd, *harness) {
		cmd, base := startServeProcess(t, model.URL(), dbPath)
		return cmd, &harness{t: t, model: model, base: base}
	}
	p1, h := start()
	var created sim.Reply
	if st := h.do("POST", "/v1/sessions", `{"world_id":"term"}`, &created); st != 201 {
		t.Fatalf("create: %d", st)
	}
	id := created.SessionID
	for i, a := range []string{`[{"keystrokes":"ls\n"}]`, `[{"keystrokes":"cd src\n"}]`} {
		if st := h.do("POST", "/v1/sessions/"+id+"/step", map[string]any{"action": a, "turn": i + 1}, nil); st != 200 {
			t.Fatalf("step %d: %d", i+1, st)
		}
	}
	// Turn 3 is in flight at the model when the server dies.
	arrived, release := model.Hold()
	errc := make(chan error, 1)
	go func() {
		_, err := http.Post(h.base+"/v1/sessions/"+id+"/step", "application/json", strings.NewReader(`{"action":[{"keystrokes":"cat x\n"}],"turn":3}`))
		errc <- err
	}()
	<-arrived
	if err := p1.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	if err := <-errc; err == nil {
		t.Log("the in-flight request got a reply before the kill")
	}
	release()

	p2, h2 := start()
	var r3 sim.StepResult
	if st := h2.do("POST", "/v1/sessions/"+id+"/step", `{"action":[{"keystrokes":"cat x\n"}],"turn":3}`, &r3); st != 200 || r3.Info.Turn != 3 {
		t.Fatalf("turn 3 after the restart: %d %+v", st, r3)
	}
	var tr trajectory.Trajectory
	if st := h2.do("GET", "/v1/sessions/"+id, nil, &tr); st != 200 || len(tr.Turns) != 3 || tr.Turns[1].Action != `[{"keystrokes":"cd src\n"}]` {
		t.Fatalf("trajectory after the restart: %d %+v", st, tr.Turns)
	}
	reqs := model.Requests()
	last := sim.RenderTranscript(reqs[len(reqs)-1])
	if !strings.HasPrefix(string(last), string(sim.RenderTranscript(reqs[1]))) {
		t.Fatal("the request after the restart does not extend the one before the kill")
	}
	// A second SIGKILL, then the database opens and passes SQLite's check.
	_ = p2.Process.Kill()
	_ = p2.Wait()
	db, err := store.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.IntegrityCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, turns, err := db.LoadSession(context.Background(), id); err != nil || len(turns) != 3 {
		t.Fatalf("after the second kill: %d turns, %v", len(turns), err)
	}
}
