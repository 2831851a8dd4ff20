"""`netqos-webhook rebalance` at Kubernetes' documented limits: time and peak memory of the plan.

The same fake API server and cluster as `status`'s scale benchmark (benchmarks/status_scale.py, in
a process of its own so its memory is not counted): the installation, N nodes (10 % net=high, 10 %
net=low, the rest unlabelled; 8 CPUs and 110 pods allocatable each) and P pods, S of them selected
(80 % with the terms, 15 % created before the webhook, 5 % opted out), every pod requesting 100m
and 128Mi, ready, bound seven nodes apart. `netqos-webhook rebalance -o json` (plan only, the
policy read from the webhook's ConfigMap as the command finds it) runs as a child process,
repeatedly: it lists every node and every bound pod (the prediction scores every node), reads the
candidates' ReplicaSets, and plans. Its wall time, CPU time and peak RSS (getrusage of that child)
are reported per run, with the candidates, the movable pods and the median.

    scripts/bench --rebalance-scale                      5,000 nodes, 150,000 pods, 30,000 selected, 3 runs
    scripts/bench --rebalance-scale --cluster diverse    the same sizes, every selected pod its own template
    scripts/bench --rebalance-scale --smoke              a few hundred objects: checks the harness
    scripts/bench --rebalance-scale --nodes N --pods P --selected S --repeat R
    scripts/bench --rebalance-scale --record             also write the table to docs/evidence/rebalance-scale-DATE.md

Each repeat also measures the floor beside it (a plain paginated list of every pod, as
`status`'s scale benchmark does), and each run counts what it read (`benchmarks.readcount`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from benchmarks.status_scale import (
    REPO,
    RUN_TIMEOUT,
    TARGET_RSS_MIB,
    TARGET_SECONDS,
    add_cluster_arguments,
    apply_smoke,
    counted_argv,
    fake_cluster,
    publish,
    reads,
    run_child,
)
from harness import evidence


@dataclass(frozen=True)
class Run:
    seconds: float
    cpu_seconds: float  # user + system time of the rebalance process
    max_rss_mib: float
    exit_code: int
    candidates: int
    movable: int
    server_cpu_seconds: float = 0.0  # the fake API server's CPU time during the run
    lists: int = 0  # list pages decoded
    objects: int = 0  # objects in those pages
    bytes: int = 0  # bytes of every answer decoded (gets and pages)
    floor_seconds: float = 0.0  # the floor's wall time, measured just before
    floor_cpu_seconds: float = 0.0


def measure(kubeconfig: str) -> Run:
    """One `rebalance -o json` in a child process: wall time and peak RSS."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = counted_argv(["rebalance", "--kubeconfig", kubeconfig, "-o", "json"], out.name)
        seconds, cpu_seconds, rss_mib, done = run_child(argv)
        read = reads(out.name)
    if done.returncode not in (0, 3):
        raise SystemExit(f"rebalance failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    summary = json.loads(done.stdout)["summary"]
    return Run(seconds, cpu_seconds, rss_mib, done.returncode, summary["candidates"], summary["movable"], **read)


def floor(kubeconfig: str) -> dict[str, float]:
    """The floor (`status_scale.measure_floor`) in an interpreter of its own: wall and CPU seconds."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.status_scale", "--measure", kubeconfig, "--tree", "floor"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT + 60,
        check=True,
    )
    run = json.loads(done.stdout)
    return {"floor_seconds": run["seconds"], "floor_cpu_seconds": run["cpu_seconds"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench --rebalance-scale", description=__doc__.split("\n\n")[0])
    add_cluster_arguments(parser)
    parser.add_argument("--measure", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    parser.add_argument("--record", action="store_true", help="also write the table to docs/evidence/")
    args = parser.parse_args(argv)
    if args.measure:  # one run, in its own interpreter: RUSAGE_CHILDREN is then this run's alone
        print(json.dumps(measure(args.measure).__dict__))
        return 0
    apply_smoke(args)
    runs = []
    load, started = evidence.load_average(), time.perf_counter()
    with fake_cluster(args.nodes, args.pods, args.selected, args.cluster) as fake:
        for _ in range(args.repeat):
            floor_run = floor(fake.kubeconfig)
            server_before = fake.cpu_seconds()
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.rebalance_scale", "--measure", fake.kubeconfig],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT + 60,
                check=True,
            )
            measured = json.loads(done.stdout) | {"server_cpu_seconds": fake.cpu_seconds() - server_before}
            measured |= floor_run
            runs.append(Run(**measured))
    publish(args, argv, runs, "rebalance-scale", "`rebalance` (the plan)", report, load, started)
    return 0


def report(nodes: int, pods: int, selected: int, cluster: str, runs: list[Run]) -> str:
    seconds = [r.seconds for r in runs]
    rss = [r.max_rss_mib for r in runs]
    lines = [
        f"rebalance (plan) against {nodes:,} nodes, {pods:,} pods ({selected:,} selected, {cluster} templates), "
        f"{len(runs)} run(s):",
        "",
        "| run | wall time (s) | CPU time (s) | fake server CPU (s) | peak RSS (MiB) | lists | objects | MB read "
        "| floor wall (s) | floor CPU (s) | candidates | movable | exit |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {i + 1} | {r.seconds:.1f} | {r.cpu_seconds:.1f} | {r.server_cpu_seconds:.1f} | {r.max_rss_mib:.0f} "
        f"| {r.lists} | {r.objects:,} | {r.bytes / 1e6:.0f} | {r.floor_seconds:.1f} | {r.floor_cpu_seconds:.1f} "
        f"| {r.candidates} | {r.movable} | {r.exit_code} |"
        for i, r in enumerate(runs)
    ]
    floor_s = statistics.median(r.floor_seconds for r in runs)
    lines += [
        "",
        f"median {statistics.median(seconds):.1f} s (min {min(seconds):.1f}, max {max(seconds):.1f}; "
        f"target < {TARGET_SECONDS:.0f} s; {statistics.median(seconds) / floor_s:.2f}x the floor, {floor_s:.1f} s), "
        f"CPU median {statistics.median(r.cpu_seconds for r in runs):.1f} s, "
        f"peak RSS median {statistics.median(rss):.0f} MiB (max {max(rss):.0f}; target < {TARGET_RSS_MIB:.0f} MiB); "
        f"its CPU and the fake server's together (about an idle machine's wall time: the two take turns) "
        f"median {statistics.median(r.cpu_seconds + r.server_cpu_seconds for r in runs):.1f} s",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
