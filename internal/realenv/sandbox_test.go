package realenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/mcpclient"
	"github.com/agentworld/agentworld/internal/sandbox"
	"github.com/agentworld/agentworld/internal/testkit"
)

// The tests below run the attacks of an agent inside the sandbox, as the
// probe that found them did: typed into the agent's shell, with this
// process as root where CI runs it so.

// agentRun types a one-line script into the agent's shell and
// waits until it has run: a command appended to its line writes "done" to
// /app/.agent-done. It returns the contents of /app/result.txt, where the
// scripts put what they saw.
func agentRun(t *testing.T, term *Terminal, script string) string {
	t.Helper()
	work := term.WorkDirHost()
	os.Remove(filepath.Join(work, ".agent-done"))
	os.Remove(filepath.Join(work, "result.txt"))
	step(t, term, keys(script+"; echo done > /app/.agent-done\n", 0.2))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, err := os.ReadFile(filepath.Join(work, ".agent-done")); err == nil && string(b) == "done\n" {
			break
		}
		if time.Now().After(deadline) {
			screen, _ := term.Screen(context.Background())
			t.Fatalf("agent script did not finish; screen:\n%s", screen)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(filepath.Join(work, "result.txt"))
	return string(b)
}

func TestSandboxDropsCapabilitiesAndRoot(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	probes := []string{"/opt/agentworld-probe", "/usr/agentworld-probe", "/etc/agentworld-probe"}
	for _, p := range probes {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("%s exists before the test", p)
		}
	}
	term, _ := startTerminal(t, nil)
	got := agentRun(t, term, `{ grep -E '^Cap(Eff|Prm|Amb)' /proc/self/status; id -u; id -un; `+
		`for d in /opt /usr /etc; do mount -o remount,bind,rw $d 2>/dev/null && echo REMOUNTED $d; (echo x > $d/agentworld-probe) 2>/dev/null && echo WROTE $d; done; `+
		`cat /etc/shadow >/dev/null 2>&1 && echo READ-SHADOW; cat /etc/gshadow >/dev/null 2>&1 && echo READ-GSHADOW; `+
		`unshare -r true 2>/dev/null && echo NEW-USERNS; `+
		`ln -sfn /tmp /dev/fd 2>/dev/null && echo REPLACED-DEVFD; `+
		`(echo 1 > /proc/sys/kernel/hostname) 2>/dev/null && echo WROTE-PROC; } > /app/result.txt 2>&1`)
	want := "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapAmb:\t0000000000000000\n1000\nagent\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("inside the sandbox (-want +got):\n%s", diff)
	}
	for _, p := range probes {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s was written on the host", p)
		}
	}
	// The work dir is the sandbox user's: what the agent made is owned by
	// the host's nobody when this process is root, never by root.
	fi, err := os.Stat(filepath.Join(term.WorkDirHost(), "result.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; os.Geteuid() == 0 && uid != sandbox.HostNobody {
		t.Errorf("a file the agent wrote belongs to host uid %d, want %d", uid, sandbox.HostNobody)
	}
}

func TestSandboxRootOptionHasNoCapabilities(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	term, first := startTerminal(t, &TerminalOptions{Root: true})
	if first != "root@sandbox:/app#" {
		t.Fatalf("first screen = %q", first)
	}
	got := agentRun(t, term, `{ id -u; grep -E '^CapEff' /proc/self/status; mount -o remount,bind,rw /usr 2>/dev/null && echo REMOUNTED; (touch /usr/agentworld-probe) 2>/dev/null && echo WROTE; } > /app/result.txt 2>&1`)
	if got != "0\nCapEff:\t0000000000000000\n" {
		t.Errorf("root inside the sandbox:\n%s", got)
	}
	if _, err := os.Stat("/usr/agentworld-probe"); err == nil {
		os.Remove("/usr/agentworld-probe")
		t.Error("root inside the sandbox wrote /usr on the host")
	}
}

