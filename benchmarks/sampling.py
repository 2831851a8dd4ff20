"""Sampling on the real kube-scheduler: what `percentageOfNodesToScore: 100` costs and buys, side
by side with the adaptive default, and explain's predicted probability beside what happens.

    python -m benchmarks.sampling [--nodes 1000,5000] [--fast 1] [--pods 40] [--record]

For each cluster size, Node objects (status written: 8 CPU, 16 GiB, 110 pods) are created one
after another, `--fast` of them net=high and spread evenly, the others net=low. A second
kube-scheduler (`Cluster.start_scheduler`) runs two profiles over them: `adaptive-scheduler`
(percentageOfNodesToScore unset: 50% less one point per 125 nodes, at least 5%) and
`full-scheduler` (100: every node, every cycle). For each profile, in turn:

1. `netqos-webhook explain --scheduler-config FILE -o json` on a probe pod of that profile gives
   the probability that a latency-sensitive pod lands on a net=high node (`sampling`);
2. `--pods` latency-sensitive pods of that profile are created through the API server, which
   calls the registered webhook, and bound by the scheduler: the share bound to a net=high node,
   the pods bound per second (first create to last bind), and the scheduler's own mean scheduling
   attempt (`scheduler_scheduling_attempt_duration_seconds`, by profile, from its /metrics);
3. they are deleted (no grace period: no kubelet confirms it), so each profile starts alike.

`--record` writes the run as docs/evidence/sampling-DATE.md (commit, date, machine, load, the
command, the table); docs/scheduling.md states the current figures and links the newest record.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import evidence
from benchmarks.explain_real import environment
from harness.controlplane import Cluster

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "sampling-bench"
SCHEDULER = "sampling-bench-scheduler"
PROFILES = {"adaptive-scheduler": None, "full-scheduler": 100}  # schedulerName -> percentageOfNodesToScore
LABELS = {"qos": "latency-sensitive", "app": "probe"}
ATTEMPTS = "scheduler_scheduling_attempt_duration_seconds"


@dataclass(frozen=True)
class Row:
    nodes: int
    fast: int
    profile: str
    percentage: int | None
    predicted: float  # explain's probability of landing on a net=high node
    landed: int  # pods bound to a net=high node
    pods: int
    pods_per_second: float
    attempt_ms: float  # the scheduler's mean scheduling attempt

    @property
    def share(self) -> float:
        return self.landed / self.pods

    @property
    def noise(self) -> float:
        """Three binomial standard deviations of the share, at the predicted probability."""
        return 3 * math.sqrt(self.predicted * (1 - self.predicted) / self.pods)


def config() -> dict[str, Any]:
    profiles = []
    for name, percentage in PROFILES.items():
        profile: dict[str, Any] = {"schedulerName": name}
        if percentage is not None:
            profile["percentageOfNodesToScore"] = percentage
        profiles.append(profile)
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "profiles": profiles}


def node(name: str, net: str) -> dict[str, Any]:
    allocatable = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "net": net}},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def probe(name: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": LABELS},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }


def make_nodes(cluster: Cluster, count: int, fast: int) -> set[str]:
    """`count` nodes created in name order, `fast` of them net=high spread evenly; their names."""
    step = max(count // max(fast, 1), 1)
    high = set()
    for i in range(count):
        name = f"s{count}-{i:05}"
        net = "high" if fast and i % step == step // 2 and len(high) < fast else "low"
        if net == "high":
            high.add(name)
        cluster.create(node(name, net))
    deadline = time.monotonic() + 300
    while cluster.scheduler_cache(SCHEDULER).get("nodes") != count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the scheduler's cache holds {cluster.scheduler_cache(SCHEDULER)}, not {count} nodes")
        time.sleep(0.5)
    return high


def explained(cluster: Cluster, scheduler: str, config_file: Path, workdir: Path) -> float:
    """explain's probability that a latency-sensitive pod of `scheduler` lands on a net=high node."""
    path = workdir / "probe.json"
    path.write_text(json.dumps(probe("probe", scheduler)))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "explain",
            "--pod",
            str(path),
            "--scheduler-config",
            str(config_file),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **cluster.env()},
        cwd=REPO,
        check=True,
    )
    return float(json.loads(done.stdout)["sampling"]["target_probability"])


