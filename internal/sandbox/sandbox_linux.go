//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentworld/agentworld/internal/mcpclient"
)

// startSandbox starts bwrap and opens the namespaces of its first process.
// When this process runs as root, bwrap runs as the host's nobody. On any
// failure it leaves nothing running.
func Start(ctx context.Context, spec Spec, timeout time.Duration) (*Sandbox, error) {
	for _, bin := range []string{"bwrap", "nsenter", "unshare", "setpriv", "prlimit"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%w: %s not found on PATH (install bubblewrap and util-linux)", ErrUnavailable, bin)
		}
	}
	spec.Features = DetectFeatures()
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
	s := &Sandbox{spec: spec, done: make(chan struct{}), Stderr: mcpclient.NewTailBuffer(MaxStderr)}
	s.cmd = exec.Command("bwrap", args...)
	s.cmd.Stderr = s.Stderr
	s.cmd.ExtraFiles = append([]*os.File{infoW}, binds...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		s.cmd.SysProcAttr.Credential = &syscall.Credential{Uid: HostNobody, Gid: HostNobody, Groups: []uint32{}}
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
		s.Close()
		return nil, fmt.Errorf("%w: sandbox did not start: %s", ErrUnavailable, strings.TrimSpace(s.Stderr.String()))
	}
	if err := s.openNamespaces(in.Pid, in.Mnt, in.PID); err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err := s.helperNamespaces(ctx); err != nil {
		s.Close()
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
func (s *Sandbox) openNamespaces(pid int, mnt, pidns uint64) error {
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
		s.Ns = []*os.File{setup, files["user"], files["mnt"], files["pid"], files["net"], files["ipc"], files["uts"], files["cgroup"]}
	} else {
		for _, f := range files {
			f.Close()
		}
		return fmt.Errorf("sandbox user namespace: %w", err)
	}
	if Ino(files["mnt"]) != mnt || Ino(files["pid"]) != pidns {
		return errors.New("sandbox process changed before its namespaces were opened")
	}
	if Ino(files["user"]) == Ino(setup) {
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

func Ino(f *os.File) uint64 {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// helperNamespaces makes the two user namespaces the host's own work
// runs in: one for tmux clients and setup scripts, one for checks. Both
// are children of the setup user namespace, siblings of the agent's, and
// map the shell's uid to the same host identity as the agent's, so files
// look the same from all three; but a process of one cannot trace a
// process of another (the kernel's capability check for ptrace wants
// CAP_SYS_PTRACE in the tracee's user namespace, which only an ancestor's
// owner has), whatever the host's Yama setting. They are made before the
// agent runs anything, with the setup namespace's user.max_user_namespaces
// at 3: the agent's and these two. (bwrap's --disable-userns sets it to 1,
// the agent's alone.) With all three in use, no process of the sandbox can
// make another user namespace.
func (s *Sandbox) helperNamespaces(ctx context.Context) error {
	setup := s.Ns[FdSetupUser-3]
	for i := range 2 {
		limit := ""
		if i == 0 {
			limit = "echo 3 > /proc/sys/user/max_user_namespaces || exit 1; "
		}
		uid := strconv.Itoa(s.spec.uid())
		// No pid or mount namespace is entered, so nsenter does not fork and
		// the process that ends up in the new namespace is cmd's.
		a := []string{"--user=/proc/self/fd/3", "--preserve-credentials"}
		if os.Geteuid() == 0 {
			a = []string{"--user=/proc/self/fd/3", "-S", "0", "-G", "0"}
		}
		a = append(a, "--", "sh", "-c", "exec 3<&-; "+limit+"exec unshare --user --map-user="+uid+" --map-group="+uid+" -- sh -c 'echo; read -r _'")
		cmd := exec.CommandContext(ctx, "nsenter", a...)
		cmd.ExtraFiles = []*os.File{setup}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if os.Geteuid() == 0 {
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
		}
		errs := mcpclient.NewTailBuffer(4 << 10)
		cmd.Stderr = errs
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("make helper user namespace: %w", err)
		}
		b := make([]byte, 1)
		_, rerr := io.ReadFull(stdout, b)
		var f *os.File
		if rerr == nil {
			f, err = os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/user")
			if err == nil {
				err = checkParent(f, setup)
			}
		}
		stdin.Close()
		werr := cmd.Wait()
		switch {
		case rerr != nil:
			return fmt.Errorf("make helper user namespace: %v: %s", werr, strings.TrimSpace(errs.String()))
		case err != nil:
			if f != nil {
				f.Close()
			}
			return fmt.Errorf("helper user namespace: %w", err)
		}
		s.Ns = append(s.Ns, f)
	}
	return nil
}

// checkParent makes sure ns is a child of parent (and so not the host's or
// one the process could have chosen).
func checkParent(ns, parent *os.File) error {
	p, err := nsIoctl(ns, nsGetParent)
	if err != nil {
		return err
	}
	defer p.Close()
	if Ino(p) != Ino(parent) || Ino(ns) == Ino(parent) {
		return errors.New("not a child of the sandbox's setup user namespace")
	}
	return nil
}

// command returns a command that runs argv inside the sandbox, in dir, as
// the shell's user, with no capabilities, no_new_privs and the sandbox's
// rlimits. It is the only way the host starts anything inside; nothing of
// it runs on the host but nsenter, whose working directory and files are
// never under a path the sandbox can write. The tmux clients run inside
// too: a tmux server (the agent's) can make a client write files (hooks
// running save-buffer, MSG_WRITE_OPEN) or exec any program (MSG_SHELL);
// inside, that happens as the agent, in the run's throw-away namespaces.
//
// kindWorld starts the agent's world: a new pid namespace, child of the
// sandbox's, with its own /proc, in the agent's user namespace.
// Everything the agent runs lives there.
//
// Every other kind runs in a pid namespace made for that run alone, a
// sibling of the agent's: nothing started earlier — by the agent, by a
// setup script, by a tmux client a fake server commanded — can see,
// signal or trace it, and when the run ends the namespace ends, with
// everything started in it, setsid daemons included. Its first process (a
// supervisor, root of the setup user namespace: capabilities there, so no
// process of the sandbox may trace or signal it) starts the run and exits
// with its status; the kernel then kills what is left in the namespace
// before the status reaches the host. The run itself enters a helper user
// namespace (see [sandbox.helperNamespaces]): tmux clients and setup
// scripts one, checks the other. Each run has a mount namespace of its own
// whose /proc shows its own pid namespace only (so ps works, and a check
// sees none of the agent's processes, as they see none of its); checks
// and setup scripts also get a fresh tmpfs at privateDir there, and
// checks a fresh /dev/shm.
//
// The chain: nsenter enters the setup user namespace as its root and the
// sandbox's other namespaces; unshare makes the pid and mount namespaces
// (with their /proc) and forks the world or a run's supervisor; nsenter
// enters the user namespace of the run (the agent's for the world)
// keeping credentials
// (so root there only if the task asked for it); setpriv empties the
// bounding set and sets no_new_privs; prlimit sets the limits; bash
// closes the namespace descriptors and changes directory. The process
// group is killed on ctx's end; the supervisor is in it, and its death
// ends the run's namespace.
func (s *Sandbox) Command(ctx context.Context, kind Kind, dir string, argv ...string) *exec.Cmd {
	fd := func(n int) string { return "/proc/self/fd/" + strconv.Itoa(n) }
	// Root becomes the setup namespace's root (the host's nobody); any
	// other user already is it, and may not call setgroups, which -S and
	// -G imply.
	a := []string{"--user=" + fd(FdSetupUser), "--preserve-credentials"}
	if os.Geteuid() == 0 {
		a = []string{"--user=" + fd(FdSetupUser), "-S", "0", "-G", "0"}
	}
	a = append(a,
		"--mount="+fd(fdMnt), "--pid="+fd(fdPid), "--net="+fd(fdNet),
		"--ipc="+fd(fdIPC), "--uts="+fd(fdUTS), "--cgroup="+fd(fdCgroup), "--")
	user := FdUser
	var closeFDs strings.Builder
	if kind == KindWorld {
		a = append(a, "unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--")
		for n := FdSetupUser; n < FdSetupUser+fdCount; n++ {
			fmt.Fprintf(&closeFDs, "exec %d<&-; ", n)
		}
	} else {
		user = fdClientUser
		if kind == KindCheck {
			user = FdCheckUser
		}
		priv := ""
		a = append(a, "unshare", "--pid", "--fork", "--kill-child", "--mount-proc")
		if kind == KindSetup || kind == KindCheck {
			// Their own network and IPC namespaces too: the agent can bind
			// abstract unix sockets (named by the network namespace, not
			// by a file) and make System V IPC objects, and a check that
			// connects to a well-known name must not find the agent's.
			a = append(a, "--net", "--ipc")
			priv = fmt.Sprintf("mount -t tmpfs -o size=%d,mode=0700,nosuid,nodev tmpfs %s || exit 125; ", privateBytes, privateDir)
		}
		if kind == KindCheck {
			// And a /dev/shm of its own: the sandbox's is the agent's to
			// write, so POSIX shared memory and semaphores a check makes
			// (Python's multiprocessing, shm_open under a fixed name, a
			// temp file put there) could be read, pre-made or changed
			// under it by the agent's processes, which keep running.
			priv += fmt.Sprintf("mount -t tmpfs -o size=%d,mode=1777,nosuid,nodev tmpfs /dev/shm || exit 125; ", ShmBytes)
		}
		// The supervisor keeps only the run's user namespace, which the
		// run's own bash closes before anything of the run starts.
		var sup strings.Builder
		for n := FdSetupUser; n < FdSetupUser+fdCount; n++ {
			if n != user {
				fmt.Fprintf(&sup, "exec %d<&-; ", n)
			}
		}
		sup.WriteString(priv + `"$@" & wait $!`)
		a = append(a, "bash", "-c", sup.String(), "supervisor")
		fmt.Fprintf(&closeFDs, "exec %d<&-; ", user)
	}
	a = append(a, "nsenter", "--user="+fd(user), "--preserve-credentials", "--",
		"setpriv", "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--",
		"prlimit")
	lim := s.spec.Limits
	if kind != KindWorld {
		// The process limit counts the agent's processes and the host's
		// alike (one user): checks and tmux clients get a reserve above
		// it, so an agent at its limit cannot starve them.
		lim.Processes += ProcessReserve
	}
	a = append(a, lim.prlimitArgs()...)
	a = append(a, "--", "bash", "-c", closeFDs.String()+`cd -- "$0" || exit 125; exec "$@"`, dir)
	a = append(a, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", a...)
	cmd.Env = runEnv(s.spec.Env, kind)
	cmd.ExtraFiles = s.Ns
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

// close kills the sandbox: bwrap's death kills its first process
// (--die-with-parent), whose death ends its pid namespace and every one
// nested in it, so nothing the agent or a check started survives.
func (s *Sandbox) Close() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	for _, f := range s.Ns {
		f.Close()
	}
	s.Ns = nil
}

// oPath is Linux's O_PATH, which package syscall does not name.
const oPath = 0x200000

// killGroup kills the process group led by pid.
func KillGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