// TestSandboxTmuxSocketAttacks points the sandbox's tmux socket at a host
// tmux server of the test's own, and installs tmux hooks that would make a
// host tmux client write a host file: actions must not reach the host
// server, closing the session must not kill it, and no host file appears.
func TestSandboxTmuxSocketAttacks(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	host := t.TempDir()
	hostSock := filepath.Join(host, "victim.sock")
	typed := filepath.Join(host, "typed")
	hostTmux := func(args ...string) (string, error) {
		cmd := exec.Command("tmux", append([]string{"-S", hostSock, "-f", "/dev/null"}, args...)...)
		cmd.Env = append(os.Environ(), "TMUX=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := hostTmux("new-session", "-d", "-s", "victim", "cat > "+typed); err != nil {
		t.Fatalf("host tmux: %v: %s", err, out)
	}
	t.Cleanup(func() { hostTmux("kill-server") })
	pwned := filepath.Join(host, "pwned")

	// Hooks first: were the host's tmux client the one capturing the pane,
	// it would run save-buffer itself, writing pwned on the host. (Inside,
	// the hook fails, which may end the episode: the agent's own doing.)
	term, _ := startTerminal(t, nil)
	agentRun(t, term, fmt.Sprintf(`tmux -S %[1]s set-buffer -b x pwned; tmux -S %[1]s set-hook -g after-capture-pane 'save-buffer -b x %[2]s'; tmux -S %[1]s set-hook -g after-send-keys 'save-buffer -b x %[2]s'`, sandbox.TmuxSock, pwned))
	term.Step(context.Background(), keys("echo still-here\n", 0.5))
	term.Screen(context.Background())
	term.Close()
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("a tmux hook set inside the sandbox wrote a host file")
	}
	// Then the socket: replace it with a symlink to the host server's.
	term, _ = startTerminal(t, nil)
	step(t, term, keys(fmt.Sprintf("ln -sf %s %s.new && mv -f %s.new %s\n", hostSock, sandbox.TmuxSock, sandbox.TmuxSock, sandbox.TmuxSock), 1))
	for range 3 {
		res, err := term.Step(context.Background(), keys("echo typed-into-the-host\n", 0.2))
		if err != nil || res.Terminated {
			break
		}
	}
	term.Close()
	time.Sleep(200 * time.Millisecond)
	if out, err := hostTmux("has-session", "-t", "victim"); err != nil {
		t.Fatalf("closing the sandbox killed the host tmux server: %v: %s", err, out)
	}
	screen, _ := hostTmux("capture-pane", "-p", "-t", "victim")
	b, _ := os.ReadFile(typed)
	if strings.Contains(screen, "typed-into") || len(b) > 0 {
		t.Fatalf("keys reached the host tmux server: screen %q, typed %q", screen, b)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("a tmux hook set inside the sandbox wrote a host file")
	}
}

