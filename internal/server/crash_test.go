package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/testkit"
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
	addrFile := testkit.ChildEnv(t, "AGENTWORLD_TEST_SERVE_ADDR", "TestKill9RestartContinuesSession and BenchmarkStepOverhead")
	var serve func(context.Context, net.Listener) error
	switch {
	case os.Getenv("AGENTWORLD_TEST_SERVE_HOP") != "":
		serve = func(ctx context.Context, ln net.Listener) error {
			srv := &http.Server{Handler: nullHop(t, os.Getenv("AGENTWORLD_TEST_SERVE_MODEL"))}
			go func() {
				<-ctx.Done()
				_ = srv.Shutdown(context.Background())
			}()
			return srv.Serve(ln)
		}
	case os.Getenv("AGENTWORLD_TEST_SERVE_APP") != "":
		serve = helperAppServer(t).Serve
	default:
		serve = helperServer(t).Serve
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// AGENTWORLD_TEST_SERVE_CPUPROFILE profiles the process (go test
	// -cpuprofile would profile the benchmark's own process instead): from
	// start to stop, or, when the CPU listener below is asked
	// "?profile=start" and "?profile=stop", only in between, so a
	// benchmark can leave out what it does not measure (opening and
	// closing sessions).
	var profile profileFile
	if path := os.Getenv("AGENTWORLD_TEST_SERVE_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		profile.f = f
		if err := profile.start(); err != nil {
			t.Fatal(err)
		}
		defer func() { profile.stop(); _ = f.Close() }()
	}
	// AGENTWORLD_TEST_SERVE_MEMPROFILE writes what the process allocated
	// when it stops, or, with "?profile=start" and "?profile=stop", what
	// it had allocated at each (PATH.base and PATH: pprof -diff_base
	// PATH.base PATH shows what was allocated in between).
	profile.mem = os.Getenv("AGENTWORLD_TEST_SERVE_MEMPROFILE")
	defer profile.writeAllocs("")
	// A second listener answers this process's CPU time so far, so a
	// benchmark can measure what the server (or the hop) alone spent
	// without counting the load generator or the model.
	cpuLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cpuSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("profile") {
		case "start":
			if err := profile.restart(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		case "stop":
			profile.stop()
		}
		fmt.Fprint(w, int64(testkit.CPUTime()))
	})}
	go func() { _ = cpuSrv.Serve(cpuLn) }()
	defer cpuSrv.Close()
	if err := os.WriteFile(addrFile+".cpu", []byte(cpuLn.Addr().String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(addrFile+".tmp", []byte(ln.Addr().String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(addrFile+".tmp", addrFile); err != nil {
		t.Fatal(err)
	}
	// Serve until killed or stopped, or, as a safety net, for ten minutes
	// (AGENTWORLD_TEST_SERVE_FOR: a longer benchmark's time); the parent
	// kills it when its test ends, so the net is only for an orphan, and
	// must not cut a test that a loaded machine makes slow.
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	limit := 10 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("AGENTWORLD_TEST_SERVE_FOR")); err == nil {
		limit = d
	}
	ctx, cancelT := context.WithTimeout(ctx, limit)
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

// helperAppServer assembles the server as `agentworld serve --model URL
// --model-name wm` does, with serve's defaults: the bundled worlds, the
// replica router over the model client, the step hooks, metrics, an info
// log (to a file here, stderr in serve) and the SQLite store
// AGENTWORLD_TEST_SERVE_DB names (empty: in memory, as with --no-db).
func helperAppServer(t *testing.T) *Server {
	temp := 0.6
	logf, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logf.Close() })
	log := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := app.Config{Model: os.Getenv("AGENTWORLD_TEST_SERVE_MODEL"), ModelName: "wm", DBPath: os.Getenv("AGENTWORLD_TEST_SERVE_DB"),
		ModelTimeout: worldmodel.DefaultTimeout, ModelMaxResponseBytes: worldmodel.DefaultMaxResponseBytes, CountTokens: "estimate",
		MaxTokens: 32768, Temperature: &temp, MaxInFlight: 256, MaxTurns: 200, Logger: log}
	_, s := newAppServer(t, cfg, &Options{Logger: log})
	return s
}

// serveProcess is a TestHelperServeProcess child.
type serveProcess struct {
	cmd *exec.Cmd
	// base is the server's base URL; cpuURL answers the process's CPU time
	// so far in nanoseconds.
	base, cpuURL string
}

// cpu is the process's user+system CPU time so far.
func (p *serveProcess) cpu(t testing.TB) time.Duration {
	resp, err := http.Get(p.cpuURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		t.Fatalf("CPU time of the server process: %q: %v", b, err)
	}
	return time.Duration(ns)
}

// profile asks the process to start its CPU profile afresh ("start") or
// to stop it ("stop"), if it was started with one.
func (p *serveProcess) profile(t testing.TB, what string) {
	resp, err := http.Get(p.cpuURL + "?profile=" + what)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("profile %s: %s", what, resp.Status)
	}
}

