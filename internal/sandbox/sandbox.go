// Package sandbox is where a real terminal's processes run: a bubblewrap
// sandbox with its own user, pid, mount, network, IPC and UTS namespaces,
// resource limits (rlimits and a cgroup where the host allows), a private
// work directory owned by the sandbox's user, and helper runs (checks,
// setup scripts, tmux clients) each in fresh pid and mount namespaces
// entered from a capability-holding supervisor. Package realenv drives a
// shell in it; SECURITY.md says what it keeps out.
package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentworld/agentworld/internal/mcpclient"
)

// ErrUnavailable means the environment cannot start on this machine
// (bwrap or tmux missing, user namespaces refused, node missing, …).
var ErrUnavailable = errors.New("real environment unavailable")

// Sandbox layout as seen from inside. The agent's work directory is also
// HOME. ctlDir is a read-only bind of a host directory holding the tmux
// configuration, the shell's rc file and the sandbox's passwd and group
// files, all written by the host before the sandbox starts. The tmux socket
// lives on a tmpfs of the sandbox's own (tmuxDir): no host process ever
// opens it (see [sandbox.Sandbox.Command]).
const (
	DefaultWorkDir = "/app"
	CtlDir         = "/run/agentworld"
	TmuxDir        = "/run/tmux"
	TmuxSock       = TmuxDir + "/tmux.sock"
	sandboxHost    = "sandbox"
)

// Identities inside the sandbox's user namespace. The shell runs as
// sandboxUID unless the task asks for root; either way without
// capabilities.
const (
	sandboxUID = 1000
	User       = "agent"
)

// hostNobody is the host uid and gid the sandbox runs as when agentworld
// runs as root: bwrap is started as this user, so every process of the
// sandbox has this host identity, owns nothing on the host and reads only
// what any user may read. (Mapped as root, a sandbox would own every
// root-owned file it can see, /etc/shadow included.)
const HostNobody = 65534

// Limits bound one sandbox's resources. The rlimits apply to every process
// the sandbox runs (the agent's shell, setup, checks); zero fields take the
// default in their comment.
type Limits struct {
	// Processes caps the processes of the sandbox's user (RLIMIT_NPROC;
	// counted per user namespace on Linux 5.14 and later); 0 means 1024.
	Processes int
	// MemoryBytes caps each process's address space (RLIMIT_AS); 0 means
	// 8 GiB.
	MemoryBytes int64
	// CPUSeconds caps each process's CPU time (RLIMIT_CPU); 0 means 600.
	CPUSeconds int
	// FileBytes caps the size of any file a process writes (RLIMIT_FSIZE);
	// 0 means 1 GiB.
	FileBytes int64
	// OpenFiles caps each process's open files (RLIMIT_NOFILE); 0 means
	// 4096.
	OpenFiles int
	// TmpBytes is the size of the sandbox's /tmp tmpfs (bubblewrap 0.8 and
	// later; older ones leave it unsized); 0 means 1 GiB.
	TmpBytes int64
	// Episode caps the wall time of one terminal episode: the first step
	// after it ends the episode; 0 means 1 hour.
	Episode time.Duration
}

func (l Limits) WithDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	if l.Processes <= 0 {
		l.Processes = 1024
	}
	if l.CPUSeconds <= 0 {
		l.CPUSeconds = 600
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = 4096
	}
	def(&l.MemoryBytes, 8<<30)
	def(&l.FileBytes, 1<<30)
	def(&l.TmpBytes, 1<<30)
	if l.Episode <= 0 {
		l.Episode = time.Hour
	}
	return l
}

// prlimitArgs are prlimit(1)'s options setting l (soft = hard).
func (l Limits) prlimitArgs() []string {
	return []string{
		"--nproc=" + strconv.Itoa(l.Processes),
		"--as=" + strconv.FormatInt(l.MemoryBytes, 10),
		"--cpu=" + strconv.Itoa(l.CPUSeconds),
		"--fsize=" + strconv.FormatInt(l.FileBytes, 10),
		"--nofile=" + strconv.Itoa(l.OpenFiles),
		"--core=0",
	}
}