// TestSandboxCheckChannel attacks the task check: forged results and
// symlinks where command files used to be, a process that kills or
// watches checks, a FIFO that hangs the check, and a check that leaves a
// process holding its output. The check must stay correct and its timeout
// must hold.
func TestSandboxCheckChannel(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host-secret-0600"), 0o600); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("unchanged"), 0o644); err != nil {
		t.Fatal(err)
	}
	term, _ := startTerminal(t, nil)
	// Everything the old command-file channel allowed, and a watcher that
	// kills anything that looks like a check and records what it saw.
	got := agentRun(t, term, fmt.Sprintf(`{ for n in 1 2 3 4 5 6 7 8 9; do for x in sh out rc; do ln -sf %[1]s /run/agentworld/exec-$n.$x && echo LINKED; done; (echo 0 > /run/agentworld/exec-$n.rc) && echo FORGED; mkfifo /run/agentworld/exec-$n.out && echo FIFO; done; ln -sf %[2]s /app/leak; } 2>/dev/null > /app/result.txt`, victim, secret))
	agentRun(t, term, `setsid -f bash -c 'while :; do ps -eo pid=,args= | grep -v grep | grep -e check-marker -e "bash -c" >> /tmp/seen; pkill -f check-marker; sleep 0.05; done' >/dev/null 2>&1`)
	if got != "" {
		t.Errorf("the agent changed the control directory:\n%s", got)
	}
	ctx := context.Background()
	// The check's pid namespace is its own: it sees its own processes (ps
	// works: its supervisor and itself) and none of the agent's, as the
	// agent sees none of its.
	out, code, err := term.Exec(ctx, "sleep 1; echo check-marker alive; cat leak 2>&1; ps -eo args= | grep -c '[c]heck-marker'; pgrep -f 'while [:]' >/dev/null && echo sees-agent; true")
	if err != nil || code != 0 {
		t.Fatalf("check: %v, exit %d: %s", err, code, out)
	}
	if !strings.Contains(out, "check-marker alive") || strings.Contains(out, "sees-agent") || strings.Contains(out, "host-secret") || !strings.Contains(out, "\n2\n") {
		t.Errorf("check output: %q", out)
	}
	if b, _ := os.ReadFile(victim); string(b) != "unchanged" {
		t.Errorf("host file overwritten: %q", b)
	}
	seen, _, _ := term.Exec(ctx, "cat /tmp/seen 2>/dev/null")
	if strings.Contains(seen, "check-marker") {
		t.Errorf("the agent saw the check's processes:\n%s", seen)
	}
	// A failing check fails whatever the agent wrote.
	if _, code, _ := term.Exec(ctx, "exit 3"); code != 3 {
		t.Errorf("exit 3 reported as %d", code)
	}
	// A FIFO the check reads hangs it: the timeout kills it. Nothing else
	// would end it (the FIFO never gets a writer): the bound on the wait
	// only turns a hang into a failure.
	agentRun(t, term, "mkfifo answer.txt")
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	begin := time.Now()
	_, _, err = term.Exec(cctx, "cat answer.txt")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(begin) > 2*time.Minute {
		t.Errorf("check reading a FIFO: err %v after %s", err, time.Since(begin))
	}
	// A check that leaves a process holding its output returns anyway,
	// long before that process would end.
	begin = time.Now()
	out, code, err = term.Exec(ctx, "sleep 600 & echo left")
	if err != nil || code != 0 || out != "left\n" || time.Since(begin) > 2*time.Minute {
		t.Errorf("check with a background process: %q %d %v after %s", out, code, err, time.Since(begin))
	}
}

