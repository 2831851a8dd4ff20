"""`netqos-webhook monitor` on the REAL API server's world of `benchmarks.realscale` (5,000 nodes,
150,000 pods): the memory and CPU it takes to list and judge that world, then to follow pod
churn, and whether its gauges then equal what `status -A -o json` reports of the same world.

It measures the world a realscale run left in $NETQOS_CLUSTER_DIR (same --fraction and --seed),
with the controller manager stopped as realscale stops it:

1. the monitor starts as a child process (`--config deploy/base/policy.yaml`: the policy the
   injected pods carry; `--interval 1`); its CPU time and RSS are read from /proc every half
   second and its /metrics scraped until the gauges are first published: the time, CPU and
   memory to list and judge the world;
2. churn for --seconds: latency-sensitive pods of the world's workloads, bound to a node as
   realscale binds them (most with the preference, some without), created and, once --window are
   live, the oldest deleted, each create or delete one event, paced at up to --rate events a second
   with --concurrency requests in flight; what the API server accepts is the rate reported. The
   monitor's CPU, peak RSS and lag gauge are sampled throughout;
3. settled: the seconds from the last churn event until the lag gauge reads 0 and two scrapes
   agree; then `status -A -o json` (same policy) runs and the gauges read after it are compared
   with its report (`harness.monitorview`);
4. the churn pods still live are deleted: the world stays as loaded.

    scripts/bench --monitor-scale [--fraction F] [--seconds 60] [--rate 1000] [--record]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import realscale, scaleup
from harness import controlplane, evidence, monitorview, procfs
from harness.controlplane import Cluster

REPO = Path(__file__).resolve().parent.parent
POLICY = REPO / "deploy/base/policy.yaml"


@dataclass
class Sample:
    at: float  # seconds since the monitor started
    cpu_seconds: float
    rss_mib: float
    lag_seconds: float | None  # the monitor's lag gauge (None: no answer)


@dataclass
class Result:
    nodes: int
    pods: int
    ready_seconds: float = 0.0  # start -> first publication
    ready_cpu_seconds: float = 0.0
    ready_rss_mib: float = 0.0
    churn_events: int = 0
    churn_seconds: float = 0.0
    churn_cpu_seconds: float = 0.0
    max_lag_seconds: float = 0.0
    settle_seconds: float = 0.0  # last churn event -> lag 0 and two scrapes alike
    peak_rss_mib: float = 0.0  # VmHWM at the end
    status_seconds: float = 0.0
    agree: bool = False
    gauges: dict[str, Any] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)


class Watcher:
    """The monitor's process and metrics, sampled every `period` seconds on a thread of its own."""

    def __init__(self, pid: int, url: str, period: float = 0.5) -> None:
        self.pid, self.url, self.period = pid, url, period
        self.started = time.monotonic()
        self.samples: list[Sample] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self.period):
            lag = None
            try:
                lag = monitorview.scrape(self.url, timeout=2)["netqos_monitor_lag_seconds"][()]
            except (OSError, KeyError, ValueError):
                pass
            self.samples.append(
                Sample(time.monotonic() - self.started, scaleup.cpu_seconds(self.pid), procfs.memory_mib(self.pid), lag)
            )

    def close(self) -> list[Sample]:
        self.stop.set()
        self.thread.join()
        return self.samples


def published(url: str) -> dict[str, Any] | None:
    """The monitor's gauges, once it has published them (None before, or no answer)."""
    try:
        metrics = monitorview.scrape(url, timeout=2)
    except OSError:
        return None
    return monitorview.gauges_say(metrics) if "netqos_monitor_selected_pods" in metrics else None


