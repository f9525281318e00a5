package realenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentworld/agentworld/internal/mcpclient"
)

// Sandbox layout as seen from inside. The agent's work directory is also
// HOME. ctlDir is a read-only bind of a host directory holding the tmux
// configuration, the shell's rc file and the sandbox's passwd and group
// files, all written by the host before the sandbox starts. The tmux socket
// lives on a tmpfs of the sandbox's own (tmuxDir): no host process ever
// opens it (see [sandbox.command]).
const (
	DefaultWorkDir = "/app"
	ctlDir         = "/run/agentworld"
	tmuxDir        = "/run/tmux"
	tmuxSock       = tmuxDir + "/tmux.sock"
	sandboxHost    = "sandbox"
)

// Identities inside the sandbox's user namespace. The shell runs as
// sandboxUID unless the task asks for root; either way without
// capabilities.
const (
	sandboxUID  = 1000
	sandboxUser = "agent"
)

// hostNobody is the host uid and gid the sandbox runs as when agentworld
// runs as root: bwrap is started as this user, so every process of the
// sandbox has this host identity, owns nothing on the host and reads only
// what any user may read. (Mapped as root, a sandbox would own every
// root-owned file it can see, /etc/shadow included.)
const hostNobody = 65534

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

func (l Limits) withDefaults() Limits {
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
type sandboxSpec struct {
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
func (s sandboxSpec) uid() int {
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
// [sandbox.command]. lstat and readlink are injected for tests.
func bwrapArgs(s sandboxSpec, lstat func(string) (os.FileInfo, error), readlink func(string) (string, error)) []string {
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
	a = append(a, size(shmBytes)...)
	a = append(a, "--tmpfs", "/dev/shm", "--remount-ro", "/dev", "--perms", "1777")
	a = append(a, size(s.Limits.TmpBytes)...)
	a = append(a, "--tmpfs", "/tmp",
		"--dir", "/run",
		"--ro-bind-fd", strconv.Itoa(bwrapFdCtl), ctlDir,
		"--perms", "0700")
	a = append(a, size(1<<20)...)
	a = append(a, "--tmpfs", tmuxDir,
		"--bind-fd", strconv.Itoa(bwrapFdWork), s.Work,
		"--remount-ro", "/",
		"--chdir", s.Work,
	)
	return a
}

// sandboxFiles are the files of the host control directory: the sandbox's
// own passwd and group, so names inside do not depend on the host (and the
// host's accounts stay private).
func sandboxFiles(workDir string) map[string]string {
	return map[string]string{
		"passwd": fmt.Sprintf("root:x:0:0:root:/root:/bin/bash\n%s:x:%d:%d:%s:%s:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", sandboxUser, sandboxUID, sandboxUID, sandboxUser, workDir),
		"group":  fmt.Sprintf("root:x:0:\n%s:x:%d:\nnogroup:x:65534:\n", sandboxUser, sandboxUID),
	}
}

var features struct {
	once sync.Once
	f    bwrapFeatures
}

// detectFeatures reads `bwrap --help` once for the options that appeared
// in later versions.
func detectFeatures() bwrapFeatures {
	features.once.Do(func() {
		out, _ := exec.Command("bwrap", "--help").CombinedOutput()
		features.f = bwrapFeatures{
			Size:          bytes.Contains(out, []byte("--size")),
			DisableUserns: bytes.Contains(out, []byte("--disable-userns")),
		}
	})
	return features.f
}

// The file descriptors a [sandbox.command] child gets, in ExtraFiles order
// starting at 3: the setup user namespace (where the sandbox's root is
// mapped), the shell's user namespace, then the other namespaces.
const (
	fdSetupUser = 3 + iota
	fdUser
	fdMnt
	fdPid
	fdNet
	fdIPC
	fdUTS
	fdCgroup
	fdCount = iota
)

// sandbox is one running bubblewrap sandbox: a waiting first process whose
// namespaces the host holds open, so it can start processes inside.
type sandbox struct {
	spec   sandboxSpec
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *mcpclient.TailBuffer
	ns     []*os.File // fdCount namespace files, in the fd order above
}

// startSandbox starts bwrap and opens the namespaces of its first process.
// When this process runs as root, bwrap runs as the host's nobody. On any
// failure it leaves nothing running.
func startSandbox(ctx context.Context, spec sandboxSpec, timeout time.Duration) (*sandbox, error) {
	for _, bin := range []string{"bwrap", "nsenter", "unshare", "setpriv", "prlimit"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%w: %s not found on PATH (install bubblewrap and util-linux)", ErrUnavailable, bin)
		}
	}
	spec.Features = detectFeatures()
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer infoR.Close()
	binds, err := openPaths(spec.HostWork, spec.HostCtl, spec.HostCtl+"/passwd", spec.HostCtl+"/group")
	if err != nil {
		infoW.Close()
		return nil, fmt.Errorf("terminal: %w", err)
	}
	defer func() {
		for _, f := range binds {
			f.Close()
		}
	}()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		infoW.Close()
		return nil, err
	}
	defer readyR.Close()
	binds = append(binds, readyW)
	// bwrap reports the child's pid before the child has made its last
	// user namespace (the one mapping --uid); the first process says when
	// the sandbox is complete by writing to the ready pipe, then waits.
	ready := fmt.Sprintf("echo >&%d && exec %d>&- && exec sleep infinity", bwrapFdReady, bwrapFdReady)
	args := append(bwrapArgs(spec, os.Lstat, os.Readlink), "--info-fd", strconv.Itoa(bwrapFdInfo), "--", "sh", "-c", ready)
	s := &sandbox{spec: spec, done: make(chan struct{}), stderr: mcpclient.NewTailBuffer(maxStderr)}
	s.cmd = exec.Command("bwrap", args...)
	s.cmd.Stderr = s.stderr
	s.cmd.ExtraFiles = append([]*os.File{infoW}, binds...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		s.cmd.SysProcAttr.Credential = &syscall.Credential{Uid: hostNobody, Gid: hostNobody, Groups: []uint32{}}
	}
	err = s.cmd.Start()
	infoW.Close()
	readyW.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: start bwrap: %v", ErrUnavailable, err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	type info struct {
		Pid int    `json:"child-pid"`
		Mnt uint64 `json:"mnt-namespace"`
		PID uint64 `json:"pid-namespace"`
	}
	got := make(chan info, 1)
	go func() {
		var in info
		_ = json.NewDecoder(infoR).Decode(&in)
		if b := make([]byte, 1); in.Pid > 0 {
			if n, _ := readyR.Read(b); n != 1 {
				in.Pid = 0
			}
		}
		got <- in
	}()
	var in info
	select {
	case in = <-got:
	case <-time.After(timeout):
	case <-ctx.Done():
	}
	if in.Pid <= 0 {
		s.close()
		return nil, fmt.Errorf("%w: sandbox did not start: %s", ErrUnavailable, strings.TrimSpace(s.stderr.String()))
	}
	if err := s.openNamespaces(in.Pid, in.Mnt, in.PID); err != nil {
		s.close()
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return s, nil
}

// openPaths opens each path as an O_PATH descriptor without following a
// final symlink; on failure it closes what it opened.
func openPaths(paths ...string) ([]*os.File, error) {
	var out []*os.File
	for _, p := range paths {
		fd, err := syscall.Open(p, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != nil {
			for _, f := range out {
				f.Close()
			}
			return nil, &os.PathError{Op: "open", Path: p, Err: err}
		}
		out = append(out, os.NewFile(uintptr(fd), p))
	}
	return out, nil
}

// Namespace ioctls (linux/nsfs.h).
const (
	nsGetUserns = 0xb701
	nsGetParent = 0xb702
)

// openNamespaces opens the namespaces of the sandbox's first process and
// checks that they are the ones bwrap reported, so a pid reused after a
// crash is never entered.
func (s *sandbox) openNamespaces(pid int, mnt, pidns uint64) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/ns/"
	names := []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"}
	files := map[string]*os.File{}
	for _, n := range names {
		f, err := os.Open(dir + n)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return fmt.Errorf("open sandbox namespace: %w", err)
		}
		files[n] = f
	}
	// The mount and pid namespaces belong to the user namespace bwrap set
	// the sandbox up in, where root is mapped: entering it first gives the
	// capabilities needed to create the shell's pid namespace.
	setup, err := nsIoctl(files["pid"], nsGetUserns)
	if err == nil {
		s.ns = []*os.File{setup, files["user"], files["mnt"], files["pid"], files["net"], files["ipc"], files["uts"], files["cgroup"]}
	} else {
		for _, f := range files {
			f.Close()
		}
		return fmt.Errorf("sandbox user namespace: %w", err)
	}
	if ino(files["mnt"]) != mnt || ino(files["pid"]) != pidns {
		return errors.New("sandbox process changed before its namespaces were opened")
	}
	if ino(files["user"]) == ino(setup) {
		return errors.New("sandbox has no user namespace of its own for the shell")
	}
	return nil
}