// TestTaskCheckCannotBeForged runs a task whose check the agent tries to
// pass without doing the work, through RunTask.
func TestTaskCheckCannotBeForged(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	task := &Task{Name: "forge", Instruction: "write 42 to answer.txt", Check: `test "$(cat answer.txt)" = 42`}
	forge := keys(`for n in $(seq 1 20); do echo 0 > /run/agentworld/exec-$n.rc; done 2>/dev/null; echo 41 > answer.txt`+"\n", 1)
	run, err := RunTask(context.Background(), task, []string{forge}, &RunOptions{CheckTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if run.Check.Passed {
		t.Fatalf("a forged check passed: %+v", run.Check)
	}
	run, err = RunTask(context.Background(), task, []string{keys("echo 42 > answer.txt\n", 0.5)}, &RunOptions{CheckTimeout: 20 * time.Second})
	if err != nil || !run.Check.Passed {
		t.Fatalf("the right answer fails: %+v, %v", run.Check, err)
	}
}

func TestSandboxLimits(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	term, _ := startTerminal(t, &TerminalOptions{Limits: sandbox.Limits{Processes: 300, FileBytes: 1 << 20, TmpBytes: 8 << 20}})
	got := agentRun(t, term, `{ ulimit -u; ulimit -f; ulimit -t; ulimit -v; (head -c 2000000 /dev/zero > /app/big) 2>/dev/null; stat -c %s /app/big; `+
		`df -k /tmp /dev/shm | tail -2 | awk '{print $2}'; } > /app/result.txt 2>/dev/null`)
	want := fmt.Sprintf("300\n1024\n600\n%d\n1048576\n", (8<<30)/1024)
	if sandbox.DetectFeatures().Size {
		want += fmt.Sprintf("8192\n%d\n", sandbox.ShmBytes/1024)
	} else {
		lines := strings.SplitAfter(got, "\n")
		got = strings.Join(lines[:min(5, len(lines))], "")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("limits inside (-want +got):\n%s", diff)
	}
	// An agent at its process limit starves neither the checks nor the
	// tmux clients, which have a reserve above it.
	marker := fmt.Sprintf("30.%d", 1_000_000+time.Now().UnixNano()%1_000_000)
	agentRun(t, term, fmt.Sprintf(`(seq 1 400 | xargs -P 400 -I{} sleep %s >/dev/null 2>&1 &)`, marker))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, _, err := term.Exec(context.Background(), "ulimit -u")
		if err != nil {
			t.Fatalf("check beside an agent at its limit: %v", err)
		}
		var limit int
		fmt.Sscan(out, &limit)
		pids, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output()
		sleeps := len(strings.Fields(string(pids)))
		if limit == 300+sandbox.ProcessReserve && sleeps >= 290 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent never reached its process limit: %q", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if res := step(t, term, keys("echo still-driven\n", 0.3)); res.Terminated {
		t.Fatalf("the agent's own process limit ended the episode: %+v", res)
	}
}

func TestTerminalLongKeystrokesAndEpisodeClock(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	term, _ := startTerminal(t, &TerminalOptions{Limits: sandbox.Limits{Episode: 4 * time.Second}})
	long := strings.Repeat("x", 32<<10)
	res := step(t, term, keys(": "+long+"; echo long-done > /app/long.txt\n", 1))
	if res.Terminated || res.Error != "" {
		t.Fatalf("a 32 KiB keystroke string ended the episode: %+v", res.Error)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, _ := os.ReadFile(filepath.Join(term.WorkDirHost(), "long.txt")); string(b) == "long-done\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the long command did not run")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Until(term.begin.Add(4*time.Second + 100*time.Millisecond)))
	res = step(t, term, keys("echo late\n", 0.1))
	if !res.Terminated || !strings.Contains(res.Error, "episode time limit") {
		t.Fatalf("step after the episode clock: %+v", res)
	}
}

func TestSendKeyOpsChunks(t *testing.T) {
	long := strings.Repeat("é", sendKeyChunk) // 2 bytes each
	ops := sendKeyOps([]KeyOp{{Literal: long}, {Key: "Enter"}})
	var joined strings.Builder
	for _, op := range ops[:len(ops)-1] {
		if len(op.Literal) > sendKeyChunk || op.Key != "" {
			t.Fatalf("op %+v", op)
		}
		joined.WriteString(op.Literal)
	}
	if joined.String() != long || ops[len(ops)-1].Key != "Enter" || len(ops) != 3 {
		t.Fatalf("%d ops, text preserved %v", len(ops), joined.String() == long)
	}
}