// sandboxSpec is what one bubblewrap invocation needs.
type Spec struct {
	HostWork string // host directory bind-mounted writable at Work
	Work     string // mount point of the work dir inside
	HostCtl  string // host directory bind-mounted read-only at ctlDir
	Root     bool   // the shell runs as uid 0 (still without capabilities)
	Limits   Limits // with defaults applied
	Env      map[string]string
	// Features of the installed bwrap (--size, --disable-userns).
	Features bwrapFeatures
}

// uid is the shell's uid (and gid) inside the sandbox.
func (s Spec) uid() int {
	if s.Root {
		return 0
	}
	return sandboxUID
}

type bwrapFeatures struct {
	Size, DisableUserns bool
}

// The descriptors bwrap gets (ExtraFiles from 3): where it writes its info,
// and the host directories and files it binds, opened by this process, so
// bwrap (which runs as nobody) needs no access to their host paths.
const (
	bwrapFdInfo = 3 + iota
	bwrapFdWork
	bwrapFdCtl
	bwrapFdPasswd
	bwrapFdGroup
	bwrapFdReady
)

// systemDirs are the host paths exposed read-only. Merged-/usr hosts have
// /bin, /lib, … as symlinks into /usr; they are recreated as symlinks.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// bwrapArgs builds the bubblewrap command line: every namespace unshared
// (no network: a fresh network namespace has only a down loopback), a user
// namespace mapping only the shell's uid, every capability dropped, no
// further user namespaces, a read-only system with the sandbox's own
// passwd and group, fresh /proc, a read-only /dev (so nothing inside can
// redirect /dev/fd or /dev/stdin for a check), a sized /tmp, the writable
// work dir, and a read-only root. The sandbox's first process only waits:
// the shell and every check are entered into its namespaces by
// [sandbox.Sandbox.Command]. lstat and readlink are injected for tests.
func bwrapArgs(s Spec, lstat func(string) (os.FileInfo, error), readlink func(string) (string, error)) []string {
	id := strconv.Itoa(s.uid())
	a := []string{
		"--die-with-parent", "--new-session",
		"--unshare-all", "--unshare-user",
		"--uid", id, "--gid", id,
		"--cap-drop", "ALL",
		"--hostname", sandboxHost,
		"--clearenv",
	}
	if s.Features.DisableUserns {
		a = append(a, "--disable-userns")
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		a = append(a, "--setenv", k, s.Env[k])
	}
	etc := false
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
			etc = etc || d == "/etc"
		}
	}
	if etc {
		a = append(a,
			"--ro-bind-fd", strconv.Itoa(bwrapFdPasswd), "/etc/passwd",
			"--ro-bind-fd", strconv.Itoa(bwrapFdGroup), "/etc/group")
	}
	// Every tmpfs is sized where bwrap can: unsized, each could take half
	// the host's memory.
	size := func(n int64) []string {
		if !s.Features.Size {
			return nil
		}
		return []string{"--size", strconv.FormatInt(n, 10)}
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	a = append(a, size(ShmBytes)...)
	a = append(a, "--tmpfs", "/dev/shm", "--remount-ro", "/dev", "--perms", "1777")
	a = append(a, size(s.Limits.TmpBytes)...)
	a = append(a, "--tmpfs", "/tmp",
		"--dir", "/run",
		"--dir", privateDir,
		"--ro-bind-fd", strconv.Itoa(bwrapFdCtl), CtlDir,
		"--perms", "0700")
	a = append(a, size(1<<20)...)
	a = append(a, "--tmpfs", TmuxDir,
		"--bind-fd", strconv.Itoa(bwrapFdWork), s.Work,
		"--remount-ro", "/",
		"--chdir", s.Work,
	)
	return a
}

// sandboxFiles are the files of the host control directory: the sandbox's
// own passwd and group, so names inside do not depend on the host (and the
// host's accounts stay private).
func Files(workDir string) map[string]string {
	return map[string]string{
		"passwd": fmt.Sprintf("root:x:0:0:root:/root:/bin/bash\n%s:x:%d:%d:%s:%s:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", User, sandboxUID, sandboxUID, User, workDir),
		"group":  fmt.Sprintf("root:x:0:\n%s:x:%d:\nnogroup:x:65534:\n", User, sandboxUID),
	}
}