def attempts(cluster: Cluster, profile: str) -> tuple[float, int]:
    """The scheduler's scheduled attempts of `profile` so far: their total seconds and count."""
    total, count = 0.0, 0
    for line in cluster.scheduler_metrics(SCHEDULER).splitlines():
        if line.startswith(ATTEMPTS) and f'profile="{profile}"' in line and 'result="scheduled"' in line:
            value = float(line.rsplit(" ", 1)[1])
            if line.startswith(f"{ATTEMPTS}_sum"):
                total += value
            elif line.startswith(f"{ATTEMPTS}_count"):
                count += int(value)
    return total, count


def schedule(cluster: Cluster, profile: str, pods: int, high: set[str]) -> tuple[int, float, float]:
    """Create `pods` probes of `profile` at once; (bound to net=high, pods bound per second, mean
    scheduling attempt in ms)."""
    before = attempts(cluster, profile)
    started = time.monotonic()
    for i in range(pods):
        cluster.create(probe(f"{profile}-{i}", profile), NAMESPACE)
    bound = {f"{profile}-{i}": cluster.wait_bound(NAMESPACE, f"{profile}-{i}", timeout=300) for i in range(pods)}
    elapsed = time.monotonic() - started
    after = attempts(cluster, profile)
    for name in bound:
        cluster.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", {"gracePeriodSeconds": 0})
    mean = (after[0] - before[0]) / max(after[1] - before[1], 1) * 1000
    return sum(1 for n in bound.values() if n in high), pods / elapsed, mean


def run(cluster: Cluster, sizes: Sequence[int], fast: int, pods: int, workdir: Path) -> list[Row]:
    config_file = cluster.start_scheduler(SCHEDULER, config())
    rows = []
    try:
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for count in sizes:
            cluster.delete_nodes()
            high = make_nodes(cluster, count, fast)
            for profile, percentage in PROFILES.items():
                predicted = explained(cluster, profile, config_file, workdir)
                landed, rate, attempt = schedule(cluster, profile, pods, high)
                rows.append(Row(count, fast, profile, percentage, predicted, landed, pods, rate, attempt))
                print(_line(rows[-1]), file=sys.stderr, flush=True)
    finally:
        cluster.delete_nodes()
        cluster.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")
        cluster.stop_scheduler(SCHEDULER)
    return rows


HEADER = (
    "| nodes | net=high nodes | percentageOfNodesToScore | explain: P(net=high) | bound to net=high | "
    "within 3 sigma | pods bound per second | mean scheduling attempt |"
)


def _line(row: Row) -> str:
    percentage = "unset (adaptive)" if row.percentage is None else str(row.percentage)
    within = "yes" if abs(row.share - row.predicted) <= row.noise else "NO"
    return (
        f"| {row.nodes:,} | {row.fast} | {percentage} | {row.predicted:.2f} | {row.landed}/{row.pods} "
        f"({row.share:.2f}) | {within} | {row.pods_per_second:.1f} | {row.attempt_ms:.1f} ms |"
    )


def table(rows: Sequence[Row]) -> str:
    return "\n".join([HEADER, "|---:|---:|---|---:|---:|---|---:|---:|", *(_line(r) for r in rows)])


def record(
    rows: Sequence[Row], command: str, load: tuple[float, float], seconds: float, directory: Path = evidence.EVIDENCE
) -> Path:
    """The run as `directory`/sampling-DATE.md (docs/evidence): a fixed header, then the table."""
    return evidence.write(
        "sampling", "Sampling on the real kube-scheduler", command, table(rows), load, seconds, directory
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sampling", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="1000,5000", help="cluster sizes, comma-separated (default 1000,5000)")
    parser.add_argument("--fast", type=int, default=1, help="net=high nodes per cluster (default 1)")
    parser.add_argument("--pods", type=int, default=40, help="pods per profile and size (default 40)")
    parser.add_argument("--record", action="store_true", help="write docs/evidence/sampling-DATE.md")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.nodes.split(",")]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load_before, started = os.getloadavg()[0], time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sampling-") as tmp, environment(Path(tmp)) as cluster:
        rows = run(cluster, sizes, args.fast, args.pods, Path(tmp))
    print(table(rows))
    if args.record:
        command = "python -m benchmarks.sampling " + shlex.join(argv if argv is not None else sys.argv[1:])
        path = record(rows, command.strip(), (load_before, os.getloadavg()[0]), time.monotonic() - started)
        print(f"recorded: {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
