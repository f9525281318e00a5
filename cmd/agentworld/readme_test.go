package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/realenv"
)

// readmeSkips are the README commands TestREADMECommands does not run, each
// with the reason; every other command of every sh block runs as written.
// An entry matching no command fails the test, so the list cannot go stale.
var readmeSkips = []struct{ match, why string }{
	// Model servers: a GPU and model weights.
	{"vllm serve ", "starts a vLLM model server"},
	{"sglang.launch_server", "starts an SGLang model server"},
	{"--model http://gpu1:8000/v1", "needs the vLLM/SGLang replicas started above"},
	{"--model-url http://localhost:8000/v1", "needs a served world model"},
	{"bench worker --queue nats://nats1:4222", "needs a NATS server with JetStream; TestBenchQueueSurvivesWorkerKill runs workers against one"},
	{"bench run --queue nats://nats1:4222", "needs a NATS server and the served models; TestBenchQueueSurvivesWorkerKill runs a queued run"},
	{"docker compose -f deploy/compose.yaml", "needs a container engine with compose; go test ./deploy loads the file with compose's own loader"},
	{"bench run --queue nats://localhost:4222", "needs the compose setup above running, and the served models"},
	{"kubectl ", "needs a Kubernetes cluster; go test ./deploy builds the manifests with kustomize and decodes them strictly"},
	{"bench compare runs/aw35b", "compares the run made with the served world model above"},
	{"--teacher-url http://localhost:8000/v1", "needs a teacher world-model server and a judge"},
	{"--generator-url http://localhost:8000/v1", "needs a served generator model; internal/worldgen's tests run generate against a fake one"},
	// Serve started with flags given in prose, not in a block, and a shadow
	// session that steps a world model; internal/cli's real-environment
	// serve tests drive both.
	{`--json '{"world_id": "hello-file"}'`, "needs `serve --real-tasks examples/tasks` from the paragraph above"},
	{`"backend": "model", "shadow": "real"`, "a shadow session steps a world model (--model)"},
	// Names a corpus no example ships yet (added with --mode cpt, 6d8cd28):
	// a first-hour defect left to that command's owner; remove this entry
	// once examples/ has one and the README names it.
	// Servers that run until stopped and are driven by their own tests.
	{"agentworld ui ", "serves until stopped; internal/ui's tests drive every page, in Chromium too (TestBrowser)"},
	// Not usage examples.
	{"bash .ci/run", "is CI itself, which runs this test"},
	{"go test -run '^$' -bench", "benchmarks: minutes of full load, run by hand"},
	// RL trainers: their packages, GPUs and a policy model.
	{"verl.trainer.main_ppo", "starts verl training (verl, GPUs, a policy model)"},
	{"--policy-url http://localhost:8001/v1", "needs the policy server started above (a GPU and a policy model)"},
	{"rollout worker --queue nats://nats1:4222", "serves a NATS server's rollout jobs until stopped; internal/cli's TestRolloutQueueWorkerKilled runs three workers"},
	{"openrlhf.cli.train_ppo_ray", "starts OpenRLHF training (OpenRLHF, Ray, GPUs, a policy model)"},
	{"swift rlhf ", "starts ms-swift GRPO training (ms-swift, GPUs, a policy model)"},
}

// readmeSandbox are commands that start the bubblewrap sandbox; they are
// skipped, saying why, where it cannot start (as the realenv tests are).
var readmeSandbox = []string{"realenv terminal", "--closed-loop"}

// serveAddr is where the README's examples expect `agentworld serve`.
const serveAddr = "127.0.0.1:8080"

