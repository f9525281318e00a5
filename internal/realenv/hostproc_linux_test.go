package realenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentworld/agentworld/internal/mcpclient"
	"github.com/agentworld/agentworld/internal/sandbox"
	"github.com/agentworld/agentworld/internal/testkit"
)

// TestHostNeverOpensSandboxPaths watches, with fanotify permission events,
// every open on the filesystems the sandbox can write — the one holding the
// work dir (a tmpfs of the test's own), and the sandbox's /tmp, /dev/shm
// and tmux directory — while an agent plants symlinks, FIFOs and a fake
// tmux server there and the host steps, captures, runs setup and checks.
// An open is made by a host-side process when the opener's user namespace
// is the host's or the sandbox's setup namespace (bwrap, nsenter, unshare,
// the run supervisors, this process); the agent's and the runs' own
// processes are in the sandbox's other user namespaces. Permission events
// stop the opener until it is classified, so nothing is missed, unlike
// sampling /proc. None may come from the host side between Start and
// Close (Close deletes the work dir after every sandbox process is dead).
// The test then opens a file of the work dir itself, which must be caught,
// so the watch is known to work. Host-side helpers' working directories
// are sampled too. It runs in a child process with a mount namespace of
// its own, where it mounts the tmpfs.
func TestHostNeverOpensSandboxPaths(t *testing.T) {
	requireAttackTools(t)
	if os.Geteuid() != 0 {
		t.Skip("fanotify permission events and a tmpfs mount need root")
	}
	t.Parallel()
	out := filepath.Join(t.TempDir(), "report.json")
	child := testkit.Child("TestHelperHostOpens", "AGENTWORLD_TEST_HOSTOPENS="+out)
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "--"}, append(child.Args, "-test.v")...)...)
	cmd.Env = child.Env
	log := mcpclient.NewTailBuffer(64 << 10)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, log.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("child wrote no report: %v\n%s", err, log.String())
	}
	var rep hostOpenReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d opens watched (%d by the sandbox's own processes), %d cwd samples of host-side processes", rep.Events, rep.Sandboxed, rep.Samples)
	if rep.Events == 0 || rep.Sandboxed == 0 {
		t.Fatalf("the watch saw nothing: %+v", rep)
	}
	if len(rep.Control) == 0 {
		t.Errorf("the test's own open of a work dir file was not caught: the watch does not work")
	}
	for _, v := range rep.Violations {
		t.Errorf("a host-side process opened a sandbox path: %s", v)
	}
}

type hostOpenReport struct {
	Events, Sandboxed, Samples int
	Violations, Control        []string
}

