#!/usr/bin/env python3
"""CPU per step and steps per second: one node (SQLite), one node
(embedded JetStream) and three nodes (embedded JetStream, R3), run by hand:

    go build -tags natsserver -o /tmp/aw ./cmd/agentworld
    python3 perf/cluster_cpu.py /tmp/aw [SESSIONS] [TURNS] [CLIENTS]

Every setup answers with the embedded replay (no model server), so the
CPU measured is the nodes' own: HTTP, routing, forwarding, storage. It
reads each node process's user+system time from /proc before and after
the stepping, and prints CPU per step, steps per second and the ratios to
one SQLite node, measured in this one run. Loopback only; the nodes are
stopped at the end. Linux only (/proc).
"""
import http.client
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN = sys.argv[1]
SESSIONS = int(sys.argv[2]) if len(sys.argv) > 2 else 200
TURNS = int(sys.argv[3]) if len(sys.argv) > 3 else 4
CLIENTS = int(sys.argv[4]) if len(sys.argv) > 4 else 16
TICK = os.sysconf("SC_CLK_TCK")


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


def request(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = json.dumps(body).encode() if body is not None else None
    c.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out = r.read()
    c.close()
    return r.status, out


def start(setup, work):
    ports = [free_port() for _ in range(3)]
    routes = ",".join(f"nats://127.0.0.1:{free_port()}" for _ in range(3))
    procs, http_ports = [], []
    n = 3 if setup == "jetstream x3" else 1
    for i in range(n):
        args = [BIN, "serve", "--addr", f"127.0.0.1:{ports[i]}", "--log-level", "warn"]
        if setup == "sqlite x1":
            args += ["--db", os.path.join(work, "s.db")]
        else:
            args += ["--nats-store", os.path.join(work, f"n{i}"), "--node", f"n{i}"]
        if n == 3:
            args += ["--nats-listen", routes.split(",")[i][len("nats://"):], "--nats-routes", routes]
        procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, f"log{i}"), "w")))
        http_ports.append(ports[i])
    deadline = time.time() + 120
    for p in http_ports:
        while True:
            try:
                if request(p, "GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise SystemExit(f"{setup}: a node did not start; see {work}")
            time.sleep(0.2)
    return procs, http_ports


def run(setup):
    work = tempfile.mkdtemp(prefix="aw-cluster-cpu-")
    procs, ports = start(setup, work)
    try:
        ids = []
        for _ in range(SESSIONS):
            st, out = request(random.choice(ports), "POST", "/v1/sessions", {"world_id": "python-terminal"})
            assert st // 100 == 2, out
            ids.append(json.loads(out)["session_id"])
        before = sum(cpu(p.pid) for p in procs)
        queue = list(range(SESSIONS))
        lock = threading.Lock()
        errors = []

        def worker():
            while True:
                with lock:
                    if not queue:
                        return
                    i = queue.pop()
                for turn in range(1, TURNS + 1):
                    action = [{"keystrokes": f"echo {i} {turn}\n", "duration": 0.1}]
                    st, out = request(random.choice(ports), "POST", f"/v1/sessions/{ids[i]}/step", {"action": action, "turn": turn})
                    if st != 200:
                        errors.append(out)
                        return

        t0 = time.time()
        threads = [threading.Thread(target=worker) for _ in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - t0
        used = sum(cpu(p.pid) for p in procs) - before
        if errors:
            raise SystemExit(f"{setup}: {len(errors)} steps failed, first: {errors[0][:300]}")
        steps = SESSIONS * TURNS
        return used / steps * 1000, steps / wall
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    print(f"{SESSIONS} sessions x {TURNS} turns, {CLIENTS} clients, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    results = {}
    for setup in ("sqlite x1", "jetstream x1", "jetstream x3"):
        results[setup] = run(setup)
        ms, sps = results[setup]
        print(f"{setup:13s}  {ms:6.2f} ms CPU per step (all nodes)  {sps:7.0f} steps/s")
    base_ms, base_sps = results["sqlite x1"]
    for setup in ("jetstream x1", "jetstream x3"):
        ms, sps = results[setup]
        print(f"{setup} / sqlite x1: CPU per step {ms / base_ms:.2f}x, steps/s {sps / base_sps:.2f}x")


if __name__ == "__main__":
    main()
