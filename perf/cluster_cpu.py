#!/usr/bin/env python3
"""What a cluster costs: CPU per step and steps per second of one node
(SQLite), one node (embedded JetStream), three nodes (embedded JetStream,
streams replicated on all three: R3) stepped through random nodes, the
same with each session stepped through the node that created it
(sticky: nothing is forwarded), and three nodes with unreplicated
streams (R1); and how long a dead node's sessions wait for another node.
One more setup takes the cluster apart (name it in CLUSTER_CPU_SETUPS):
"jetstream x3 R3 home" creates and steps every session through one node of
three R3 nodes, so the cluster stores and replicates every step as in the
other R3 setups but one process does all the HTTP and publishing work. For
setups of several nodes the script prints each node's share of the CPU per
step (of the nodes that serve no steps, the stream's leader spends more than
its followers).
Run by hand:

    go build -o /tmp/aw ./cmd/agentworld
    python3 perf/cluster_cpu.py /tmp/aw [SESSIONS] [TURNS] [CLIENTS]   # 1000 4 64

Every setup answers with the embedded replay (no model server), so the
CPU measured is the nodes' own: HTTP, routing, forwarding, storage. Each
client steps its sessions through a random node (but sticky), over one
kept-alive connection per node, opened before the measured window (as an
RL trainer's HTTP client holds its connections). The script
reads each node process's user+system time from /proc before and after
the stepping and prints CPU per step, steps per second and their ratios,
all measured in this one run. Three nodes with R3 then lose one node to
SIGKILL: the script steps sessions of the dead node and of the live ones
through the other two, one client per session, until each is served
again, and prints the time from the kill to the first and to the last of
the dead node's, that time less the lease (the dead node's lease ran out
between two thirds of a lease and a whole lease after the kill, as a
node renews it every third), and to the last of the live nodes'. Loopback only; the
nodes are stopped at the end. Linux only (/proc).

With CLUSTER_CPU_PERF=DIR set, `perf record -g` samples every node during
the stepping into DIR/SETUP-NODE.data (for `perf report`); CLUSTER_CPU_SETUPS
names the setups to run, comma-separated (default all). CLUSTER_CPU_ROUNDS=N
runs all of them N times, one after the other in each round, and gives
every ratio for each round (setups of one round ran within minutes of each
other on a machine whose load changes) and their median; the takeover is
measured in the first round only.

Nodes of a setup share the machine's cores, so each node gets its share:
GOMAXPROCS set to cores / nodes (at least 1), as docs/deployment.md tells
users to run nodes that share a machine, and as a node with a machine of
its own has; CLUSTER_CPU_SHARE=0 leaves every node Go's default (all the
cores), and a GOMAXPROCS in the script's environment is passed on as it is
(with CLUSTER_CPU_QUOTA the Go runtime sizes it from each node's cgroup).

With CLUSTER_CPU_QUOTA=C set (cores, e.g. 0.4), every node runs in a cgroup of
its own limited to C cores (cgroup v1 cpu.cfs_quota_us or v2 cpu.max; the
script must be allowed to make cgroups, as root in most containers), so one
node is bound by its CPU and three nodes need only 3C cores: on a machine
with fewer cores than nodes, steps per second of one and three nodes can
then be compared with linear scaling (3x) while the clients keep cores of
their own.
"""
import collections
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN = sys.argv[1]
SESSIONS = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
TURNS = int(sys.argv[3]) if len(sys.argv) > 3 else 4
CLIENTS = int(sys.argv[4]) if len(sys.argv) > 4 else 64
LEASE = 2.0  # seconds; --lease of every JetStream node
TAKEOVER_SESSIONS = 50
TICK = os.sysconf("SC_CLK_TCK")
SETUPS = tuple(os.environ.get("CLUSTER_CPU_SETUPS", "sqlite x1,jetstream x1,jetstream x3 R3,jetstream x3 R3 sticky,jetstream x3 R1").split(","))
PERF = os.environ.get("CLUSTER_CPU_PERF")
ROUNDS = int(os.environ.get("CLUSTER_CPU_ROUNDS", "1"))
QUOTA = float(os.environ.get("CLUSTER_CPU_QUOTA", "0"))
SHARE = os.environ.get("CLUSTER_CPU_SHARE", "1") != "0"
CGROUPS = []  # the cgroups of the running nodes (CLUSTER_CPU_QUOTA)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Client:
    """One kept-alive connection per node, reopened after an error."""

    def __init__(self, ports):
        self.ports = ports
        self.conns = {}

    def request(self, port, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(2):
            c = self.conns.get(port)
            if c is None:
                c = self.conns[port] = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            try:
                c.request(method, path, body=data, headers={"Content-Type": "application/json"})
                r = c.getresponse()
                return r.status, r.read()
            except (OSError, http.client.HTTPException):
                c.close()
                del self.conns[port]
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def close(self):
        for c in self.conns.values():
            c.close()


def start(setup, work):
    n = 3 if "x3" in setup else 1
    ports = [free_port() for _ in range(n)]
    routes = ",".join(f"nats://127.0.0.1:{free_port()}" for _ in range(n))
    procs = []
    for i in range(n):
        args = [BIN, "serve", "--addr", f"127.0.0.1:{ports[i]}", "--log-level", "warn"]
        if setup == "sqlite x1":
            args += ["--db", os.path.join(work, "s.db")]
        else:
            args += ["--nats-store", os.path.join(work, f"n{i}"), "--node", f"n{i}", "--lease", f"{LEASE}s"]
        if n == 3:
            args += ["--nats-listen", routes.split(",")[i][len("nats://"):], "--nats-routes", routes,
                     "--nats-replicas", setup.split(" R")[1][0]]
        env = dict(os.environ)
        if SHARE and not QUOTA and "GOMAXPROCS" not in env:
            # Nodes sharing a machine get their share of its cores, as
            # docs/deployment.md tells users to (a node's runtime otherwise
            # believes it has them all); a quota's cgroup already sizes it.
            env["GOMAXPROCS"] = str(max(1, (os.cpu_count() or 1) // n))
        procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, f"log{i}"), "w"), env=env))
        if QUOTA:
            CGROUPS.append(cgroup_limit(procs[-1].pid, QUOTA))
    deadline = time.time() + 120
    probe = Client(ports)
    for p in ports:
        while True:
            try:
                if probe.request(p, "GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise SystemExit(f"{setup}: a node did not start; see {work}")
            time.sleep(0.2)
    probe.close()
    return procs, ports


def cgroup_limit(pid, cores):
    """Moves process pid into a new cgroup limited to cores CPUs; returns
    the cgroup's directory, which the caller removes after pid ended."""
    period = 100000
    v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    root = "/sys/fs/cgroup" if v2 else "/sys/fs/cgroup/cpu"
    d = os.path.join(root, f"agentworld-cluster-cpu-{pid}")
    os.mkdir(d)
    if v2:
        with open(os.path.join(d, "cpu.max"), "w") as f:
            f.write(f"{int(cores * period)} {period}")
    else:
        with open(os.path.join(d, "cpu.cfs_period_us"), "w") as f:
            f.write(str(period))
        with open(os.path.join(d, "cpu.cfs_quota_us"), "w") as f:
            f.write(str(int(cores * period)))
    with open(os.path.join(d, "cgroup.procs"), "w") as f:
        f.write(str(pid))
    return d


def create(client, port):
    st, out = client.request(port, "POST", "/v1/sessions", {"world_id": "python-terminal"})
    assert st // 100 == 2, out
    return json.loads(out)["session_id"]


def step(client, port, sid, turn):
    action = [{"keystrokes": f"echo {sid} {turn}\n", "duration": 0.1}]
    return client.request(port, "POST", f"/v1/sessions/{sid}/step", {"action": action, "turn": turn})


def takeover(procs, ports):
    """Kills node 0 once TAKEOVER_SESSIONS sessions of node 0 and as many
    of the other nodes have a turn, then steps every one of them once more
    through a random other node, one client per session, each retrying
    (every 50 ms) until it is served; returns the seconds from the kill to
    the first and the last served step of node 0's sessions, and to the
    last of the others' (how long the kill held up sessions whose node
    lived: the elections of the streams and buckets the dead node led)."""
    c = Client(ports)
    homes = [0] * TAKEOVER_SESSIONS + [1 + i % 2 for i in range(TAKEOVER_SESSIONS)]
    ids = [create(c, ports[h]) for h in homes]
    for sid, h in zip(ids, homes):
        st, out = step(c, ports[h], sid, 1)
        assert st == 200, out
    c.close()
    procs[0].send_signal(signal.SIGKILL)
    procs[0].wait()
    killed = time.time()
    served = [None] * len(ids)

    def one(i):
        cl = Client(ports)
        while time.time() < killed + 120:
            try:
                st, _ = step(cl, random.choice(ports[1:]), ids[i], 2)
            except OSError:
                st = 0
            if st == 200:
                served[i] = time.time() - killed
                break
            time.sleep(0.05)
        cl.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(ids))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if None in served:
        raise SystemExit(f"takeover: {served.count(None)} sessions not served 120 s after the kill")
    dead = served[:TAKEOVER_SESSIONS]
    return min(dead), max(dead), max(served[TAKEOVER_SESSIONS:])


