package realenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/testkit"
)

// requireSandbox skips only when a bubblewrap sandbox with tmux cannot start
// on this machine, and says why.
func requireSandbox(t *testing.T) {
	t.Helper()
	if err := ProbeSandbox(); err != nil {
		testkit.Missing(t, "a working bubblewrap sandbox with tmux", err, "install bubblewrap and tmux (.ci/setup.d does)")
	}
}

func startTerminal(t *testing.T, opts *TerminalOptions) (*Terminal, string) {
	t.Helper()
	if opts == nil {
		opts = &TerminalOptions{}
	}
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	term := NewTerminal(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := term.Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { term.Close() })
	return term, first
}

func step(t *testing.T, term *Terminal, action string) StepResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := term.Step(ctx, action)
	if err != nil {
		t.Fatalf("Step(%s): %v", action, err)
	}
	return res
}

func keys(pairs ...any) string {
	var parts []string
	for i := 0; i < len(pairs); i += 2 {
		b, _ := json.Marshal(pairs[i].(string))
		parts = append(parts, fmt.Sprintf(`{"keystrokes":%s,"duration":%v}`, b, pairs[i+1]))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestTerminalEpisode(t *testing.T) {
	requireSandbox(t)
	testkit.NoLeaks(t)
	term, first := startTerminal(t, nil)
	if first != "root@sandbox:/app#" {
		t.Fatalf("first screen = %q", first)
	}
	steps := []struct {
		action string
		want   string
	}{
		{keys("mkdir -p proj && cd proj\n", 1), `root@sandbox:/app# mkdir -p proj && cd proj
root@sandbox:/app/proj#`},
		{keys("echo 'hello world' > notes.txt\n", 0.5, "cat notes.txt\n", 1), `root@sandbox:/app# mkdir -p proj && cd proj
root@sandbox:/app/proj# echo 'hello world' > notes.txt
root@sandbox:/app/proj# cat notes.txt
hello world
root@sandbox:/app/proj#`},
		{keys("ls /nonexistent; echo \"rc=$?\"\n", 1), `root@sandbox:/app# mkdir -p proj && cd proj
root@sandbox:/app/proj# echo 'hello world' > notes.txt
root@sandbox:/app/proj# cat notes.txt
hello world
root@sandbox:/app/proj# ls /nonexistent; echo "rc=$?"
ls: cannot access '/nonexistent': No such file or directory
rc=2
root@sandbox:/app/proj#`},
		// The command outlives its duration: the screen shows it running,
		// with no new prompt.
		{keys("sleep 30\n", 0.5), `root@sandbox:/app# mkdir -p proj && cd proj
root@sandbox:/app/proj# echo 'hello world' > notes.txt
root@sandbox:/app/proj# cat notes.txt
hello world
root@sandbox:/app/proj# ls /nonexistent; echo "rc=$?"
ls: cannot access '/nonexistent': No such file or directory
rc=2
root@sandbox:/app/proj# sleep 30`},
		{keys("C-c", 1), `root@sandbox:/app# mkdir -p proj && cd proj
root@sandbox:/app/proj# echo 'hello world' > notes.txt
root@sandbox:/app/proj# cat notes.txt
hello world
root@sandbox:/app/proj# ls /nonexistent; echo "rc=$?"
ls: cannot access '/nonexistent': No such file or directory
rc=2
root@sandbox:/app/proj# sleep 30
^C
root@sandbox:/app/proj#`},
	}
	for i, s := range steps {
		res := step(t, term, s.action)
		if res.Terminated || res.Error != "" {
			t.Fatalf("step %d ended early: %+v", i+1, res)
		}
		if res.Observation != s.want {
			// A loaded machine may need longer than the step's duration;
			// the screen must still reach the expected state.
			t.Logf("step %d: screen not settled after its duration:\n%s", i+1, res.Observation)
			got := settle(t, term, s.want)
			if diff := cmp.Diff(s.want, got); diff != "" {
				t.Fatalf("step %d screen (-want +got):\n%s", i+1, diff)
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(term.WorkDirHost(), "proj", "notes.txt"))
	if err != nil || string(b) != "hello world\n" {
		t.Fatalf("host view of the work dir: %q, %v", b, err)
	}
	out, code, err := term.Exec(context.Background(), "cat proj/notes.txt; pwd; echo $HOME")
	if err != nil || code != 0 || out != "hello world\n/app\n/run/private\n" {
		t.Fatalf("Exec = %q, %d, %v", out, code, err)
	}
	if _, code, _ := term.Exec(context.Background(), "exit 3"); code != 3 {
		t.Fatalf("Exec exit code = %d, want 3", code)
	}
	if _, err := term.Step(context.Background(), "ls\n"); err == nil {
		t.Fatal("a non-JSON action was accepted")
	}
	end := step(t, term, "[]")
	if !end.Terminated {
		t.Fatalf("[] did not end the episode: %+v", end)
	}
	if _, err := term.Step(context.Background(), keys("ls\n", 0.1)); err == nil {
		t.Fatal("step after the end was accepted")
	}
	c := term.Components()
	if !strings.Contains(c.InitialState, "root@sandbox:/app#") || c.ActionSpace != TerminalActionSpace {
		t.Fatalf("components: %+v", c)
	}
}

// settle polls the screen until it equals want (for two minutes at most:
// a hang guard), and returns the last screen seen.
func settle(t *testing.T, term *Terminal, want string) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := term.Screen(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestTerminalSandboxHoldsEscapes(t *testing.T) {
	requireSandbox(t)
	t.Parallel() // no leak check: other parallel tests run beside it
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	hostDir := t.TempDir()
	term, _ := startTerminal(t, nil)
	script := fmt.Sprintf(`touch /etc/agentworld-escape && echo WROTE-ETC || echo NO-ETC
touch /usr/agentworld-escape && echo WROTE-USR || echo NO-USR
touch /agentworld-escape && echo WROTE-ROOT || echo NO-ROOT
touch %[1]s/escape && echo WROTE-HOSTDIR || echo NO-HOSTDIR
echo inside > /tmp/agentworld-escape-tmp && echo WROTE-TMP
(exec 3<>/dev/tcp/127.0.0.1/%[2]d) 2>/dev/null && echo CONNECTED-LOOPBACK || echo NO-LOOPBACK
(exec 3<>/dev/tcp/1.1.1.1/80) 2>/dev/null && echo CONNECTED-INTERNET || echo NO-INTERNET
`, hostDir, port)
	out, code, err := term.Exec(context.Background(), script)
	if err != nil || code != 0 {
		t.Fatalf("Exec: %v (code %d) %s", err, code, out)
	}
	want := "NO-ETC\nNO-USR\nNO-ROOT\nNO-HOSTDIR\nWROTE-TMP\nNO-LOOPBACK\nNO-INTERNET\n"
	if diff := cmp.Diff(want, stripErrLines(out)); diff != "" {
		t.Fatalf("sandbox escapes (-want +got):\n%s\nfull output:\n%s", diff, out)
	}
	// The same from the agent's own shell.
	res := step(t, term, keys(fmt.Sprintf("(exec 3<>/dev/tcp/127.0.0.1/%d) && echo CONNECTED || echo BLOCKED\n", port), 1))
	if !strings.Contains(res.Observation, "\nBLOCKED") || strings.Contains(res.Observation, "\nCONNECTED") {
		t.Fatalf("network from the shell:\n%s", res.Observation)
	}
	for _, p := range []string{"/etc/agentworld-escape", "/usr/agentworld-escape", "/agentworld-escape", filepath.Join(hostDir, "escape"), "/tmp/agentworld-escape-tmp"} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s appeared on the host", p)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("host listener accepted %d connections from the sandbox", n)
	}
}

func stripErrLines(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" && strings.ToUpper(l) == l {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n") + "\n"
}

func TestTerminalSeedSetupAndExit(t *testing.T) {
	requireSandbox(t)
	t.Parallel() // no leak check: other parallel tests run beside it
	seed := t.TempDir()
	os.MkdirAll(filepath.Join(seed, "src"), 0o755)
	os.WriteFile(filepath.Join(seed, "src", "main.py"), []byte("print('hi')\n"), 0o644)
	term, first := startTerminal(t, &TerminalOptions{Seed: seed, Setup: "echo from-setup > setup.txt\nmkdir -p data\n", Width: 80, Height: 24})
	if first != "root@sandbox:/app#" {
		t.Fatalf("setup leaked onto the agent's screen: %q", first)
	}
	c := term.Components()
	for _, f := range []string{"src/main.py", "setup.txt", "data/"} {
		if !strings.Contains(c.InitialState, f) {
			t.Errorf("initial state lacks %s:\n%s", f, c.InitialState)
		}
	}
	res := step(t, term, keys("cat src/main.py setup.txt; tput cols; tput lines\n", 1))
	if !strings.Contains(res.Observation, "print('hi')\nfrom-setup\n80\n24\n") {
		t.Fatalf("screen:\n%s", res.Observation)
	}
	res = step(t, term, keys("exit\n", 1))
	if !res.Terminated {
		t.Fatalf("exit did not end the episode: %+v", res)
	}
}
