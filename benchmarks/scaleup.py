"""Admission at scale on the real API server: a Deployment of latency-sensitive pods scaled from 0
to R replicas (10,000) with a mutating admission installed, three installations in turn, in one run:

- `webhook`: `netqos-webhook serve` with 2 workers (as deploy/base runs it), registered by
  `netqos-webhook register --url` (failurePolicy Ignore: a failed call would let a pod through
  without the preference, so fail-open is counted);
- `go`: benchmarks/gowebhook, a stdlib Go webhook adding the same terms, registered the same way;
- `policy`: the MutatingAdmissionPolicy of `netqos-webhook manifests --as admission-policy`: the
  API server mutates the pods itself, nothing is called.

Each run creates its own namespace and Deployment (replicas 0), scales it to R and waits until
the ReplicaSet controller has created every pod. Then: the pods that carry the preference (read
back page by page: every one must), `netqos-webhook status -n NS -o json` (selected R, missing 0),
the API server's counters (`apiserver_admission_webhook_fail_open_count` and
`apiserver_admission_webhook_rejection_count`: both must stay 0), the admission latency p50/p99
from the API server's own histograms (`apiserver_admission_webhook_admission_duration_seconds`
for a webhook, buckets 5, 25, 100, 500 ms...; `apiserver_mutating_admission_policy_check_duration_seconds`
for the policy, buckets 1, 10, 100 ms: a quantile is interpolated inside a bucket, as Prometheus'
histogram_quantile does, so read it as "within that bucket"), the CPU time of the webhook's
processes per review and of the API server per pod created (/proc), and the wall time.

The controller manager creates the pods at its client's rate limit (the harness gives it 200
requests/s): that, not admission, bounds how fast the replicas appear. Run by
benchmarks/realscale.py before the world is loaded.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness import cpuquota, procfs
from harness.certs import make_certs
from harness.controlplane import LOOPBACK, Cluster, ControlPlaneError, free_port
from harness.server import start_server
from webhook.names import CONFIGURATION_NAME, INJECTED_ANNOTATION

REPO = Path(__file__).resolve().parent.parent
VARIANTS = ("webhook", "go", "policy")
WEBHOOK_CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
GO_CONFIGURATION = "netqos-go-baseline"
GO_WEBHOOK = "go.baseline.netqos.io"
OUR_WEBHOOK = "netqos.netqos.io"
# The API server's own latency histogram of each installation, and the series of it: a webhook's
# call (buckets 5, 25, 100, 500 ms, 1 s...); each mutating policy's evaluation (0.5 us, 1, 10, 100 ms).
HISTOGRAMS = {
    "webhook": (
        "apiserver_admission_webhook_admission_duration_seconds",
        {"name": OUR_WEBHOOK, "operation": "CREATE", "type": "admit"},
    ),
    "go": (
        "apiserver_admission_webhook_admission_duration_seconds",
        {"name": GO_WEBHOOK, "operation": "CREATE", "type": "admit"},
    ),
    "policy": ("apiserver_mutating_admission_policy_check_duration_seconds", {}),
}
TIMEOUT_PER_POD = 0.2  # seconds allowed per replica before the scale-up is declared stuck (+120 s)


@dataclass
class ScaleUp:
    variant: str
    cpus: float | None  # the CPU quota of the webhook's processes (None: unconfined)
    replicas: int
    created: int
    with_preference: int
    status_selected: int
    status_missing: int
    fail_open: float
    rejected: float
    seconds: float
    load_average: float
    p50_ms: float | None  # the API server's histogram of this installation (HISTOGRAMS)
    p99_ms: float | None
    reviews: float
    webhook_cpu_ms_per_review: float | None
    apiserver_cpu_ms_per_pod: float


# --- the API server's metrics -------------------------------------------------------------------------


def metrics(cluster: Cluster) -> dict[str, float]:
    """Every sample of the API server's /metrics: `name{labels}` -> value."""
    status, raw = cluster_raw(cluster, "/metrics")
    if status != 200:
        raise ControlPlaneError(f"GET /metrics: {status}")
    samples = {}
    for line in raw.decode().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            samples[key] = float(value)
    return samples


