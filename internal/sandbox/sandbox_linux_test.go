//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/testkit"
)

// hangGuard bounds every wait; it only keeps a broken sandbox from
// hanging the test.
const hangGuard = 60 * time.Second

// start starts a sandbox over a fresh work dir, the way a terminal does,
// and closes it when the test ends. A machine without bubblewrap,
// util-linux or user namespaces skips (fails under CI=true).
func start(t *testing.T) *Sandbox {
	t.Helper()
	// Not under t.TempDir(): its parent is private to this user, and the
	// sandbox runs as the host's nobody when the test runs as root.
	root, err := os.MkdirTemp("", "sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	work, ctl := filepath.Join(root, "work"), filepath.Join(root, "ctl")
	for _, d := range []string{work, ctl} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		// The sandbox runs as the host's nobody: it must own its work dir
		// and reach it.
		if err := os.Chmod(root, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(work, HostNobody, HostNobody); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range Files("/app") {
		if err := os.WriteFile(filepath.Join(ctl, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var sb *Sandbox
	sb, err = Start(ctx, Spec{HostWork: work, Work: "/app", HostCtl: ctl, Limits: Limits{}.WithDefaults(),
		Env: map[string]string{"PATH": Path, "HOME": "/app", "LANG": "C.UTF-8"}}, hangGuard)
	if errors.Is(err, ErrUnavailable) {
		testkit.Missing(t, "a working bubblewrap sandbox", err, "install bubblewrap and util-linux (.ci/setup.d does)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	return sb
}

// run runs script as kind in the sandbox and returns its output and exit
// status.
func run(t *testing.T, sb *Sandbox, kind Kind, script string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := sb.Command(ctx, kind, "/app", "bash", "-c", script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee interface{ ExitCode() int }
		if !errors.As(err, &ee) {
			t.Fatalf("%s: %v", script, err)
		}
		code = ee.ExitCode()
	}
	return out.String(), code
}

// TestChecksHaveTheirOwnShm: the sandbox's /dev/shm is the agent's to
// write, so a check gets one of its own. What the agent plants there is
// not what a check finds (a pre-made POSIX semaphore or shared-memory
// object under a name the check uses), and what a check puts there is
// not visible to the agent's processes while the check runs. The control:
// the agent's own processes do share the sandbox's /dev/shm.
func TestChecksHaveTheirOwnShm(t *testing.T) {
	sb := start(t)
	if out, code := run(t, sb, KindWorld, "echo forged > /dev/shm/sem.check && echo forged > /dev/shm/answer"); code != 0 {
		t.Fatalf("the agent could not write its /dev/shm: %d %s", code, out)
	}
	if out, _ := run(t, sb, KindWorld, "cat /dev/shm/answer"); strings.TrimSpace(out) != "forged" {
		t.Fatalf("control: the agent's processes do not share /dev/shm: %q", out)
	}
	out, code := run(t, sb, KindCheck, "ls -A /dev/shm; touch /dev/shm/mine && echo wrote")
	if code != 0 || strings.Contains(out, "answer") || strings.Contains(out, "sem.check") || !strings.Contains(out, "wrote") {
		t.Fatalf("a check's /dev/shm: exit %d, %q (want empty and writable)", code, out)
	}

	// A check that is still running: it writes to its /dev/shm, says so,
	// and waits for the test; meanwhile the agent looks.
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	check := sb.Command(ctx, KindCheck, "/app", "bash", "-c", "echo secret > /dev/shm/expected && echo ready && read -r _; exit 0")
	stdin, err := check.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := check.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, len("ready\n"))
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "ready\n" {
		t.Fatalf("the check did not start: %q %v", line, err)
	}
	seen, _ := run(t, sb, KindWorld, "ls -A /dev/shm; cat /dev/shm/expected 2>&1")
	stdin.Close()
	if err := check.Wait(); err != nil {
		t.Fatalf("check: %v", err)
	}
	if strings.Contains(seen, "secret") || strings.Contains(seen, "expected\n") {
		t.Fatalf("the agent saw the running check's /dev/shm: %q", seen)
	}
	// The check's /dev/shm went with it; the agent's is as it left it.
	if out, _ := run(t, sb, KindWorld, "ls -A /dev/shm"); strings.Contains(out, "mine") || !strings.Contains(out, "answer") {
		t.Fatalf("the agent's /dev/shm after the checks: %q", out)
	}
}

// TestChecksRunApart: the sandbox's other promises to checks, each against
// a control the agent can reach. A check's /run/private is fresh for each
// run and unseen by the agent; it sees none of the agent's processes; it
// has no network and no IPC shared with the agent; it runs without
// capabilities and with no_new_privs, as the agent does.
func TestChecksRunApart(t *testing.T) {
	sb := start(t)
	if out, code := run(t, sb, KindCheck, "echo x > /run/private/left && echo ok"); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("a check cannot write /run/private: %d %q", code, out)
	}
	if out, _ := run(t, sb, KindCheck, "ls -A /run/private"); strings.Contains(out, "left") {
		t.Fatalf("a check found an earlier check's /run/private: %q", out)
	}
	if out, _ := run(t, sb, KindWorld, "ls -A /run/private 2>&1"); strings.Contains(out, "left") {
		t.Fatalf("the agent sees /run/private: %q", out)
	}

	// An agent process running while the check runs: the agent's own ps
	// sees it (the control, before "ready"), a check's does not.
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	agent := sb.Command(ctx, KindWorld, "/app", "bash", "-c",
		"(exec -a agent-marker sleep 600) & until ps -eo args | grep -q '^agent-marker'; do :; done; echo ready; wait")
	stdout, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { KillGroup(agent.Process.Pid); _ = agent.Wait() }()
	line := make([]byte, len("ready\n"))
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "ready\n" {
		t.Fatalf("the agent's process did not start: %q %v", line, err)
	}
	if out, _ := run(t, sb, KindCheck, "ps -eo args"); strings.Contains(out, "agent-marker") || !strings.Contains(out, "ps -eo args") {
		t.Fatalf("a check's process list: %q", out)
	}

	for _, kind := range []Kind{KindWorld, KindCheck} {
		out, _ := run(t, sb, kind, "grep -E '^(CapPrm|CapEff|CapAmb|NoNewPrivs):' /proc/self/status; cat /proc/net/dev; id -u")
		t.Logf("kind %d: %s", kind, out)
		if !strings.Contains(out, "CapPrm:\t0000000000000000") || !strings.Contains(out, "CapEff:\t0000000000000000") || !strings.Contains(out, "CapAmb:\t0000000000000000") || !strings.Contains(out, "NoNewPrivs:\t1") {
			t.Fatalf("kind %d runs with privileges: %q", kind, out)
		}
		if strings.Contains(out, "eth") || strings.Contains(out, "ens") {
			t.Fatalf("kind %d has a network device: %q", kind, out)
		}
		if !strings.HasSuffix(strings.TrimSpace(out), "1000") {
			t.Fatalf("kind %d is not the sandbox user: %q", kind, out)
		}
	}
	if out, code := run(t, sb, KindWorld, "touch /usr/agentworld-test 2>&1"); code == 0 {
		t.Fatalf("the agent wrote the system: %q", out)
	}
}
