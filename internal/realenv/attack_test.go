//go:build linux

package realenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/sandbox"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit"
)

// The tests below are the second round's attacks on the task check, run
// for real as an agent would run them. testdata/attack holds what the agent
// writes: a fake tmux server (fake_tmux.py), the script it makes a host
// tmux client exec (evil.sh) and a daemon that attaches with ptrace to any
// process whose command line holds a marker and rewrites its exit status
// to 0 (forge.py). On the sandbox of round one (checks and tmux clients in
// one pid namespace, in the agent's user namespace) the takeover and the
// client's setup made an unsolved task's check pass.

// requireAttackTools skips unless the agent's tools can run: python3 inside
// the sandbox (the system's) and an x86-64 kernel for the forger.
func requireAttackTools(t *testing.T) {
	t.Helper()
	requireSandbox(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testkit.Missing(t, "python3 in /usr/bin (the agent's attack scripts run inside the sandbox)", err, "install python3 (.ci/setup.d does)")
	}
	if runtime.GOARCH != "amd64" {
		t.Skipf("the ptrace forger rewrites x86-64 registers; this is %s", runtime.GOARCH)
	}
}

// attackTerminal starts a terminal whose work dir holds the attack tools
// and a fresh marker, which the task's check carries in its command line.
func attackTerminal(t *testing.T, opts *TerminalOptions) (*Terminal, *Task) {
	t.Helper()
	if opts == nil {
		opts = &TerminalOptions{}
	}
	opts.Seed = filepath.Join("testdata", "attack")
	term, _ := startTerminal(t, opts)
	marker := fmt.Sprintf("check-marker-%d", time.Now().UnixNano())
	if err := os.WriteFile(filepath.Join(term.WorkDirHost(), "marker"), []byte(marker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The check gives the forger two seconds to find it and attach.
	task := &Task{Name: "forge", Instruction: "write 42 to answer.txt", Check: "sleep 2\n: " + marker + "\ntest \"$(cat answer.txt)\" = 42\n"}
	return term, task
}

// takeover is the shell line that moves the real tmux socket aside and
// starts the fake server in its place (mode and arg as fake_tmux.py takes
// them), returning once the fake listens.
func takeover(mode, arg string) string {
	return `mv ` + sandbox.TmuxSock + ` ` + sandbox.TmuxDir + `/real.sock && (setsid -f python3 /app/fake_tmux.py ` + sandbox.TmuxSock + ` ` + mode + ` ` + arg + ` >/dev/null 2>&1 </dev/null) && until [ -S ` + sandbox.TmuxSock + ` ]; do sleep 0.1; done`
}

// forgerLine starts the forger as a daemon; it runs for a minute.
const forgerLine = `setsid -f python3 /app/forge.py /app/marker 60 /app/forge.log >/dev/null 2>&1 </dev/null`

// TestAttacksCannotForgeCheck runs each way of leaving a forger beside the
// check — a daemon of the agent's (setsid, and one started by its tmux
// server), a daemon a plain terminal's setup script left, and a fake tmux
// server that makes the host's tmux clients exec the agent's script — and
// requires an unsolved task's check to fail, and a solved one's to pass,
// with the forger in place. The control run has no attack.
func TestAttacksCannotForgeCheck(t *testing.T) {
	requireAttackTools(t)
	t.Parallel()
	daemons := forgerLine + `; tmux -S ` + sandbox.TmuxSock + ` run-shell -b 'python3 /app/forge.py /app/marker 60 /app/forge.log >/dev/null 2>&1'`
	cases := []struct {
		name  string
		setup string // a client's setup script (plain terminal)
		agent string // typed by the agent before it writes its answer
		shell bool   // the fake server's MSG_SHELL must have run evil.sh
	}{
		{name: "control"},
		{name: "agent daemon", agent: daemons},
		{name: "setup daemon", setup: daemons},
		{name: "socket takeover", agent: takeover("shell", "/app/evil.sh"), shell: true},
	}
	for _, c := range cases {
		for _, answer := range []string{"41", "42"} {
			t.Run(c.name+"/"+answer, func(t *testing.T) {
				t.Parallel()
				term, task := attackTerminal(t, &TerminalOptions{Setup: c.setup})
				line := "echo " + answer + " > answer.txt"
				if c.agent != "" {
					line = c.agent + "; " + line
				}
				agentRun(t, term, line)
				ctx := context.Background()
				// After a takeover every tmux client the host starts meets
				// the fake server: a few more of them, as RunTask makes.
				for range 3 {
					term.Screen(ctx)
				}
				term.WaitIdle(ctx, time.Second)
				check, err := runCheck(ctx, term, task, 30*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if want := answer == "42"; check.Passed != want {
					t.Errorf("check passed = %v with answer %s: %+v", check.Passed, answer, check)
				}
				work := term.WorkDirHost()
				forged, _ := os.ReadFile(filepath.Join(work, "forge.log"))
				if strings.Contains(string(forged), "attached") || strings.Contains(string(forged), "rewrote") {
					t.Errorf("the forger reached the check:\n%s", forged)
				}
				if c.shell {
					if ran, _ := os.ReadFile(filepath.Join(work, "evil.log")); !strings.Contains(string(ran), "ran") {
						t.Errorf("the fake tmux server never made a host tmux client run evil.sh: the attack did not happen")
					}
				}
				if c.agent != "" || c.setup != "" {
					// The forger itself is alive (in the agent's world, or
					// killed with the run that started it).
					t.Logf("forge.log: %q", forged)
				}
			})
		}
	}
}

// TestAttackPtraceOfNamedCheck gives an attacker what no sandbox process
// has — the check's pid in the check's own pid namespace — and the agent's
// exact identity (its user namespace, uid and gid, no capabilities), and
// requires every ptrace attach to the check's processes to be refused.
// This holds without Yama: the check runs in a user namespace of its own,
// and the kernel lets a process trace another of a different user
// namespace only with CAP_SYS_PTRACE there.
func TestAttackPtraceOfNamedCheck(t *testing.T) {
	requireAttackTools(t)
	if os.Geteuid() != 0 {
		t.Skip("entering the sandbox's namespaces from the test needs root")
	}
	t.Parallel()
	term, task := attackTerminal(t, nil)
	marker := strings.TrimSpace(readFile(t, filepath.Join(term.WorkDirHost(), "marker")))
	type result struct {
		check CheckResult
		err   error
	}
	done := make(chan result, 1)
	go func() {
		task.Check = "sleep 15\n: " + marker + "\nexit 1\n"
		c, err := runCheck(context.Background(), term, task, time.Minute)
		done <- result{c, err}
	}()
	checkNS := sandbox.Ino(term.sb.Ns[sandbox.FdCheckUser-3])
	var pids []int // in the check's pid namespace
	var hostPid int
	deadline := time.Now().Add(45 * time.Second)
	for len(pids) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("never found the check's processes (found %v)", pids)
		}
		pids, hostPid = nil, 0
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			p, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if !strings.Contains(string(cmdline), marker) {
				continue
			}
			status, _ := os.ReadFile("/proc/" + e.Name() + "/status")
			var nspid []string
			for _, l := range strings.Split(string(status), "\n") {
				if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
					nspid = strings.Fields(rest)
				}
			}
			// The chain's host-side nsenter and unshare are not in the
			// check's pid namespace (fewer levels); the supervisor (pid 1
			// there) and the check are.
			if len(nspid) < 3 {
				continue
			}
			inner, _ := strconv.Atoi(nspid[len(nspid)-1])
			pids = append(pids, inner)
			if fi, err := os.Stat("/proc/" + e.Name() + "/ns/user"); err == nil && statIno(fi) == checkNS {
				hostPid = p
			}
		}
		if hostPid == 0 {
			pids = nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	uid := "1000"
	script := `import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
print(open("/proc/self/status").read().split("CapEff:")[1].split()[0], flush=True)
for p in sys.argv[1:]:
    r = libc.ptrace(0x4206, int(p), None, None)
    print(p, "attached" if r == 0 else "errno=%d" % ctypes.get_errno(), flush=True)
`
	args := []string{"--user=/proc/self/fd/3", "--pid=/proc/" + strconv.Itoa(hostPid) + "/ns/pid", "-S", uid, "-G", uid, "--",
		"setpriv", "--bounding-set=-all", "--inh-caps=-all", "--", "python3", "-c", script}
	for _, p := range pids {
		args = append(args, strconv.Itoa(p))
	}
	cmd := exec.Command("nsenter", args...)
	cmd.ExtraFiles = []*os.File{term.sb.Ns[sandbox.FdUser-3]}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("attacker: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if lines[0] != "0000000000000000" {
		t.Fatalf("the attacker has capabilities %s: not the agent's identity", lines[0])
	}
	if len(lines) != 1+len(pids) {
		t.Fatalf("attacker output: %q", out)
	}
	for _, l := range lines[1:] {
		if !strings.HasSuffix(l, "errno=1") {
			t.Errorf("ptrace of a check process by the agent's identity: %s (want EPERM)", l)
		}
	}
	r := <-done
	if r.err != nil || r.check.Passed || r.check.ExitCode != 1 {
		t.Errorf("check after the attempts: %+v, %v", r.check, r.err)
	}
}

// TestRealSetupOnlyForPlainTerminals asks for a task's session with a
// client's setup script: refused, naming the field, before anything
// starts.
func TestRealSetupOnlyForPlainTerminals(t *testing.T) {
	task := &Task{Name: "hello", Instruction: "say hello", Check: "true"}
	m := newManager(t, &BackendOptions{Tasks: map[string]*Task{"hello": task}, Terminal: &TerminalOptions{TempDir: t.TempDir()}})
	for _, params := range []string{`{"task":"hello","setup":"id"}`, `{"setup":"id"}`} {
		_, err := m.Create(context.Background(), sim.CreateRequest{World: TaskWorld(task), Params: map[string]json.RawMessage{"real": json.RawMessage(params)}})
		if err == nil || !strings.Contains(err.Error(), "params.real.setup") || !strings.Contains(err.Error(), "plain terminals only") {
			t.Errorf("params.real %s on a task: err = %v", params, err)
		}
	}
	// A plain terminal still takes one: TestRealBackendsThroughSessions.
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func statIno(fi os.FileInfo) uint64 { return fi.Sys().(*syscall.Stat_t).Ino }

// TestSalesReportCheckUnpacksPrivately plays the bundled sales-report task
// with a correct report but an archive that does not hold it, helped by
// what the agent can prepare: copies where the check used to unpack
// (/tmp/check), or an archive of links to the real files. The check must
// fail both ways (it passed the first on round one's check).
func TestSalesReportCheckUnpacksPrivately(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	task, err := LoadTask(filepath.Join(repoRoot(t), "examples", "tasks", "sales-report"))
	if err != nil {
		t.Fatal(err)
	}
	oracle, err := task.Oracle.ActionStrings()
	if err != nil {
		t.Fatal(err)
	}
	tarAt := -1
	for i, a := range oracle {
		if strings.Contains(a, "tar -czf") {
			tarAt = i
		}
	}
	if tarAt < 0 {
		t.Fatal("the oracle no longer makes the archive with tar -czf")
	}
	for name, fake := range map[string]string{
		"pre-seeded": "mkdir -p /tmp/check/report empty && cp report/totals.csv report/top.txt /tmp/check/report/ && tar -czf report.tar.gz empty\n",
		"links":      "mkdir -p x/report && ln -s /app/report/totals.csv /app/report/top.txt x/report/ && tar -czf report.tar.gz -C x report\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			actions := append([]string{}, oracle...)
			actions[tarAt] = keys(fake, 0.5)
			run, err := RunTask(context.Background(), task, actions, &RunOptions{Terminal: &TerminalOptions{TempDir: t.TempDir()}, CheckTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if run.Check.Passed {
				t.Fatalf("an archive without the report passed the check: %+v", run.Check)
			}
		})
	}
}

// TestAttackSilentTmuxServer replaces the tmux server with one that takes
// every connection and never answers: the next step ends the episode (the
// host's client is killed at tmuxTimeout) instead of holding the terminal,
// and Close returns.
func TestAttackSilentTmuxServer(t *testing.T) {
	requireAttackTools(t)
	t.Parallel()
	term, _ := attackTerminal(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*tmuxTimeout)
	defer cancel()
	// The keys reach the real server; the capture after them may meet the
	// silent one already, which ends the episode.
	res, err := term.Step(ctx, keys(takeover("hang", "-")+"\n", 1))
	if err != nil || (res.Terminated && !strings.Contains(res.Error, "killed")) {
		t.Fatalf("step against a silent server: %+v, %v", res, err)
	}
	for !res.Terminated {
		if _, err := term.Screen(ctx); err != nil {
			if !strings.Contains(err.Error(), "killed") {
				t.Fatalf("capture from a silent server: %v", err)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the fake server never came up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { term.Close(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
}

// TestServedTaskRewardUnforgeable serves a task through the session manager
// and takes over the tmux socket before ending the episode: the reward
// (the check's verdict) stays 0 for an unsolved task.
func TestServedTaskRewardUnforgeable(t *testing.T) {
	requireAttackTools(t)
	t.Parallel()
	marker := fmt.Sprintf("served-check-marker-%d", time.Now().UnixNano())
	task := &Task{Name: "served-forge", Instruction: "write 42 to answer.txt", Seed: filepath.Join("testdata", "attack"),
		Setup: "echo " + marker + " > marker", Check: "sleep 2\n: " + marker + "\ntest \"$(cat answer.txt)\" = 42\n"}
	m := newManager(t, &BackendOptions{Tasks: map[string]*Task{task.Name: task}, Terminal: &TerminalOptions{TempDir: t.TempDir()}})
	ctx := context.Background()
	r, err := m.Create(ctx, sim.CreateRequest{World: TaskWorld(task)})
	if err != nil {
		t.Fatal(err)
	}
	// Whichever step first meets the fake server (or the moment without
	// one) may end the episode; the check runs then.
	var res *sim.StepResult
	for _, a := range []string{keys("echo 41 > answer.txt && "+takeover("shell", "/app/evil.sh")+"\n", 1), keys("true\n", 1), "[]"} {
		if res = simStep(t, m, r.SessionID, a); res.Terminated {
			break
		}
	}
	if !res.Terminated || res.Reward != 0 || res.Info.RewardComponents["task_check"] != 0 {
		t.Fatalf("an unsolved served task after a socket takeover: reward %v, %+v", res.Reward, res.Info)
	}
	var check CheckResult
	if err := json.Unmarshal(res.Info.Extra["task_check"], &check); err != nil || check.Passed {
		t.Fatalf("task_check %s: %v", res.Info.Extra["task_check"], err)
	}
}

// TestCheckIgnoresPlantedModules plants what an interpreter started by a
// check would load from the agent's files: json.py in the work dir (Python
// puts the working directory first on its path for -c and -m) and a
// usercustomize.py in ~/.local (run at every start when HOME is the work
// dir), each exiting 0 at once. A check in Python must still fail (both
// passed with the work dir as HOME and no PYTHONSAFEPATH).
func TestCheckIgnoresPlantedModules(t *testing.T) {
	requireAttackTools(t)
	t.Parallel()
	term, _ := startTerminal(t, nil)
	agentRun(t, term, `echo 'import os; os._exit(0)' > /app/json.py && mkdir -p /app/.local/lib/$(python3 -c 'import sys; print("python%d.%d" % sys.version_info[:2])')/site-packages && cp /app/json.py /app/.local/lib/python3*/site-packages/usercustomize.py`)
	for _, check := range []string{
		`python3 -c 'import json, sys; sys.exit(1)'`,
		`cd /tmp && python3 -c 'import sys; sys.exit(1)'`,
	} {
		_, code, err := term.Exec(context.Background(), check)
		if err != nil || code != 1 {
			t.Errorf("check %q: exit %d, %v (want 1: the agent's module ran)", check, code, err)
		}
	}
}