var features struct {
	once sync.Once
	f    bwrapFeatures
}

// detectFeatures reads `bwrap --help` once for the options that appeared
// in later versions.
func DetectFeatures() bwrapFeatures {
	features.once.Do(func() {
		out, _ := exec.Command("bwrap", "--help").CombinedOutput()
		features.f = bwrapFeatures{
			Size:          bytes.Contains(out, []byte("--size")),
			DisableUserns: bytes.Contains(out, []byte("--disable-userns")),
		}
	})
	return features.f
}

// The file descriptors a [sandbox.Sandbox.Command] child gets, in ExtraFiles order
// starting at 3: the setup user namespace (where the sandbox's root is
// mapped), the shell's user namespace, the other namespaces of the
// sandbox, then the two helper user namespaces made at start (see
// [sandbox.helperNamespaces]): one for tmux clients and setup scripts, one
// for checks.
const (
	FdSetupUser = 3 + iota
	FdUser
	fdMnt
	fdPid
	fdNet
	fdIPC
	fdUTS
	fdCgroup
	fdClientUser
	FdCheckUser
	fdCount = iota
)

// runKind says what a process the host starts inside the sandbox is, which
// decides the namespaces it gets (see [sandbox.Sandbox.Command]).
type Kind int

const (
	// kindWorld is the agent's world: the tmux server and the shell.
	KindWorld Kind = iota
	// kindClient is a host tmux client: it talks to a server the agent
	// owns, so everything it does is the agent's to decide.
	KindClient
	// kindSetup is a setup script (the task's or a client's), with a
	// private directory.
	KindSetup
	// kindCheck is a check (or an oracle script run through Exec), with a
	// private directory, in a user namespace no agent-controlled code
	// ever entered.
	KindCheck
)

// sandbox is one running bubblewrap sandbox: a waiting first process whose
// namespaces the host holds open, so it can start processes inside.
type Sandbox struct {
	spec   Spec
	cmd    *exec.Cmd
	done   chan struct{}
	Stderr *mcpclient.TailBuffer
	Ns     []*os.File // fdCount namespace files, in the fd order above
}

// alive reports whether the sandbox is still running.
func (s *Sandbox) Alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// processReserve is how many processes above Limits.Processes the host's
// own work inside the sandbox (checks, tmux clients) may use.
const ProcessReserve = 128

// privateDir is where checks and setup scripts find a fresh, empty,
// writable directory that only they can see: a tmpfs of privateBytes
// mounted in a mount namespace of their own, so nothing the agent did
// before can have put anything there.
const (
	privateDir   = "/run/private"
	privateBytes = 64 << 20
)

// shmBytes is the size of the sandbox's /dev/shm.
const ShmBytes = 64 << 20

// maxStderr is how much of bwrap's or the shell's stderr is kept (the end)
// for start-up errors.
const MaxStderr = 64 << 10

// runEnv is the environment of a run of kind: the sandbox's, and for a
// check a HOME the agent cannot have written (its private directory, not
// the work dir: no ~/.gitconfig, ~/.config or ~/.local of the agent's) and
// Python told not to import from the working directory or the user's site
// directory, where the agent could have planted modules (json.py in /app
// would otherwise be what `python3 -c 'import json'` imports).
func runEnv(base map[string]string, kind Kind) []string {
	env := make([]string, 0, len(base)+4)
	for k, v := range base {
		if kind == KindCheck && k == "HOME" {
			continue
		}
		env = append(env, k+"="+v)
	}
	if kind == KindCheck {
		// TMPDIR too: bash writes a here-document larger than a pipe
		// holds to a temp file, and with the agent's /tmp full the
		// command ran without its input (`cat <<EOF | sh` ran an empty
		// script); sort, mktemp and Python's tempfile follow it as well.
		env = append(env, "HOME="+privateDir, "TMPDIR="+privateDir, "PYTHONSAFEPATH=1", "PYTHONNOUSERSITE=1")
	}
	slices.Sort(env)
	return env
}

// sandboxPath is PATH inside the sandbox.
const Path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