def run(setup, measure_takeover=True):
    work = tempfile.mkdtemp(prefix="aw-cluster-cpu-")
    procs, ports = start(setup, work)
    try:
        c = Client(ports)
        homes = [random.choice(ports) for _ in range(SESSIONS)]
        if setup.endswith(" home"):
            homes = [ports[0]] * SESSIONS
        ids = [create(c, p) for p in homes]
        sticky = setup.endswith(" sticky") or setup.endswith(" home")
        c.close()
        # Every client opens its connections before the measured window:
        # what is measured is the steps, not connection set-up.
        clients = [Client(ports) for _ in range(CLIENTS)]
        for cl in clients:
            for p in ports:
                st, out = cl.request(p, "GET", "/health")
                assert st == 200, out
        perfs = []
        if PERF:
            for k, p in enumerate(procs):
                out = os.path.join(PERF, f"{setup.replace(' ', '')}-{k}.data")
                perfs.append(subprocess.Popen(["perf", "record", "-F", "499", "-g", "-p", str(p.pid), "-o", out],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            time.sleep(1)  # perf attaches
        befores = [cpu(p.pid) for p in procs]
        queue = list(range(SESSIONS))
        lock = threading.Lock()
        errors = []
        retries = collections.Counter()  # error code of each retryable 503

        def worker(c):
            while True:
                with lock:
                    if not queue:
                        break
                    i = queue.pop()
                for turn in range(1, TURNS + 1):
                    for _ in range(20):
                        st, out = step(c, homes[i] if sticky else random.choice(ports), ids[i], turn)
                        if st != 503 or b'"retryable":true' not in out:
                            break
                        with lock:  # a retryable refusal: ask again, as a client should
                            retries[json.loads(out)["error"]["code"]] += 1
                        time.sleep(0.05)
                    if st != 200:
                        errors.append(out)
                        break
            c.close()

        t0 = time.time()
        threads = [threading.Thread(target=worker, args=(cl,)) for cl in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - t0
        afters = [cpu(p.pid) for p in procs]
        used = sum(afters) - sum(befores)
        shares = [(x - b) / (SESSIONS * TURNS) * 1000 for x, b in zip(afters, befores)]
        for p in perfs:
            p.send_signal(signal.SIGINT)
        for p in perfs:
            p.wait()
        if errors:
            raise SystemExit(f"{setup}: {len(errors)} steps failed, first: {errors[0][:300]}")
        steps = SESSIONS * TURNS
        if retries:
            print(f"  {setup}: retryable 503s asked again: {dict(retries)}")
        taken = takeover(procs, ports) if setup == "jetstream x3 R3" and measure_takeover else None
        return used / steps * 1000, steps / wall, taken, used / wall, shares
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            p.wait()
        while CGROUPS:
            os.rmdir(CGROUPS.pop())
        shutil.rmtree(work, ignore_errors=True)


def spread(xs):
    """A list of per-round values as "a (a-b, median m)" when there are several."""
    xs = sorted(xs)
    med = xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2
    if len(xs) == 1:
        return f"{med:.2f}x"
    return f"{med:.2f}x median ({xs[0]:.2f}-{xs[-1]:.2f} over {len(xs)} rounds)"


def main():
    limit = f", each node limited to {QUOTA:g} cores" if QUOTA else ""
    if SHARE and not QUOTA and "GOMAXPROCS" not in os.environ:
        limit += f", GOMAXPROCS {max(1, (os.cpu_count() or 1) // 3)} for each of three nodes"
    print(f"{SESSIONS} sessions x {TURNS} turns, {CLIENTS} clients, {os.cpu_count()} cores{limit}, load {os.getloadavg()[0]:.1f}")
    rounds = []  # each round's results by setup
    for r in range(ROUNDS):
        results = {}
        for setup in SETUPS:
            ms, sps, taken, busy, shares = results[setup] = run(setup, measure_takeover=r == 0)
            tag = f"round {r + 1} " if ROUNDS > 1 else ""
            print(f"{tag}{setup:22s} {ms:5.2f} ms CPU per step (all nodes) {sps:6.0f} steps/s {busy:5.2f} cores busy"
                  f", load {os.getloadavg()[0]:.1f}")
            if len(shares) > 1:
                print(f"  {setup}: each node's CPU per step (ms): {', '.join(f'{x:.3f}' for x in shares)}")
            if taken:
                first, last, live = taken
                print(f"  takeover after SIGKILL of one node ({TAKEOVER_SESSIONS} of its sessions, lease {LEASE:g} s): "
                      f"first step served {first:.2f} s after the kill, last {last:.2f} s; "
                      f"after the lease ran out: {first - LEASE:.2f}-{first - LEASE * 2 / 3:.2f} s to the first, "
                      f"{last - LEASE:.2f}-{last - LEASE * 2 / 3:.2f} s to the last; "
                      f"the live nodes' sessions ({TAKEOVER_SESSIONS}) all served again {live:.2f} s after the kill")
        rounds.append(results)
    for base in ("sqlite x1", "jetstream x1"):
        if base not in SETUPS:
            continue
        for setup in SETUPS:
            if setup == base or (base == "jetstream x1" and setup == "sqlite x1"):
                continue
            cpu_ratio = [res[setup][0] / res[base][0] for res in rounds]
            sps_ratio = [res[setup][1] / res[base][1] for res in rounds]
            print(f"{setup} / {base}: CPU per step {spread(cpu_ratio)}, steps/s {spread(sps_ratio)}")
    # Linear scaling would be 3x one node's steps/s; it needs the cores
    # for it, and one JetStream node that is bound by its CPU, not by
    # waiting for its disk ("cores busy" says which).
    if "jetstream x1" in SETUPS:
        for setup in SETUPS:
            if "x3" in setup and not setup.endswith(" home"):
                scale = [res[setup][1] / res["jetstream x1"][1] for res in rounds]
                busy = ", ".join(f"{res[setup][3]:.2f} vs {res['jetstream x1'][3]:.2f}" for res in rounds)
                print(f"scaling, {setup} / jetstream x1: steps/s {spread(scale)} (linear: 3x), "
                      f"{spread([x / 3 for x in scale])} of linear; cores busy {busy} "
                      f"of {os.cpu_count()}, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