// TestHelperHostOpens is TestHostNeverOpensSandboxPaths's child.
func TestHelperHostOpens(t *testing.T) {
	out := testkit.ChildEnv(t, "AGENTWORLD_TEST_HOSTOPENS", "TestHostNeverOpensSandboxPaths")
	base := "/mnt"
	if err := unix.Mount("tmpfs", base, "tmpfs", 0, "size=64m,mode=0711"); err != nil {
		t.Fatalf("mount a tmpfs at %s (in the child's own mount namespace): %v", base, err)
	}
	self, err := os.Stat("/proc/self/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	w := &openWatch{host: map[uint64]bool{statIno(self): true}, devs: map[uint64]bool{}, self: os.Getpid()}
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_CONTENT|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY|unix.O_LARGEFILE)
	if err != nil {
		t.Skipf("fanotify: %v", err)
	}
	w.fd = fd
	mark := func(path string) {
		if err := unix.FanotifyMark(fd, unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, unix.FAN_OPEN_PERM|unix.FAN_ONDIR, unix.AT_FDCWD, path); err != nil {
			t.Fatalf("fanotify mark %s: %v", path, err)
		}
	}
	mark(base)
	done := make(chan struct{})
	go func() { defer close(done); w.run() }()

	// The first terminal's start is watched too (its setup script, its work
	// dir listing). Its work dir is the only one on the tmpfs.
	term, _ := startTerminal(t, &TerminalOptions{TempDir: base, Setup: "mkdir -p sub && ln -s /etc/shadow sub/shadow && mkfifo sub/fifo && echo setup > setup.txt"})
	root := fmt.Sprintf("/proc/%d/root", term.world.Process.Pid)
	w.mu.Lock()
	w.host[sandbox.Ino(term.sb.Ns[sandbox.FdSetupUser-3])] = true
	for _, p := range []string{"/tmp", "/dev/shm", sandbox.TmuxDir} {
		mark(root + p)
		fi, err := os.Stat(root + p)
		if err != nil {
			t.Fatal(err)
		}
		w.devs[uint64(fi.Sys().(*syscall.Stat_t).Dev)] = true
	}
	w.mu.Unlock()
	stopSampling := w.sampleCwd(os.Getpid())

	ctx := context.Background()
	plant := `for d in /app /app/sub /tmp /dev/shm ` + sandbox.TmuxDir + `; do ln -s / $d/root; ln -s /etc/shadow $d/shadow; mkfifo $d/fifo; mkdir -p $d/dir; echo x > $d/file; done 2>/dev/null; echo planted > /app/probe`
	step(t, term, keys(plant+"\n", 0.5))
	waitExec(t, term, "test -f probe")
	for _, s := range []string{"ls -la /app /tmp\n", "cat /app/file\n"} {
		step(t, term, keys(s, 0.2))
	}
	term.WaitIdle(ctx, time.Second)
	if _, code, err := term.Exec(ctx, "cat file sub/fifo </dev/null & sleep 0.2; ls -la /tmp /dev/shm; find /app >/dev/null"); err != nil || code != 0 {
		t.Fatalf("check: exit %d, %v", code, err)
	}
	// A fake tmux server: the host's clients now run evil.sh.
	step(t, term, keys(`cat > /tmp/fake.py <<'EOF'`+"\n"+fakeServerForHostTest+"\nEOF\n", 0.3))
	step(t, term, keys(`mv `+sandbox.TmuxSock+` `+sandbox.TmuxDir+`/real.sock && (setsid -f python3 /tmp/fake.py `+sandbox.TmuxSock+` >/dev/null 2>&1 </dev/null) && until [ -S `+sandbox.TmuxSock+` ]; do sleep 0.1; done`+"\n", 1))
	for range 3 {
		term.Screen(ctx)
	}
	term.WaitIdle(ctx, time.Second)
	if _, _, err := term.Exec(ctx, "ls /app >/dev/null"); err != nil {
		t.Fatal(err)
	}
	stopSampling()

	// The control: this process is host-side; its open must be caught.
	w.mu.Lock()
	w.control = true
	w.mu.Unlock()
	if _, err := os.ReadFile(filepath.Join(term.WorkDirHost(), "probe")); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	rep := w.report(base)
	term.Close()
	w.mu.Lock()
	w.stop = true
	w.mu.Unlock()
	<-done
	unix.Close(fd)
	b, _ := json.Marshal(rep)
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeServerForHostTest answers every tmux client with MSG_SHELL naming
// /bin/sh, with no command: the client execs `sh -c` (an error), the most
// a fake server can make a client do.
const fakeServerForHostTest = `import os, socket, struct, sys, threading
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sys.argv[1]); srv.listen(16)
while True:
    c, _ = srv.accept()
    threading.Thread(target=lambda c: [c.recv(65536), c.sendall(struct.pack("=IHHII", 209, 16 + 8, 0, 8, 0) + b"/bin/sh\0")], args=(c,), daemon=True).start()`

// waitExec polls a check until it succeeds (two minutes at most: a hang
// guard).
func waitExec(t *testing.T, term *Terminal, script string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, code, err := term.Exec(context.Background(), script); err == nil && code == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q never held", script)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// openWatch answers fanotify permission events, recording each open of a
// sandbox path with its opener's user namespace, to be judged once the
// sandbox's setup namespace is known.
type openWatch struct {
	fd   int
	self int

	mu      sync.Mutex
	host    map[uint64]bool // user namespaces (inode) of the host side
	devs    map[uint64]bool // the sandbox's own filesystems
	opens   []openEvent
	samples int
	cwds    []string // host-side processes found working in a sandbox path
	control bool     // the test's own control open is under way
	closing bool     // Close is deleting the work dir: not counted
	stop    bool     // run returns
}

type openEvent struct {
	pid      int
	ns       uint64
	dev, ino uint64
	what     string
	control  bool
}

// isWork reports whether a host path of the work dir's tmpfs is in the
// work dir.
func isWork(path string) bool {
	rest, ok := strings.CutPrefix(path, "/mnt/"+sandbox.TermDirPrefix)
	if !ok {
		return false
	}
	_, rest, _ = strings.Cut(rest, "/")
	return rest == "work" || strings.HasPrefix(rest, "work/")
}

// hostFiles are the inodes of the work dir's tmpfs that are not the work
// dir's: the tmpfs root, the terminal's directory, its lock and its
// control directory (read-only inside; the sandbox's /etc/passwd is one of
// them).
func hostFiles(base string) (dev uint64, inos map[uint64]bool) {
	inos = map[uint64]bool{}
	add := func(p string) {
		if fi, err := os.Lstat(p); err == nil {
			st := fi.Sys().(*syscall.Stat_t)
			dev = uint64(st.Dev)
			inos[st.Ino] = true
		}
	}
	add(base)
	dirs, _ := filepath.Glob(filepath.Join(base, sandbox.TermDirPrefix+"*"))
	for _, d := range dirs {
		add(d)
		add(filepath.Join(d, "lock"))
		add(filepath.Join(d, "ctl"))
		ctl, _ := os.ReadDir(filepath.Join(d, "ctl"))
		for _, e := range ctl {
			add(filepath.Join(d, "ctl", e.Name()))
		}
	}
	return dev, inos
}

func (w *openWatch) run() {
	buf := make([]byte, 64<<10)
	for {
		w.mu.Lock()
		stop := w.stop
		w.mu.Unlock()
		if stop {
			return
		}
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}, 100); err != nil && err != unix.EINTR {
			return
		}
		n, err := unix.Read(w.fd, buf)
		if err != nil || n <= 0 {
			if err == unix.EINTR || err == unix.EAGAIN {
				continue
			}
			return
		}
		for off := 0; off+int(unsafe.Sizeof(unix.FanotifyEventMetadata{})) <= n; {
			m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&buf[off]))
			if m.Event_len == 0 {
				break
			}
			w.record(int(m.Pid), int(m.Fd))
			resp := unix.FanotifyResponse{Fd: m.Fd, Response: unix.FAN_ALLOW}
			unix.Write(w.fd, (*[unsafe.Sizeof(resp)]byte)(unsafe.Pointer(&resp))[:])
			if m.Fd >= 0 {
				unix.Close(int(m.Fd))
			}
			off += int(m.Event_len)
		}
	}
}