def churn_pods(world: realscale.World, count: int, seed: int) -> Iterator[dict[str, Any]]:
    """`count` new pods of the world's latency-sensitive workloads, bound as realscale binds them
    (`realscale.bound_pod`), owned by none."""
    rng = random.Random(seed)
    sensitive = [w for w in world.plan if w.style in ("injected", "missing")]
    for i in range(count):
        w = rng.choice(sensitive)
        meta, spec = realscale.bound_pod(w, world.names, rng)
        meta |= {"name": f"churn-{i:06}", "namespace": w.namespace}
        yield {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def churn(
    cluster: Cluster, pods: list[dict[str, Any]], window: int, rate: float, concurrency: int, seconds: float
) -> tuple[int, list[dict[str, Any]]]:
    """Create `pods` in order, deleting the oldest once `window` are live, paced at `rate` events a
    second, for `seconds` (or until `pods` run out). Returns the events sent and the pods left live."""
    client = realscale.Client(cluster)
    started = time.monotonic()
    sent = [0]
    lock = threading.Lock()

    def paced(job: Callable[[], object], k: int) -> None:
        wait = started + k / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        job()
        with lock:
            sent[0] += 1

    made = [0]

    def jobs() -> Iterator[Callable[[], None]]:
        k = 0
        for i, pod in enumerate(pods):
            if time.monotonic() - started > seconds:
                return
            ns = pod["metadata"]["namespace"]
            yield partial(paced, partial(realscale.create, client, f"/api/v1/namespaces/{ns}/pods", pod), k)
            made[0] = i + 1
            k += 1
            if i >= window:
                yield partial(paced, partial(delete, client, pods[i - window]), k)
                k += 1

    realscale.bounded(jobs(), concurrency)
    return sent[0], pods[max(0, made[0] - window) : made[0]]


def delete(client: realscale.Client, pod: dict[str, Any]) -> None:
    meta = pod["metadata"]
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}?gracePeriodSeconds=0"
    status, raw = client.send("DELETE", path)
    if status not in (200, 202, 404):
        raise SystemExit(f"DELETE {path}: {status} {raw[:300]!r}")


def run(cluster: Cluster, world: realscale.World, args: argparse.Namespace) -> Result:
    port = controlplane.free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    result = Result(len(world.node_objs), sum(w.replicas for w in world.plan))
    argv = [sys.executable, "-m", "webhook", "monitor", "--kubeconfig", str(cluster.kubeconfig)]
    argv += ["--config", str(POLICY), "--metrics-bind", f"127.0.0.1:{port}", "--interval", "1"]
    pods = list(churn_pods(world, max(0, int(args.seconds * args.rate / 2)) + args.window, args.seed))
    live = pods  # until the churn says which are left
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, cwd=REPO)
        try:
            watcher = Watcher(process.pid, url)
            started = time.monotonic()
            while (first := published(url)) is None:
                if process.poll() is not None or time.monotonic() - started > args.timeout:
                    log.seek(0)
                    raise SystemExit(f"the monitor published nothing: {log.read()[-3000:].decode()}")
                time.sleep(0.2)
            result.ready_seconds = time.monotonic() - started
            result.ready_cpu_seconds = scaleup.cpu_seconds(process.pid)
            result.ready_rss_mib = procfs.memory_mib(process.pid)
            print(f"monitor ready in {result.ready_seconds:.1f} s: {json.dumps(first)}", file=sys.stderr)
            before = scaleup.cpu_seconds(process.pid)
            began = time.monotonic()
            result.churn_events, live = churn(cluster, pods, args.window, args.rate, args.concurrency, args.seconds)
            ended = time.monotonic()
            result.churn_seconds = ended - began
            result.settle_seconds = settle(url, ended, args.timeout)
            result.churn_cpu_seconds = scaleup.cpu_seconds(process.pid) - before
            print(f"churn: {result.churn_events} events in {result.churn_seconds:.1f} s", file=sys.stderr)
            status_started = time.monotonic()
            report = status_report(cluster)
            result.status_seconds = time.monotonic() - status_started
            result.status = monitorview.status_says(report)
            result.gauges = published(url) or {}
            result.agree = result.gauges == result.status
            result.peak_rss_mib = procfs.memory_mib(process.pid, "VmHWM")
            result.samples = watcher.close()
        finally:
            process.terminate()
            process.wait(timeout=30)
            client = realscale.Client(cluster)
            realscale.bounded((partial(delete, client, p) for p in live), args.concurrency)
    lags = [s.lag_seconds for s in result.samples if s.lag_seconds is not None]
    result.max_lag_seconds = max(lags, default=0.0)
    return result