def cluster_raw(cluster: Cluster, path: str) -> tuple[int, bytes]:
    import http.client

    conn = http.client.HTTPSConnection(
        LOOPBACK, cluster.ports["kube-apiserver"], context=cluster.ssl_context(), timeout=60
    )
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _labels(key: str) -> dict[str, str]:
    if "{" not in key:
        return {}
    inner = key[key.index("{") + 1 : key.rindex("}")]
    return {k: v.strip('"') for k, v in (part.split("=", 1) for part in inner.split('",') if "=" in part)}


def summed(samples: dict[str, float], metric: str, match: dict[str, str] | None = None) -> float:
    """The sum of `metric`'s samples whose labels include `match`."""
    total = 0.0
    for key, value in samples.items():
        if key.split("{", 1)[0] == metric and all(_labels(key).get(k) == v for k, v in (match or {}).items()):
            total += value
    return total


def buckets(samples: dict[str, float], metric: str, match: dict[str, str]) -> dict[float, float]:
    """A histogram's cumulative buckets (`le` -> count), summed over the series `match` selects."""
    out: dict[float, float] = {}
    for key, value in samples.items():
        if key.split("{", 1)[0] != f"{metric}_bucket":
            continue
        labels = _labels(key)
        if all(labels.get(k) == v for k, v in match.items()):
            le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
            out[le] = out.get(le, 0.0) + value
    return out


def quantile(q: float, before: dict[float, float], after: dict[float, float]) -> float | None:
    """Prometheus' histogram_quantile over the increase between two scrapes, in milliseconds."""
    delta = sorted((le, after[le] - before.get(le, 0.0)) for le in after)
    if not delta or delta[-1][1] <= 0:
        return None
    rank = q * delta[-1][1]
    lower, below = 0.0, 0.0
    for le, count in delta:
        if count >= rank:
            if le == float("inf"):
                return lower * 1000
            return (lower + (le - lower) * (rank - below) / max(count - below, 1e-9)) * 1000
        lower, below = le, count
    return None


# --- processes' CPU ---------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """A process and its children (gunicorn's master and workers)."""
    return cpu_seconds(pid) + sum(cpu_seconds(c) for c in procfs.children(pid))


# --- installations ----------------------------------------------------------------------------------


def _cli(cluster: Cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **cluster.env()},
        cwd=REPO,
    )
    if check and done.returncode not in (0, 3):
        raise ControlPlaneError(f"netqos-webhook {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done


@contextmanager
def installed(cluster: Cluster, variant: str, workdir: Path, cpus: float | None = None) -> Iterator[int | None]:
    """The installation of `variant`, removed afterwards; yields the pid whose process tree
    answers the reviews (None for the admission policy). With `cpus`, that process tree runs
    under a CPU quota of that many CPUs (harness.cpuquota) while it is installed."""
    with _installed(cluster, variant, workdir) as pid:
        if pid is None or cpus is None:
            yield pid
            return
        with cpuquota.confined(pid, cpus, f"netqos-scaleup-{variant}"):
            yield pid


@contextmanager
def _installed(cluster: Cluster, variant: str, workdir: Path) -> Iterator[int | None]:
    if variant == "webhook":
        with start_server(workdir / "webhook", workers=2) as server:
            _cli(
                cluster,
                "register",
                "--url",
                f"https://127.0.0.1:{server.port}/mutate",
                "--certs",
                str(server.certs.directory),
            )
            cluster.wait_webhook(active=True, timeout=60)
            try:
                yield server.process.pid
            finally:
                cluster.request("DELETE", f"{WEBHOOK_CONFIGURATIONS}/{CONFIGURATION_NAME}")
                cluster.wait_webhook(active=False, timeout=60)
    elif variant == "go":
        with go_webhook(cluster, workdir / "go") as pid:
            yield pid
    else:
        # in the API the cluster's release serves (v1beta1 on 1.34 and 1.35)
        manifests = _cli(cluster, "manifests", "--as", "admission-policy", "--kubernetes-version", cluster.minor).stdout
        cluster.kubectl("apply", "-f", "-", input=manifests)
        cluster.wait_webhook(active=True, timeout=60)  # the probe sees the policy's mutation as well
        try:
            yield None
        finally:
            cluster.kubectl("delete", "-f", "-", input=manifests, check=False)
            cluster.wait_webhook(active=False, timeout=60)


@contextmanager
def go_webhook(cluster: Cluster, workdir: Path) -> Iterator[int]:
    from benchmarks.bench import build_go

    workdir.mkdir(parents=True, exist_ok=True)
    binary = build_go("gowebhook", workdir)
    certs = make_certs(workdir / "certs")
    port = free_port()
    with open(workdir / "gowebhook.log", "wb") as log:
        process = subprocess.Popen(
            [str(binary), "-addr", f"{LOOPBACK}:{port}", "-cert", str(certs.cert), "-key", str(certs.key)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        ours = yaml.safe_load(
            (REPO / "deploy/base/webhook-configuration/mutatingwebhookconfiguration.yaml").read_text()
        )
        entry = ours["webhooks"][0]
        entry["name"] = GO_WEBHOOK
        entry["clientConfig"] = {
            "url": f"https://127.0.0.1:{port}/mutate",
            "caBundle": base64.b64encode(certs.ca_cert.read_bytes()).decode(),
        }
        config = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": GO_CONFIGURATION},
            "webhooks": [entry],
        }
        status, body = cluster.request("POST", WEBHOOK_CONFIGURATIONS, config)
        if status != 201:
            raise ControlPlaneError(f"registering the Go webhook: {status} {body}")
        cluster.wait_webhook(active=True, timeout=60)
        try:
            yield process.pid
        finally:
            cluster.request("DELETE", f"{WEBHOOK_CONFIGURATIONS}/{GO_CONFIGURATION}")
            cluster.wait_webhook(active=False, timeout=60)
    finally:
        process.terminate()
        process.wait(timeout=10)


# --- one scale-up ---------------------------------------------------------------------------------------


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name, "qos": "latency-sensitive"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                        }
                    ]
                },
            },
        },
    }