// startServeProcess starts TestHelperServeProcess against modelURL (with
// AGENTWORLD_TEST_SERVE_HOP=1 in env, the null hop instead of the server;
// with AGENTWORLD_TEST_SERVE_APP=1, the server as `agentworld serve`
// assembles it) and returns the process with the server's base URL. The
// process is killed at the end of the test if it still runs.
func startServeProcess(t testing.TB, modelURL, dbPath string, env ...string) *serveProcess {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	cmd := testkit.Child("TestHelperServeProcess", "AGENTWORLD_TEST_SERVE_DB="+dbPath, "AGENTWORLD_TEST_SERVE_MODEL="+modelURL, "AGENTWORLD_TEST_SERVE_ADDR="+addrFile)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	testkit.StartChild(t, cmd)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if b, err := os.ReadFile(addrFile); err == nil {
			c, err := os.ReadFile(addrFile + ".cpu")
			if err != nil {
				t.Fatal(err)
			}
			return &serveProcess{cmd: cmd, base: "http://" + string(b), cpuURL: "http://" + string(c)}
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
		p := startServeProcess(t, model.URL(), dbPath)
		return p.cmd, &harness{t: t, model: model, base: p.base}
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

// profileFile is the CPU profile of a helper process, started and stopped
// on request; with no file, both do nothing. mem, when set, is where the
// allocation profile goes.
type profileFile struct {
	mu      sync.Mutex
	f       *os.File
	on      bool
	mem     string
	memDone bool // the allocation profile of a stop is written
}

// writeAllocs writes the allocation profile to mem+suffix, unless a stop
// already wrote it.
func (p *profileFile) writeAllocs(suffix string) {
	if p.mem == "" || p.memDone {
		return
	}
	f, err := os.Create(p.mem + suffix)
	if err != nil {
		return
	}
	_ = pprof.Lookup("allocs").WriteTo(f, 0)
	_ = f.Close()
}

func (p *profileFile) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f == nil || p.on {
		return nil
	}
	if err := pprof.StartCPUProfile(p.f); err != nil {
		return err
	}
	p.on = true
	return nil
}

// restart starts the profile afresh: what was recorded before is dropped.
func (p *profileFile) restart() error {
	p.mu.Lock()
	p.writeAllocs(".base")
	if p.f != nil {
		if p.on {
			pprof.StopCPUProfile()
			p.on = false
		}
		if err := p.f.Truncate(0); err != nil {
			p.mu.Unlock()
			return err
		}
		if _, err := p.f.Seek(0, io.SeekStart); err != nil {
			p.mu.Unlock()
			return err
		}
	}
	p.mu.Unlock()
	return p.start()
}

func (p *profileFile) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeAllocs("")
	p.memDone = true
	if p.on {
		pprof.StopCPUProfile()
		p.on = false
	}
}