def settle(url: str, since: float, timeout: float) -> float:
    """Seconds from `since` until the monitor's lag reads 0 and two scrapes a second apart agree."""
    last = None
    while time.monotonic() - since < timeout:
        try:
            metrics = monitorview.scrape(url, timeout=5)
        except OSError:
            metrics = {}
        now = monitorview.gauges_say(metrics) if metrics else None
        lag = metrics.get("netqos_monitor_lag_seconds", {}).get(())
        if now is not None and now == last and lag == 0:
            return time.monotonic() - since - 1.0  # the second scrape only confirmed the first
        last = now
        time.sleep(1.0)
    raise SystemExit(f"the monitor did not settle within {timeout:.0f} s of the churn's end")


def status_report(cluster: Cluster) -> dict[str, Any]:
    argv = [sys.executable, "-m", "webhook", "status", "-A", "--kubeconfig", str(cluster.kubeconfig)]
    done = subprocess.run(
        [*argv, "--config", str(POLICY), "-o", "json"], capture_output=True, cwd=REPO, timeout=900, check=False
    )
    if done.returncode not in (0, 3):
        raise SystemExit(f"status exited {done.returncode}: {done.stderr.decode()[-3000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def table(r: Result) -> str:
    rate = r.churn_events / r.churn_seconds if r.churn_seconds else 0.0
    return "\n".join(
        [
            f"world: {r.nodes} nodes, {r.pods} pods (benchmarks.realscale); the monitor with --interval 1",
            "",
            "| phase | wall s | monitor CPU s | monitor RSS MiB | note |",
            "|---|---:|---:|---:|---|",
            f"| list and judge (start to first gauges) | {r.ready_seconds:.1f} | {r.ready_cpu_seconds:.1f} | "
            f"{r.ready_rss_mib:.0f} | |",
            f"| churn: {r.churn_events} pod events ({rate:.0f}/s accepted) | {r.churn_seconds:.1f} | "
            f"{r.churn_cpu_seconds:.1f} | {r.peak_rss_mib:.0f} (peak) | lag gauge at most {r.max_lag_seconds:.1f} s |",
            f"| settle (last event to lag 0, gauges steady) | {r.settle_seconds:.1f} | | | |",
            f"| `status -A -o json` beside it | {r.status_seconds:.1f} | | | gauges equal its report: "
            f"{'yes' if r.agree else 'NO'} |",
            "",
            f"gauges: {json.dumps(r.gauges, sort_keys=True)}",
            "",
            f"status: {json.dumps(r.status, sort_keys=True)}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench --monitor-scale", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--fraction", type=float, default=1.0, help="of realscale's world, as it was loaded (default 1)"
    )
    parser.add_argument("--seed", type=int, default=1, help="realscale's seed, as it was loaded (default 1)")
    parser.add_argument("--seconds", type=float, default=60, help="of churn (default 60)")
    parser.add_argument("--rate", type=float, default=1000, help="pod events a second asked for (default 1,000)")
    parser.add_argument("--window", type=int, default=1000, help="churn pods live at once (default 1,000)")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight (default 16)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for the monitor (default 900)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--record", action="store_true", help="also write docs/evidence/monitor-scale-DATE.md")
    args = parser.parse_args(argv)
    directory = os.environ.get(controlplane.CLUSTER_DIR_ENV)
    if not directory:
        parser.error(f"measures the world realscale loaded into a running cluster: set ${controlplane.CLUSTER_DIR_ENV}")
    cluster = controlplane.attach(Path(directory))
    world = realscale.World.of(
        round(realscale.FULL_NODES * args.fraction), round(realscale.FULL_PODS * args.fraction), args.seed
    )
    load, began = evidence.load_average(), time.perf_counter()
    with realscale.stopped(cluster.pids["kube-controller-manager"]):
        result = run(cluster, world, args)
    text = table(result)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(asdict(result), indent=2))
    if args.record:
        command = " ".join(["scripts/bench", "--monitor-scale", *(argv if argv is not None else sys.argv[1:])])
        path = evidence.write(
            "monitor-scale",
            f"netqos-webhook monitor on the real API server, {result.nodes} nodes and {result.pods} pods",
            command,
            text,
            (load, evidence.load_average()),
            time.perf_counter() - began,
        )
        print(f"recorded: {path.relative_to(evidence.REPO)}", file=sys.stderr)
    return 0 if result.agree else 1


if __name__ == "__main__":
    sys.exit(main())