def count_pods(cluster: Cluster, namespace: str) -> int:
    body = cluster.get(f"/api/v1/namespaces/{namespace}/pods?limit=1") or {}
    return len(body.get("items") or []) + int((body.get("metadata") or {}).get("remainingItemCount") or 0)


def carries_preference(pod: dict[str, Any]) -> bool:
    """The injected annotation and a `net` term among the preferred node affinity terms."""
    terms = ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    ) or []
    keys = {e["key"] for t in terms for e in t["preference"].get("matchExpressions", [])}
    return INJECTED_ANNOTATION in (pod["metadata"].get("annotations") or {}) and "net" in keys


def with_preference(cluster: Cluster, namespace: str) -> tuple[int, int]:
    """(pods, pods carrying the preference: the injected annotation and the net terms), read page by page."""
    token, pods, carrying = "", 0, 0
    while True:
        page = cluster.get(f"/api/v1/namespaces/{namespace}/pods?limit=500" + (f"&continue={token}" if token else ""))
        assert page is not None
        for pod in page["items"]:
            pods += 1
            carrying += carries_preference(pod)
        token = page["metadata"].get("continue") or ""
        if not token:
            return pods, carrying


def scale_up(cluster: Cluster, variant: str, replicas: int, workdir: Path, cpus: float | None = None) -> ScaleUp:
    namespace = f"scaleup-{variant}"
    cluster.create_namespace(namespace)
    status, body = cluster.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("burst"))
    if status != 201:
        raise ControlPlaneError(f"creating the Deployment: {status} {body}")
    with installed(cluster, variant, workdir, cpus) as pid:
        before = metrics(cluster)
        api_cpu, hook_cpu = cpu_seconds(cluster.pids["kube-apiserver"]), tree_cpu_seconds(pid) if pid else 0.0
        started = time.perf_counter()
        cluster.request(
            "PATCH",
            f"/apis/apps/v1/namespaces/{namespace}/deployments/burst",
            {"spec": {"replicas": replicas}},
            "application/merge-patch+json",
        )
        deadline = time.monotonic() + 120 + TIMEOUT_PER_POD * replicas
        while (created := count_pods(cluster, namespace)) < replicas and time.monotonic() < deadline:
            time.sleep(0.5)
        seconds = time.perf_counter() - started
        api_cpu = cpu_seconds(cluster.pids["kube-apiserver"]) - api_cpu
        hook_cpu = (tree_cpu_seconds(pid) - hook_cpu) if pid else 0.0
        after = metrics(cluster)
        load_average = os.getloadavg()[0]
    hist, selector = HISTOGRAMS[variant]
    reviews = summed(after, f"{hist}_count", selector) - summed(before, f"{hist}_count", selector)
    pods, carrying = with_preference(cluster, namespace)
    report = json.loads(_cli(cluster, "status", "-n", namespace, "-o", "json").stdout)
    return ScaleUp(
        variant=variant,
        cpus=cpus,
        replicas=replicas,
        created=pods,
        with_preference=carrying,
        status_selected=report["pods"]["selected"],
        status_missing=report["pods"]["missing"],
        fail_open=summed(after, "apiserver_admission_webhook_fail_open_count")
        - summed(before, "apiserver_admission_webhook_fail_open_count"),
        rejected=summed(after, "apiserver_admission_webhook_rejection_count")
        - summed(before, "apiserver_admission_webhook_rejection_count"),
        seconds=seconds,
        load_average=load_average,
        p50_ms=quantile(0.5, buckets(before, hist, selector), buckets(after, hist, selector)),
        p99_ms=quantile(0.99, buckets(before, hist, selector), buckets(after, hist, selector)),
        reviews=reviews,
        webhook_cpu_ms_per_review=(hook_cpu * 1000 / reviews) if pid and reviews else None,
        apiserver_cpu_ms_per_pod=api_cpu * 1000 / max(created, 1),
    )