// TestREADMECommands runs every command of the sh blocks of README.md and
// of every page of the manual (docs/*.md) that needs no model server,
// exactly as written: a first hour on a fresh machine. The binary is
// installed once with `go install` into a GOBIN first on PATH, as the
// README's first command does; then each page runs in its own fresh copy of
// the repository (its tracked files) with a fresh HOME and cache dir, so a
// reader can start from any page and sessions start from an empty database.
// Consecutive commands of a block run as one bash script (set -e,
// pipefail), so shell variables carry over as they do for a reader pasting
// the block. `agentworld serve` is started in the background (a trailing &
// or not), probed at /health until it answers, and stopped (SIGTERM, then
// SIGKILL) before the next one starts and at the end of its page; the
// commands that talk to it run while it is up. GOFLAGS=-race builds the
// binary with the flags of `go test -race`, so CI compiles the dependencies
// once for both.
func TestREADMECommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary for every README command; skipped under -short")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(repo, "README.md")}, pages...)
	env := readmeEnv(t)
	install := exec.Command("go", "install", "./cmd/agentworld")
	install.Dir, install.Env = repo, env
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/agentworld: %v\n%s", err, out)
	}
	sandboxErr := realenv.ProbeSandbox()
	portErr := portFree(serveAddr)

	used := make([]bool, len(readmeSkips))
	total := 0
	for _, page := range pages {
		rel, _ := filepath.Rel(repo, page)
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		blocks := shBlocks(string(md))
		total += len(blocks)
		if len(blocks) == 0 {
			continue
		}
		t.Run(rel, func(t *testing.T) {
			work := t.TempDir()
			copyTracked(t, repo, work)
			r := &readmeRunner{t: t, page: rel, dir: work, env: pageEnv(t, env)}
			defer r.stopServe()
			for bi, block := range blocks {
				var script []string
				flush := func() {
					if len(script) > 0 {
						r.script(bi, script)
						script = nil
					}
				}
				for _, c := range block {
					if strings.Contains(c, "go run ./cmd/agentworld") {
						// Relinks on every command (minutes on a loaded
						// machine; a stdio client's server times out).
						t.Errorf("block %d: %s: use the installed agentworld, not go run ./cmd/agentworld", bi+1, c)
						continue
					}
					if i := skipOf(c); i >= 0 {
						used[i] = true
						t.Logf("block %d: skipped (%s): %s", bi+1, readmeSkips[i].why, c)
						continue
					}
					if why := needsAbsent(c, sandboxErr, portErr); why != "" {
						t.Logf("block %d: skipped (%s): %s", bi+1, why, c)
						continue
					}
					if isServe(c) {
						flush()
						if err := r.startServe(bi, c); err != nil {
							t.Fatal(err)
						}
						continue
					}
					script = append(script, c)
				}
				flush()
			}
		})
	}
	if total < 25 {
		t.Fatalf("found %d sh blocks in README.md and docs/; the parser is broken", total)
	}
	for i, u := range used {
		if !u {
			t.Errorf("skip entry %q matches no command of README.md or docs/; remove it", readmeSkips[i].match)
		}
	}
}

// shBlocks returns the commands of every ```sh block: lines joined across
// trailing backslashes, blank and comment-only lines dropped.
func shBlocks(md string) [][]string {
	var blocks [][]string
	var cur []string
	in := false
	pending := ""
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.TrimSpace(line) == "```sh":
			in, cur = true, nil
			continue
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, cur)
			continue
		case !in:
			continue
		}
		if strings.HasSuffix(line, "\\") {
			pending += line + "\n"
			continue
		}
		line = pending + line
		pending = ""
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		cur = append(cur, line)
	}
	return blocks
}

func skipOf(c string) int {
	for i, s := range readmeSkips {
		if strings.Contains(c, s.match) {
			return i
		}
	}
	return -1
}

// needsAbsent names what a command needs that this machine lacks, or "".
func needsAbsent(c string, sandboxErr, portErr error) string {
	for _, s := range readmeSandbox {
		if strings.Contains(c, s) && sandboxErr != nil {
			return "the sandbox cannot start here: " + sandboxErr.Error()
		}
	}
	if portErr != nil && ((isServe(c) && serveAddrOf(c) == serveAddr) || strings.Contains(c, "localhost:8080") || strings.Contains(c, serveAddr)) {
		return "port 8080, where the examples expect serve, is taken: " + portErr.Error()
	}
	return ""
}

// isServe reports a command that starts one of agentworld's HTTP servers:
// the simulator (`serve`) or the reward server (`reward serve`).
func isServe(c string) bool {
	f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(c), "&"))
	for i := 0; i+1 < len(f); i++ {
		if f[i] != "agentworld" && f[i] != "./cmd/agentworld" {
			continue
		}
		if f[i+1] == "serve" || (f[i+1] == "reward" && i+2 < len(f) && f[i+2] == "serve") {
			return true
		}
	}
	return false
}

// rewardServeAddr is `agentworld reward serve`'s default address.
const rewardServeAddr = "127.0.0.1:8090"

// serveAddrOf is where a server command listens: its --addr, else its
// command's default.
func serveAddrOf(c string) string {
	f := strings.Fields(c)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "--addr" {
			return f[i+1]
		}
	}
	if strings.Contains(c, "reward serve") {
		return rewardServeAddr
	}
	return serveAddr
}

func portFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}

// readmeEnv is the environment of the commands: GOBIN first on PATH and
// this machine's Go caches ([pageEnv] adds a page's own HOME).
func readmeEnv(t *testing.T) []string {
	goenv := func(k string) string {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		return strings.TrimSpace(string(out))
	}
	bin := filepath.Join(t.TempDir(), "bin")
	env := os.Environ()
	return append(env,
		"GOBIN="+bin, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GOCACHE="+goenv("GOCACHE"), "GOMODCACHE="+goenv("GOMODCACHE"), "GOPATH="+goenv("GOPATH"),
		"GOFLAGS=-race")
}

