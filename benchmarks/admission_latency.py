"""What the webhook adds to a pod's creation, measured through the real API server of
`scripts/cluster` (harness.controlplane) with a real `netqos-webhook serve` on loopback.

    python -m benchmarks.admission_latency [--pods N] [--clients C] [--rounds R] [--json]
    scripts/bench-admission                       (the same, with the environment set up)

Each round creates N pods with C concurrent clients (each on its own keep-alive connection, as
a controller's client would), under three registrations, in turn:

- `none`: no webhook configuration;
- `selected`: the webhook registered, the pods labelled `qos=latency-sensitive`: the API server
  calls it for each (TLS to the webhook, the review, the patch applied);
- `unselected`: the webhook registered, the pods unlabelled: the objectSelector spares them the call.

Latency is the client's, from sending the POST to reading the answer. Pods are deleted between
rounds. The table gives p50 / p99 per registration over all rounds and what `selected` adds to
`none`. Results: docs/performance.md ("Admission latency through the real API server").
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.explain_real import environment
from harness.controlplane import LOOPBACK, Cluster
from webhook.names import CONFIGURATION_NAME, INJECTED_ANNOTATION

NAMESPACE = "admission-latency"
MODES = ("none", "selected", "unselected")
CONFIGURATION = f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{CONFIGURATION_NAME}"


def _pod(name: str, selected: bool) -> dict[str, Any]:
    labels = {"app": "latency", **({"qos": "latency-sensitive"} if selected else {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
    }


def create_pods(cluster: Cluster, mode: str, count: int, clients: int, round_: int) -> list[float]:
    """Create `count` pods with `clients` threads; the latency of each creation in seconds."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    names = iter(range(count))

    def client() -> None:
        conn = http.client.HTTPSConnection(
            LOOPBACK, cluster.ports["kube-apiserver"], context=cluster.ssl_context(), timeout=30
        )
        try:
            while True:
                with lock:
                    index = next(names, None)
                if index is None:
                    return
                body = json.dumps(_pod(f"{mode}-{round_}-{index}", mode == "selected")).encode()
                started = time.perf_counter()
                conn.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body, {"Content-Type": "application/json"})
                response = conn.getresponse()
                answer = response.read()
                elapsed = time.perf_counter() - started
                mutated = INJECTED_ANNOTATION.encode() in answer
                with lock:
                    if response.status != 201:
                        errors.append(f"{response.status}: {answer[:200]!r}")
                    elif mutated != (mode == "selected"):
                        errors.append(f"pod {index} under {mode}: mutated={mutated}")
                    latencies.append(elapsed)
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    if errors:
        raise RuntimeError(f"{len(errors)} creations under {mode} went wrong, e.g. {errors[0]}")
    return latencies


def _clear(cluster: Cluster) -> None:
    cluster.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods", {"gracePeriodSeconds": 0})
    deadline = time.monotonic() + 60
    while (cluster.get(f"/api/v1/namespaces/{NAMESPACE}/pods?limit=1") or {}).get("items"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"pods in {NAMESPACE} not deleted within 60 s")
        time.sleep(0.2)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(cluster: Cluster, pods: int, clients: int, rounds: int) -> dict[str, list[float]]:
    """Rounds of the three modes in turn (so drift on a shared machine touches all alike)."""
    configuration = cluster.get(CONFIGURATION)
    if configuration is None:
        raise RuntimeError("no webhook registered")
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
        configuration["metadata"].pop(key, None)
    if cluster.get(f"/api/v1/namespaces/{NAMESPACE}") is None:
        cluster.create_namespace(NAMESPACE)
    results: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        for round_ in range(rounds):
            for mode in MODES:
                registered = cluster.get(CONFIGURATION) is not None
                if mode == "none" and registered:
                    cluster.request("DELETE", CONFIGURATION)
                    cluster.wait_webhook(active=False)
                elif mode != "none" and not registered:
                    cluster.create(configuration)
                    cluster.wait_webhook(active=True)
                results[mode] += create_pods(cluster, mode, pods, clients, round_)
                _clear(cluster)
    finally:
        if cluster.get(CONFIGURATION) is None:
            cluster.create(configuration)
        cluster.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")
    return results


def summary(results: dict[str, list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode, values in results.items():
        out[mode] = {
            "pods": len(values),
            "p50_ms": round(percentile(values, 0.50) * 1000, 2),
            "p99_ms": round(percentile(values, 0.99) * 1000, 2),
            "mean_ms": round(statistics.fmean(values) * 1000, 2),
        }
    for q in ("p50_ms", "p99_ms"):
        out[f"added_{q}"] = round(out["selected"][q] - out["none"][q], 2)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench-admission", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=100, help="pods per mode and round (default 100)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients (default 4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three modes (default 3)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    # SIGTERM ends the run like Ctrl-C: the webhook server and a cluster of our own are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="admission-latency-") as tmp, environment(Path(tmp)) as cluster:
        total = summary(measure(cluster, args.pods, args.clients, args.rounds))
    if args.json:
        print(json.dumps(total, indent=2))
        return 0
    print(f"{args.pods * args.rounds} pods per registration, {args.clients} clients")
    print("| registration | pods | p50 | p99 | mean |")
    print("|---|---:|---:|---:|---:|")
    for mode in MODES:
        row = total[mode]
        print(f"| {mode} | {row['pods']} | {row['p50_ms']} ms | {row['p99_ms']} ms | {row['mean_ms']} ms |")
    print(f"\nthe webhook adds {total['added_p50_ms']} ms at p50 and {total['added_p99_ms']} ms at p99")
    return 0


if __name__ == "__main__":
    sys.exit(main())