def run_all(
    cluster: Cluster, replicas: int, variants: tuple[str, ...] = VARIANTS, cpus: float | None = None
) -> list[ScaleUp]:
    """The scale-ups in turn (all three by default); their namespaces are deleted afterwards."""
    results = []
    with tempfile.TemporaryDirectory(prefix="netqos-scaleup-") as workdir:
        for variant in variants:
            results.append(scale_up(cluster, variant, replicas, Path(workdir) / variant, cpus))
            print(json.dumps(results[-1].__dict__), file=sys.stderr)
    for variant in variants:
        remove_namespace(cluster, variant)
    return results


def remove_namespace(cluster: Cluster, variant: str) -> None:
    """Delete the namespace of `variant`'s scale-up and its pods."""
    for attempt in range(3):  # deleting thousands of pods at once can outlast one request's 30 s
        try:
            cluster.delete_namespace(f"scaleup-{variant}", timeout=600)
            return
        except TimeoutError:
            if attempt == 2:
                raise


def table(results: list[ScaleUp]) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    lines = [
        "| installation | CPU quota | replicas | created | with the preference | status selected / missing | "
        "fail-open | rejected | wall s | admission p50 / p99 ms (API server histogram) | calls | "
        "webhook CPU ms / review | API server CPU ms / pod | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        quota = "-" if r.cpus is None or r.variant == "policy" else f"{r.cpus:g}"
        lines.append(
            f"| {r.variant} | {quota} | {r.replicas} | {r.created} | {r.with_preference} | {r.status_selected} / "
            f"{r.status_missing} | {r.fail_open:.0f} | {r.rejected:.0f} | {r.seconds:.1f} | "
            f"{ms(r.p50_ms)} / {ms(r.p99_ms)} | {r.reviews:.0f} | "
            f"{ms(r.webhook_cpu_ms_per_review)} | {r.apiserver_cpu_ms_per_pod:.2f} | {r.load_average:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench --scaleup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=1000, help="of each scale-up (default 1,000)")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated, in this order (default {','.join(VARIANTS)})"
    )
    parser.add_argument(
        "--cpus",
        type=float,
        help="run each webhook's processes under a CPU quota of this many CPUs (a cgroup; needs root): "
        "what a pod gets of its node when it gets only its CPU request",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    variants = tuple(v for v in args.variants.split(",") if v)
    if unknown := [v for v in variants if v not in VARIANTS]:
        parser.error(f"--variants: unknown {', '.join(unknown)} (choose from {', '.join(VARIANTS)})")
    if args.cpus is not None and (why := cpuquota.available()):
        parser.error(f"--cpus: {why}")
    from benchmarks.realscale import a_cluster

    with a_cluster() as cluster:
        results = run_all(cluster, args.replicas, variants, args.cpus)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