// pageEnv is env with a fresh HOME and user cache dir for one page.
func pageEnv(t *testing.T, env []string) []string {
	home := t.TempDir()
	return append(slices.Clip(env), "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
}

// copyTracked copies the repository's tracked files into dst, and links the
// installed npm packages (ignored by git; .ci/setup.d installs them).
func copyTracked(t *testing.T, repo, dst string) {
	out, err := exec.Command("git", "-C", repo, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(repo, rel)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the work tree, or not a file
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	nm := filepath.Join(repo, "tools", "npm", "node_modules")
	if _, err := os.Stat(nm); err == nil {
		if err := os.Symlink(nm, filepath.Join(dst, "tools", "npm", "node_modules")); err != nil {
			t.Fatal(err)
		}
	}
}

// readmeRunner runs README commands in one directory and owns the
// background server.
type readmeRunner struct {
	t *testing.T
	// page is the file the commands come from, relative to the repository.
	page  string
	dir   string
	env   []string
	serve *exec.Cmd
	// exited receives the server's Wait result.
	exited chan error
	// portWait is how long startServe waits for a server's port taken by
	// another process to be free; 0 means five minutes (a hang guard).
	portWait time.Duration
	// log is the file the server writes its output to (the server's own
	// descriptor: nothing of this process writes it while a report reads
	// it), "" before the first server.
	log string
}

// script runs consecutive commands of block bi as one bash script.
func (r *readmeRunner) script(bi int, cmds []string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src := "set -eo pipefail\n" + strings.Join(cmds, "\n") + "\n"
	cmd := exec.CommandContext(ctx, "bash", "-c", src)
	cmd.Dir, cmd.Env = r.dir, r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if err != nil {
		serveLog := ""
		if r.log != "" {
			serveLog = "\nserve's output:\n" + r.serveOutput(2000)
		}
		r.t.Errorf("%s block %d failed (%v):\n%s\noutput:\n%s%s", r.page, bi+1, err, src, tail(out.String(), 4000), serveLog)
		return
	}
	r.t.Logf("block %d: ran %d command(s) in %s", bi+1, len(cmds), time.Since(start).Round(time.Millisecond))
}

// startServe stops the running server, starts c in the background and waits
// until /health answers from it. Another process on c's port would answer
// /health in its place (two checkouts running this test at once), so the
// port must be free before c starts, and the listener that answers must be
// c's: a process of its group where /proc can tell, else one still running.
func (r *readmeRunner) startServe(bi int, c string) error {
	r.stopServe()
	addr := serveAddrOf(c)
	// Another process on the port (another checkout's run of this test,
	// whose server holds it for one page) is waited out, for portWait.
	wait := r.portWait
	if wait == 0 {
		wait = 5 * time.Minute
	}
	for wait := time.Now().Add(wait); ; time.Sleep(200 * time.Millisecond) {
		err := portFree(addr)
		if err == nil {
			break
		}
		if time.Now().After(wait) {
			return fmt.Errorf("block %d: %s: port %s is taken by another process before the server starts, so /health would not test this one: %v", bi+1, c, addr, err)
		}
	}
	cmd := exec.Command("bash", "-c", "exec "+strings.TrimSuffix(strings.TrimSpace(c), "&"))
	cmd.Dir, cmd.Env = r.dir, r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.log = filepath.Join(r.t.TempDir(), "serve.log")
	out, err := os.Create(r.log)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Start()
	out.Close() // the server has its own descriptor
	if err != nil {
		return fmt.Errorf("block %d: %s: %v", bi+1, c, err)
	}
	r.serve = cmd
	exited := make(chan error, 1)
	r.exited = exited
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(4 * time.Minute) // a cold `go run` compiles first
	var last error
	for {
		select {
		case err := <-exited:
			r.serve = nil
			return fmt.Errorf("block %d: %s exited before serving (%v; last probe: %v):\n%s", bi+1, c, err, last, r.serveOutput(4000))
		default:
		}
		resp, err := http.Get("http://" + addr + "/health")
		last = err
		if err == nil {
			resp.Body.Close()
			last = fmt.Errorf("/health answered %s", resp.Status)
			if resp.StatusCode == http.StatusOK {
				// While c still compiles or starts, whatever took the
				// port since the check above answers; c then fails to
				// bind and exits, reported above.
				owned, err := listensInGroup(addr, cmd.Process.Pid)
				if err != nil { // no /proc: at least c must still run
					owned = len(exited) == 0
				}
				if owned {
					r.t.Logf("block %d: %s is serving", bi+1, c)
					return nil
				}
				last = fmt.Errorf("/health on port %s answered by a process outside the server's group", addr)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("block %d: %s did not answer /health: %v\n%s", bi+1, c, last, r.serveOutput(4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// serveOutput is the last n bytes of what the server wrote.
func (r *readmeRunner) serveOutput(n int) string {
	b, err := os.ReadFile(r.log)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), n)
}

// listensInGroup reports whether a process of process group pgid holds a
// listening TCP socket on addr's port, from Linux's /proc (an error where
// it cannot tell).
func listensInGroup(addr string, pgid int) (bool, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return false, err
	}
	// /proc/net/tcp{,6}: "sl local_address rem_address st … inode", the
	// address as HEXIP:HEXPORT, state 0A a listener.
	suffix := fmt.Sprintf(":%04X", p)
	sockets := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) > 9 && strings.HasSuffix(fs[1], suffix) && fs[3] == "0A" {
				sockets["socket:["+fs[9]+"]"] = true
			}
		}
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return false, err
	}
	for _, d := range procs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue // gone since the listing
		}
		// "pid (comm) state ppid pgrp …": comm may hold spaces and ")".
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fs := strings.Fields(string(stat[i+1:]))
		if len(fs) < 3 || fs[2] != strconv.Itoa(pgid) {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", d.Name(), "fd"))
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join("/proc", d.Name(), "fd", fd.Name())); err == nil && sockets[l] {
				return true, nil
			}
		}
	}
	return false, nil
}