func nsIoctl(f *os.File, op uintptr) (*os.File, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), op, 0)
	if errno != 0 {
		return nil, errno
	}
	return os.NewFile(r, f.Name()+"-owner"), nil
}

func ino(f *os.File) uint64 {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// command returns a command that runs argv inside the sandbox, in dir, as
// the shell's user, with no capabilities, no_new_privs and the sandbox's
// rlimits. It is the only way the host starts anything inside, and nothing
// of it runs on the host but nsenter: the tmux client too runs inside, so
// a tmux server the agent controls (it owns it) can only make that client
// open files inside the sandbox — a host tmux client would open them on
// the host as the host user (a server hook running save-buffer writes any
// host file) — and a symlink planted at the socket path leads only to what
// the sandbox can reach.
//
// world starts the agent's world: a new pid namespace, child of the
// sandbox's, with its own /proc. Everything the agent runs lives there;
// checks and tmux clients (world false) run in the sandbox's pid namespace,
// which the agent cannot see: it can neither signal nor trace a check,
// while a check sees the agent's processes and files.
//
// The chain: nsenter enters the setup user namespace as its root and every
// other namespace; unshare (world only) makes the pid namespace and mounts
// its /proc; nsenter enters the shell's user namespace keeping credentials
// (so root there only if the task asked for it); setpriv empties the
// bounding set and sets no_new_privs; prlimit sets the limits; bash closes
// the namespace descriptors and changes directory. The process group is
// killed on ctx's end.
func (s *sandbox) command(ctx context.Context, world bool, dir string, argv ...string) *exec.Cmd {
	fd := func(n int) string { return "/proc/self/fd/" + strconv.Itoa(n) }
	// Root becomes the setup namespace's root (the host's nobody); any
	// other user already is it, and may not call setgroups, which -S and
	// -G imply.
	a := []string{"--user=" + fd(fdSetupUser), "--preserve-credentials"}
	if os.Geteuid() == 0 {
		a = []string{"--user=" + fd(fdSetupUser), "-S", "0", "-G", "0"}
	}
	a = append(a,
		"--mount="+fd(fdMnt), "--pid="+fd(fdPid), "--net="+fd(fdNet),
		"--ipc="+fd(fdIPC), "--uts="+fd(fdUTS), "--cgroup="+fd(fdCgroup), "--")
	if world {
		a = append(a, "unshare", "--pid", "--fork", "--mount-proc", "--")
	}
	a = append(a, "nsenter", "--user="+fd(fdUser), "--preserve-credentials", "--",
		"setpriv", "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--",
		"prlimit")
	lim := s.spec.Limits
	if !world {
		// The process limit counts the agent's processes and the host's
		// alike (one user in one namespace): checks and tmux clients get a
		// reserve above it, so an agent at its limit cannot starve them.
		lim.Processes += processReserve
	}
	a = append(a, lim.prlimitArgs()...)
	var closeFDs strings.Builder
	for n := fdSetupUser; n < fdSetupUser+fdCount; n++ {
		fmt.Fprintf(&closeFDs, "exec %d<&-; ", n)
	}
	a = append(a, "--", "bash", "-c", closeFDs.String()+`cd -- "$0" || exit 125; exec "$@"`, dir)
	a = append(a, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", a...)
	env := make([]string, 0, len(s.spec.Env))
	for k, v := range s.spec.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	cmd.Env = env
	cmd.ExtraFiles = s.ns
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		// No supplementary groups: nsenter enters the sandbox's user
		// namespace with the host's, and root's group would travel along.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// alive reports whether the sandbox is still running.
func (s *sandbox) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// close kills the sandbox: bwrap's death kills its first process
// (--die-with-parent), whose death ends its pid namespace and every one
// nested in it, so nothing the agent or a check started survives.
func (s *sandbox) close() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	for _, f := range s.ns {
		f.Close()
	}
	s.ns = nil
}

var probe struct {
	once sync.Once
	err  error
}

// ProbeSandbox reports whether a sandboxed terminal can start here, by
// actually starting one and running a command in it (cached for the
// process). The error wraps ErrUnavailable and says why.
func ProbeSandbox() error {
	probe.once.Do(func() { probe.err = probeSandbox() })
	return probe.err
}

func probeSandbox() error {
	if _, err := exec.LookPath("tmux"); err != nil {
		return fmt.Errorf("%w: tmux not found on PATH (install tmux)", ErrUnavailable)
	}
	term := NewTerminal(&TerminalOptions{StartTimeout: 15 * time.Second})
	defer term.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := term.Start(ctx); err != nil {
		if errors.Is(err, ErrUnavailable) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	out, code, err := term.Exec(ctx, "echo ok > probe && cat probe")
	if err != nil || code != 0 || strings.TrimSpace(out) != "ok" {
		return fmt.Errorf("%w: sandbox work dir not writable: exit %d, %v: %s", ErrUnavailable, code, err, out)
	}
	return nil
}

// processReserve is how many processes above Limits.Processes the host's
// own work inside the sandbox (checks, tmux clients) may use.
const processReserve = 128

// shmBytes is the size of the sandbox's /dev/shm.
const shmBytes = 64 << 20

// maxStderr is how much of bwrap's or the shell's stderr is kept (the end)
// for start-up errors.
const maxStderr = 64 << 10

// sandboxPath is PATH inside the sandbox.
const sandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// oPath is Linux's O_PATH, which package syscall does not name.
const oPath = 0x200000