func TestCleanStaleRemovesOnlyDeadOwners(t *testing.T) {
	base := t.TempDir()
	dead := filepath.Join(base, sandbox.TermDirPrefix+"dead")
	live := filepath.Join(base, sandbox.TermDirPrefix+"live")
	nolock := filepath.Join(base, sandbox.TermDirPrefix+"nolock")
	for _, d := range []string{dead, live, nolock} {
		if err := os.MkdirAll(filepath.Join(d, "work"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := sandbox.LockDir(dead)
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // its owner died
	held, err := sandbox.LockDir(live)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	sandbox.CleanStale(base, slog.New(slog.DiscardHandler))
	for d, want := range map[string]bool{dead: false, live: true, nolock: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", filepath.Base(d), err == nil, want)
		}
	}
}

// TestSandboxCloseKillsEverything leaves processes behind in every way an
// agent or a check can (background, setsid, a new session of its own) and
// requires none to survive Close.
func TestSandboxCloseKillsEverything(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	marker := fmt.Sprintf("%d", 7_000_000+time.Now().UnixNano()%1_000_000)
	term, _ := startTerminal(t, nil)
	agentRun(t, term, fmt.Sprintf("nohup sleep %[1]s >/dev/null 2>&1 & setsid -f sleep %[1]s; (sleep %[1]s &)", marker))
	if _, _, err := term.Exec(context.Background(), fmt.Sprintf("setsid -f sleep %[1]s; (sleep %[1]s &)", marker)); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		out, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output()
		return len(strings.Fields(string(out)))
	}
	// The check's pid namespace ends with it: its (sleep &) and its
	// setsid one die when it returns; the agent's live on until Close.
	if n := count(); n != 3 {
		t.Fatalf("%d sleeps running before Close, want the agent's 3", n)
	}
	term.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for count() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes outlived Close", count())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTmuxLiteralKeepsSemicolons(t *testing.T) {
	// What tmux does to the last argument of a command (cmd-parse.c): a
	// final ";" ends the command and goes; a "\" before it becomes ";".
	tmuxParses := func(arg string) string {
		if !strings.HasSuffix(arg, ";") {
			return arg
		}
		arg = arg[:len(arg)-1]
		if strings.HasSuffix(arg, `\`) {
			return arg[:len(arg)-1] + ";"
		}
		return arg
	}
	for _, s := range []string{"", "ls", "echo a;", `find . -exec rm {} \;`, ";", `\;`, `a\\;`} {
		if got := tmuxParses(tmuxLiteral(s)); got != s {
			t.Errorf("tmuxLiteral(%q) arrives as %q", s, got)
		}
	}
}

func TestSendKeyBatches(t *testing.T) {
	got := sendKeyBatches("%0", KeyOps("echo a;\nC-c"))
	want := [][]string{{"send-keys", "-t", "%0", "-l", "--", `echo a\;`, ";", "send-keys", "-t", "%0", "Enter", ";", "send-keys", "-t", "%0", "-l", "--", "C-c"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
	long := sendKeyBatches("%0", KeyOps(strings.Repeat("x", 32<<10)+"\n"))
	if len(long) != 4 { // two 4 KiB chunks a batch, then Enter
		t.Errorf("32 KiB in %d batches, want 4", len(long))
	}
	for _, b := range long {
		n := 0
		for _, a := range b {
			n += len(a) + 1
		}
		if n > sendKeyBatch+sendKeyChunk {
			t.Errorf("a batch of %d bytes", n)
		}
	}
}

// TestTerminalTypesSemicolons types keystroke strings ending in ";" and
// "\\;" into the real shell: both must arrive unchanged.
func TestTerminalTypesSemicolons(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	term, _ := startTerminal(t, nil)
	step(t, term, keys(`find /app -maxdepth 0 -exec echo found {} > /app/found.txt \;`, 0.1, "\n", 0.3,
		"echo a; echo b;", 0.1, " echo c > /app/semi.txt\n", 0.3))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		found, _ := os.ReadFile(filepath.Join(term.WorkDirHost(), "found.txt"))
		semi, _ := os.ReadFile(filepath.Join(term.WorkDirHost(), "semi.txt"))
		if string(found) == "found /app\n" && string(semi) == "c\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("found.txt %q (want \"found /app\"), semi.txt %q (want \"c\")", found, semi)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHelperHoldTerminal is not a test: TestKillNineLeavesNothing runs it
// in a child process, which starts a terminal, starts a marked process in
// it, reports ready and waits to be killed.
func TestHelperHoldTerminal(t *testing.T) {
	marker, base := testkit.ChildEnv(t, "AGENTWORLD_HOLD_MARKER", "TestKillNineLeavesNothing"), os.Getenv("AGENTWORLD_HOLD_DIR")
	term := NewTerminal(&TerminalOptions{TempDir: base})
	if _, err := term.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	agentRun(t, term, "setsid -f sleep "+marker)
	fmt.Println("READY")
	time.Sleep(time.Minute)
}

// TestKillNineLeavesNothing kills -9 a process holding a terminal: the
// sandbox and all in it must die with it, and the next terminal started in
// the same temp dir removes the directory it left.
func TestKillNineLeavesNothing(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	base := t.TempDir()
	if os.Geteuid() == 0 {
		// The test's own directories, searchable so that the terminals
		// are made here (nobody must reach them), not in the system one.
		os.Chmod(base, 0o711)
		os.Chmod(filepath.Dir(base), 0o711)
		if !sandbox.SearchableByOthers(base) {
			t.Skipf("%s is not searchable by other users above the test's own directories", base)
		}
	}
	marker := fmt.Sprintf("%d", 8_000_000+time.Now().UnixNano()%1_000_000)
	cmd := testkit.Child("TestHelperHoldTerminal", "AGENTWORLD_HOLD_MARKER="+marker, "AGENTWORLD_HOLD_DIR="+base)
	cmd.Args = append(cmd.Args, "-test.v")
	out := mcpclient.NewTailBuffer(1 << 16)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	running := func() bool { return exec.Command("pgrep", "-f", "sleep "+marker).Run() == nil }
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), "READY") || !running() {
		if time.Now().After(deadline) {
			t.Fatalf("helper never got ready:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	left, _ := filepath.Glob(filepath.Join(base, sandbox.TermDirPrefix+"*"))
	if len(left) != 1 {
		t.Fatalf("%d terminal dirs while the helper runs", len(left))
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline = time.Now().Add(2 * time.Minute)
	for running() {
		if time.Now().After(deadline) {
			t.Fatal("a process in the sandbox outlived kill -9 of its owner")
		}
		time.Sleep(50 * time.Millisecond)
	}
	term, _ := startTerminal(t, &TerminalOptions{TempDir: base})
	defer term.Close()
	if _, err := os.Stat(left[0]); err == nil {
		t.Fatalf("%s left by the killed process survived the next start", left[0])
	}
}

// FuzzSendKeyBatches checks that any keystroke string reaches tmux intact
// (after tmux's own handling of a final ";") and in command lines below
// tmux's message size.
func FuzzSendKeyBatches(f *testing.F) {
	for _, s := range []string{"ls\n", "echo a;\n", `find . -exec rm {} \;`, strings.Repeat("é;", 5000), "C-c", "\x80\x80\x80", ";\n;\n"} {
		f.Add(s)
	}
	parse := func(arg string) string { // tmux's cmd-parse.c rule for a final ";"
		if !strings.HasSuffix(arg, ";") {
			return arg
		}
		arg = arg[:len(arg)-1]
		if strings.HasSuffix(arg, `\`) {
			return arg[:len(arg)-1] + ";"
		}
		return arg
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want strings.Builder
		for _, op := range KeyOps(s) {
			if op.Key != "" {
				want.WriteString("<" + op.Key + ">")
			} else {
				want.WriteString(op.Literal)
			}
		}
		var got strings.Builder
		for _, b := range sendKeyBatches("%0", KeyOps(s)) {
			n := 0
			for _, a := range b {
				n += len(a) + 1
			}
			if n > 16<<10-512 {
				t.Fatalf("a command line of %d bytes", n)
			}
			for i := 0; i < len(b); {
				if b[i] != "send-keys" || b[i+1] != "-t" || b[i+2] != "%0" {
					t.Fatalf("batch %q", b)
				}
				i += 3
				if b[i] == "-l" {
					got.WriteString(parse(b[i+2]))
					i += 3
				} else {
					got.WriteString("<" + b[i] + ">")
					i++
				}
				if i < len(b) {
					if b[i] != ";" {
						t.Fatalf("no separator in %q", b)
					}
					i++
				}
			}
		}
		if got.String() != want.String() {
			t.Fatalf("typed %q, want %q", got.String(), want.String())
		}
	})
}