// stopServe stops the background server: SIGTERM (it drains), then SIGKILL.
func (r *readmeRunner) stopServe() {
	if r.serve == nil {
		return
	}
	pid := r.serve.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case err := <-r.exited:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			r.t.Errorf("serve: %v", err)
		}
	case <-time.After(2 * time.Minute): // its drain takes 30 s at most: a hang guard
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-r.exited
		r.t.Errorf("serve did not stop within two minutes of SIGTERM:\n%s", r.serveOutput(2000))
	}
	r.serve = nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// healthHelperEnv makes the test binary, started by a test below, serve
// /health at the --addr after its "--" until it is killed.
const healthHelperEnv = "AGENTWORLD_README_HEALTH_HELPER"

func TestReadmeHealthHelper(t *testing.T) {
	if os.Getenv(healthHelperEnv) == "" {
		t.Skip("the server the startServe tests start; not a test of its own")
	}
	args := flag.Args()
	if len(args) != 2 || args[0] != "--addr" {
		t.Fatalf("want -- --addr HOST:PORT, got %q", args)
	}
	t.Fatal(http.ListenAndServe(args[1], http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})))
}

// TestStartServeChecksItsServer: startServe accepts a server that answers
// /health itself, and refuses a port that another process holds (whose
// /health would answer in the started server's place), naming the port.
func TestStartServeChecksItsServer(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &readmeRunner{t: t, dir: t.TempDir(), env: append(os.Environ(), healthHelperEnv+"=1")}
	defer r.stopServe()
	serve := func(addr string) string {
		return self + " -test.run=^TestReadmeHealthHelper$ -- --addr " + addr
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := l.Addr().String()
	l.Close()
	if err := r.startServe(0, serve(free)); err != nil {
		t.Fatalf("the helper server on a free port: %v", err)
	}
	if owned, err := listensInGroup(free, r.serve.Process.Pid); err == nil && !owned {
		t.Errorf("/proc does not show the started server listening on %s", free)
	}
	r.stopServe()

	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer other.Close()
	taken := other.Listener.Addr().String()
	r.portWait = time.Nanosecond // the port stays taken: no need to wait it out
	err = r.startServe(1, serve(taken))
	if err == nil {
		t.Fatalf("startServe accepted %s, where another process answers /health", taken)
	}
	if _, port, _ := net.SplitHostPort(taken); !strings.Contains(err.Error(), "port "+taken) || !strings.Contains(err.Error(), port) {
		t.Errorf("the error does not name port %s: %v", taken, err)
	}
	if r.serve != nil {
		t.Error("startServe started a server on a taken port")
	}
}

// TestListensInGroup: a listener of this test's process is found in its
// process group and not in another group.
func TestListensInGroup(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skipf("no /proc here (%v): startServe falls back to the server still running", err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	ours, err := syscall.Getpgid(0)
	if err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "30")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	for _, tc := range []struct {
		pgid int
		want bool
	}{{ours, true}, {sleeper.Process.Pid, false}} {
		got, err := listensInGroup(addr, tc.pgid)
		if err != nil || got != tc.want {
			t.Errorf("listensInGroup(%s, group %d) = %v, %v; want %v", addr, tc.pgid, got, err, tc.want)
		}
	}
}
