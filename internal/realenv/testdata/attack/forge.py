# An exit-status forger, as an agent would leave one running: for up to
# SECONDS it looks in /proc for processes whose command line holds the
# marker read from MARKER_FILE (a file, so no command line of its own
# holds it; waited for),
# attaches to each with ptrace and, at its exit system call, rewrites the
# status to 0. It appends what it did to LOG: "seen PID", "denied PID
# ERRNO", "attached PID", "rewrote PID". x86-64 Linux only.
# Usage: python3 forge.py MARKER_FILE SECONDS LOG
import ctypes, os, sys, time

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_CONT, PTRACE_PEEKUSER, PTRACE_POKEUSER, PTRACE_SYSCALL = 7, 3, 6, 24
PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_O_TRACESYSGOOD = 0x4206, 0x4207, 1
ORIG_RAX, RDI = 15 * 8, 14 * 8
EXIT, EXIT_GROUP = 60, 231
WALL = 0x40000000

seconds, log = float(sys.argv[2]), sys.argv[3]
end = time.time() + seconds
marker = b""
while not marker and time.time() < end:
    try:
        with open(sys.argv[1], "rb") as f:
            marker = f.read().strip()
    except OSError:
        time.sleep(0.1)
if not marker:
    sys.exit(0)


def note(s):
    with open(log, "a") as f:
        f.write(s + "\n")


def ptrace(req, pid, addr=0, data=0):
    ctypes.set_errno(0)
    r = libc.ptrace(req, pid, ctypes.c_void_p(addr), ctypes.c_void_p(data))
    return r, ctypes.get_errno()


def forge(pid):
    r, err = ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACESYSGOOD)
    if r != 0:
        note("denied %d %d" % (pid, err))
        return
    note("attached %d" % pid)
    ptrace(PTRACE_INTERRUPT, pid)
    while True:
        try:
            _, status = os.waitpid(pid, WALL)
        except ChildProcessError:
            return
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            return
        sig = 0
        if os.WIFSTOPPED(status):
            s = os.WSTOPSIG(status)
            if s == (5 | 0x80):
                nr, _ = ptrace(PTRACE_PEEKUSER, pid, ORIG_RAX)
                if nr in (EXIT, EXIT_GROUP):
                    ptrace(PTRACE_POKEUSER, pid, RDI, 0)
                    note("rewrote %d" % pid)
            elif s != 5 and (status >> 16) == 0:
                sig = s
        ptrace(PTRACE_SYSCALL, pid, 0, sig)


seen = set()
while time.time() < end:
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid() or int(d) in seen:
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if marker in cmd:
            pid = int(d)
            seen.add(pid)
            note("seen %d" % pid)
            if os.fork() == 0:
                forge(pid)
                os._exit(0)
    time.sleep(0.01)
