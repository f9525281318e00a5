#!/usr/bin/env python3
"""What a cluster costs while nothing happens: the CPU of idle nodes and
how long they take to start. Run by hand:

    go build -o /tmp/aw ./cmd/agentworld
    python3 perf/cluster_idle.py /tmp/aw [SECONDS] [ROUNDS]   # 30 1

For each setup (CLUSTER_CPU_SETUPS, default "jetstream x1,jetstream x3
R3"), started as perf/cluster_cpu.py starts it, the script prints the
seconds from starting the processes to every node answering /health,
then waits 5 s for the streams' leaders to settle and reads each node's
user+system time from /proc over SECONDS: milliseconds of CPU per second
per node. No request is sent in that window, so what it measures is
standing cost: RAFT heartbeats of every replicated stream and bucket,
the nodes' lease heartbeats and their watch. Linux only (/proc).
"""
import os
import shutil
import sys
import tempfile
import time

SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 1
sys.argv = sys.argv[:2]  # cluster_cpu reads its own arguments
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_cpu  # noqa: E402

SETUPS = tuple(os.environ.get("CLUSTER_CPU_SETUPS", "jetstream x1,jetstream x3 R3").split(","))
SETTLE = 5.0


def idle(setup):
    work = tempfile.mkdtemp(prefix="aw-cluster-idle-")
    t0 = time.time()
    procs, _ = cluster_cpu.start(setup, work)
    started = time.time() - t0
    try:
        time.sleep(SETTLE)
        before = [cluster_cpu.cpu(p.pid) for p in procs]
        t1 = time.time()
        time.sleep(SECONDS)
        wall = time.time() - t1
        used = [cluster_cpu.cpu(p.pid) - b for p, b in zip(procs, before)]
        return started, [u / wall * 1000 for u in used]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    print(f"idle for {SECONDS:g} s after {SETTLE:g} s, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    for r in range(ROUNDS):
        for setup in SETUPS:
            started, per = idle(setup)
            nodes = " ".join(f"{x:5.1f}" for x in per)
            tag = f"round {r + 1} " if ROUNDS > 1 else ""
            print(f"{tag}{setup:22s} started in {started:5.2f} s; idle CPU {sum(per) / len(per):5.1f} ms/s per node"
                  f" (nodes: {nodes}), load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