// record notes one open of the work dir or of the sandbox's filesystems
// (the lock and control files beside the work dir are the host's own).
// The opener waits in open(2) meanwhile, so its user namespace is the one
// it opened from.
func (w *openWatch) record(pid, fd int) {
	path, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return
	}
	var ns uint64
	if fi, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/ns/user"); err == nil {
		ns = statIno(fi)
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return
	}
	w.opens = append(w.opens, openEvent{pid: pid, ns: ns, dev: uint64(st.Dev), ino: st.Ino, control: w.control,
		what: fmt.Sprintf("pid %d (%s) opened %s", pid, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " ")), path)})
}

// report judges the recorded opens; base is the work dir's tmpfs.
func (w *openWatch) report(base string) hostOpenReport {
	baseDev, hostIno := hostFiles(base)
	w.mu.Lock()
	defer w.mu.Unlock()
	rep := hostOpenReport{Samples: w.samples, Violations: w.cwds}
	for _, e := range w.opens {
		if e.dev == baseDev && hostIno[e.ino] {
			continue
		}
		rep.Events++
		switch {
		case !w.host[e.ns]:
			rep.Sandboxed++
		case e.control && e.pid == w.self:
			rep.Control = append(rep.Control, e.what)
		default:
			rep.Violations = append(rep.Violations, e.what)
		}
	}
	return rep
}

// sampleCwd checks, every 20 ms until stopped, the working directory of
// every host-side descendant of pid: none may be in the work dir or on the
// sandbox's filesystems.
func (w *openWatch) sampleCwd(pid int) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for _, p := range descendants(pid) {
				dir := "/proc/" + strconv.Itoa(p)
				ns, err1 := os.Stat(dir + "/ns/user")
				cwd, err2 := os.Stat(dir + "/cwd")
				path, err3 := os.Readlink(dir + "/cwd")
				if err1 != nil || err2 != nil || err3 != nil {
					continue
				}
				w.mu.Lock()
				if w.host[statIno(ns)] {
					w.samples++
					if w.devs[uint64(cwd.Sys().(*syscall.Stat_t).Dev)] || isWork(path) {
						w.cwds = append(w.cwds, fmt.Sprintf("pid %d works in %s", p, path))
					}
				}
				w.mu.Unlock()
			}
		}
	}()
	return func() { close(quit); <-done }
}

// descendants lists pid's descendants (not pid).
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
		for _, task := range tasks {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/task/" + task.Name() + "/children")
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}
