package realenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Sandbox layout as seen from inside. The agent's work directory is also
// HOME; the control directory holds the tmux socket, configuration and the
// scripts the environment runs; it is bind-mounted from the host so the host
// tmux client reaches the private server inside.
const (
	DefaultWorkDir = "/app"
	ctlDir         = "/run/agentworld"
	sandboxHost    = "sandbox"
)

// sandboxSpec is what one bubblewrap invocation needs.
type sandboxSpec struct {
	HostWork string // host directory bind-mounted writable at Work
	Work     string // mount point of the work dir inside
	HostCtl  string // host directory bind-mounted at ctlDir
	Env      map[string]string
}

// systemDirs are the host paths exposed read-only. Merged-/usr hosts have
// /bin, /lib, … as symlinks into /usr; they are recreated as symlinks.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// bwrapArgs builds the bubblewrap command line: every namespace unshared
// (no network: a fresh network namespace has only a down loopback), a
// read-only system, fresh /proc, /dev and /tmp, the writable work dir, the
// control dir, a cleared environment, and a read-only root so nothing else
// is writable. lstat is injected for tests.
func bwrapArgs(s sandboxSpec, lstat func(string) (os.FileInfo, error), readlink func(string) (string, error)) []string {
	a := []string{
		"--die-with-parent", "--new-session",
		"--unshare-all", "--hostname", sandboxHost,
		"--clearenv",
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		a = append(a, "--setenv", k, s.Env[k])
	}
	for _, d := range systemDirs {
		fi, err := lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if target, err := readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
			continue
		}
		if fi.IsDir() {
			a = append(a, "--ro-bind", d, d)
		}
	}
	a = append(a,
		"--proc", "/proc",
		"--dev", "/dev",
		"--tmpfs", "/tmp",
		"--dir", "/run",
		"--bind", s.HostCtl, ctlDir,
		"--bind", s.HostWork, s.Work,
		"--remount-ro", "/",
		"--chdir", s.Work,
	)
	return a
}

var probe struct {
	once sync.Once
	err  error
}

// ProbeSandbox reports whether a bubblewrap sandbox with a tmux server can
// start here, by actually starting one (cached for the process). The error
// wraps ErrUnavailable and says why.
func ProbeSandbox() error {
	probe.once.Do(func() { probe.err = probeSandbox() })
	return probe.err
}

func probeSandbox() error {
	for _, bin := range []string{"bwrap", "tmux", "bash"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%w: %s not found on PATH (install bubblewrap and tmux)", ErrUnavailable, bin)
		}
	}
	dir, err := os.MkdirTemp("", "agentworld-probe-")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer os.RemoveAll(dir)
	work, ctl := filepath.Join(dir, "work"), filepath.Join(dir, "ctl")
	if err := os.Mkdir(work, 0o755); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err := os.Mkdir(ctl, 0o755); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	args := bwrapArgs(sandboxSpec{HostWork: work, Work: DefaultWorkDir, HostCtl: ctl, Env: map[string]string{"PATH": sandboxPath}}, os.Lstat, os.Readlink)
	args = append(args, "--", "sh", "-c", "echo ok > "+DefaultWorkDir+"/probe && tmux -S /tmp/probe.sock -f /dev/null new-session -d -x 20 -y 5 'sleep 1' && tmux -S /tmp/probe.sock kill-server")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bwrap", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: bwrap sandbox failed to start: %v: %s", ErrUnavailable, err, strings.TrimSpace(stderr.String()))
	}
	if b, err := os.ReadFile(filepath.Join(work, "probe")); err != nil || strings.TrimSpace(string(b)) != "ok" {
		return fmt.Errorf("%w: sandbox work dir not writable", ErrUnavailable)
	}
	return nil
}

// sandboxPath is PATH inside the sandbox.
const sandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
