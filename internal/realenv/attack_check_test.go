//go:build linux

package realenv

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/sandbox"
)

// The tests below are a third look at the check's isolation: what the
// agent can leave, outside its files, for a check to meet.

// TestCheckMeetsNoAgentSocketsOrIPC has the agent bind an abstract unix
// socket (its name lives in the network namespace, not in a file, so no
// mount hides it) and make a System V message queue, then runs checks that
// look for both: a check that connects to a well-known name or key must
// not reach the agent's. (Both were reachable while checks shared the
// sandbox's network and IPC namespaces.) The control is the agent's own
// shell, which does reach them.
func TestCheckMeetsNoAgentSocketsOrIPC(t *testing.T) {
	requireAttackTools(t)
	t.Parallel()
	term, _ := startTerminal(t, nil)
	const sock = `"\0agentworld-attack"`
	listen := `setsid -f python3 -c 'import socket, time; s = socket.socket(socket.AF_UNIX); s.bind(` + sock + `); s.listen(64); time.sleep(120)' >/dev/null 2>&1 </dev/null`
	connect := `python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(` + sock + `)'`
	// msgget with key 0x5eed: IPC_CREAT|0600 makes the queue, 0 finds it.
	msgget := func(flags string) string {
		return `python3 -c 'import ctypes, sys; sys.exit(ctypes.CDLL(None).msgget(0x5eed, ` + flags + `) < 0)'`
	}
	got := agentRun(t, term, listen+` && `+msgget("0o1600")+` && for i in $(seq 50); do `+connect+` 2>/dev/null && break; sleep 0.1; done; { `+connect+` && echo reached; `+msgget("0")+` && echo queue; } > result.txt 2>&1`)
	if got != "reached\nqueue\n" {
		t.Fatalf("control: the agent's own shell does not see its socket and queue: %q", got)
	}
	for name, check := range map[string]string{
		"abstract socket": connect,
		"message queue":   msgget("0"),
	} {
		out, code, err := term.Exec(context.Background(), check)
		if err != nil {
			t.Fatal(err)
		}
		if code == 0 {
			t.Errorf("a check reached the agent's %s: %s", name, out)
		}
	}
}

// TestOrganizePhotosCheckSeesHiddenPhotos plays the bundled organize-photos
// task keeping the empty photos instead of deleting them, out of the
// check's sight: in a directory under photos/ that nobody may read (the
// check runs as the agent's user, so the agent's chmod binds it too), or
// moved aside into a hidden directory of the work dir. The check must fail both ways
// (both passed a check whose find failures went unnoticed).
func TestOrganizePhotosCheckSeesHiddenPhotos(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	task, err := LoadTask(filepath.Join(repoRoot(t), "examples", "tasks", "organize-photos"))
	if err != nil {
		t.Fatal(err)
	}
	oracle, err := task.Oracle.ActionStrings()
	if err != nil {
		t.Fatal(err)
	}
	deleteAt := -1
	for i, a := range oracle {
		if strings.Contains(a, "-empty -print -delete") {
			deleteAt = i
		}
	}
	if deleteAt < 0 {
		t.Fatal("the oracle no longer deletes the empty photos with find -delete")
	}
	for name, keep := range map[string]string{
		"unreadable dir": "mkdir -p photos/.keep && find inbox -name '*.jpg' -empty -exec mv {} photos/.keep/ \\; && chmod 000 photos/.keep\n",
		"moved aside":    "mkdir -p .kept && find inbox -name '*.jpg' -empty -exec mv {} .kept/ \\; \n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			actions := append([]string{}, oracle...)
			actions[deleteAt] = keys(keep, 0.5)
			run, err := RunTask(context.Background(), task, actions, &RunOptions{Terminal: &TerminalOptions{TempDir: t.TempDir()}, CheckTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if run.Check.Passed {
				t.Fatalf("kept empty photos passed the check: %+v", run.Check)
			}
		})
	}
}

// TestCheckRunningGitIgnoresAgentConfig is a hole left open (issue 21,
// found by the third look; SECURITY.md names it under "Checks that run the
// agent's own code"): a check that runs git in a repository the agent made
// runs what the repository's config names — here core.fsmonitor, on a plain
// `git status` — as the check's user, which may trace the check. No
// environment setting turns off every such program (fsmonitor, diff and
// filter drivers, hooks), so the fix is the check author's: read the
// files, do not run git on the agent's repository. Unskipped, this test
// fails while the hole is open.
func TestCheckRunningGitIgnoresAgentConfig(t *testing.T) {
	t.Skip("open hole (issue 21): git in a check runs the agent's repository config (core.fsmonitor); documented in SECURITY.md")
	requireSandbox(t)
	t.Parallel()
	term, _ := startTerminal(t, nil)
	agentRun(t, term, `git init -q repo && git -C repo config core.fsmonitor 'echo ran >> /app/fsmonitor.log; false' && echo ok > result.txt`)
	out, code, err := term.Exec(context.Background(), `cd repo && git status --short >/dev/null; test ! -e /app/fsmonitor.log`)
	if err != nil || code != 0 {
		t.Fatalf("a check's git ran the agent's core.fsmonitor: exit %d, %v: %s", code, err, out)
	}
}

// TestCheckTempFilesArePrivate has the agent fill /tmp, then runs a check
// whose here-document is larger than a pipe holds, which bash writes to a
// temp file: with /tmp full the command ran without its input, so `cat
// <<EOF | sh` ran an empty script and exited 0. A check's temp files go to
// its private directory (TMPDIR), which the agent cannot fill.
func TestCheckTempFilesArePrivate(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	term, _ := startTerminal(t, &TerminalOptions{Limits: sandbox.Limits{TmpBytes: 8 << 20}})
	if got := agentRun(t, term, `head -c 16M /dev/zero > /tmp/fill 2>/dev/null; df --output=avail /tmp | tail -n 1 | tr -d ' ' > result.txt`); got != "0\n" {
		t.Fatalf("the agent did not fill /tmp: %q KiB left", got)
	}
	// 80 KB of comment (scripts are capped at 100 KiB), then the verdict the script gives: exit 1.
	script := "cat <<'EOF' | sh\n" + strings.Repeat("# padding\n", 8000) + "exit 1\nEOF\n"
	out, code, err := term.Exec(context.Background(), script)
	if err != nil {
		t.Fatal(err)
	}
	if code != 1 {
		t.Fatalf("the check's script exited %d, want 1 (its here-document did not reach sh): %s", code, out)
	}
}
