"""The chart's HorizontalPodAutoscaler under sustained admission load, on real nodes.

On a cluster of `scripts/cluster up --nodes N` with the image loaded (`scripts/image`):

1. metrics-server (sigs.k8s.io/metrics-server, METRICS_SERVER_VERSION) built once with `go install`
   into ~/.cache/netqos-webhook/metrics-server-<version>, niced. It runs in the nodes' network
   namespace (started from the cluster's directory, so `scripts/cluster down` stops it with the
   rest), listening on the node address: the API server reaches it as it reaches a webhook, through
   a ClusterIP Service (no selector) whose EndpointSlice names that address, and serves it as the
   APIService v1beta1.metrics.k8s.io. It scrapes each kubelet's /metrics/resource at its InternalIP
   and its own port (the kubelets' serving certificates are self-signed: --kubelet-insecure-tls).
   The harness's API server has no front-proxy client certificate, so the aggregated requests reach
   metrics-server without a user; a ClusterRole lets system:anonymous read metrics.k8s.io, and
   nothing else, on this throwaway cluster.
2. The chart (`helm install`, `certificates.source=secret`, `autoscaling.enabled=true`, plus any
   `--set`), its Deployment ready on the real nodes; the HPA waits for its first CPU reading.
3. Sustained admission load for `--seconds`: `--clients` threads sending server-side dry-run creates
   of a latency-sensitive pod (the API server calls the webhook through its Service for each; every
   answer is checked for the preference), and a Deployment of `--pods` latency-sensitive replicas
   that no node can take (a nodeSelector no node matches), so that only admission costs.
4. Every `--interval` seconds: the HPA's current and desired replicas and the CPU utilisation it
   saw, the webhook Deployment's ready replicas, the pods' CPU from the metrics API, the dry-run
   creates per second, `apiserver_admission_webhook_fail_open_count`, and each webhook pod's own
   count of reviews answered (`netqos_admission_requests_total` from its /metrics, read through
   the API server's pod proxy) with the time its Ready condition last turned true; then
   `--cooldown` seconds more without load (the HPA scales down only after its stabilisation
   window, 300 s unless the HPA says otherwise: kube-controller-manager's
   `--horizontal-pod-autoscaler-downscale-stabilization`, pkg/controller/podautoscaler/config/
   v1alpha1/defaults.go).
5. Per replica (`shares`): the reviews per minute after it became Ready, the time from Ready to its
   first review and to its fair share (an interval in which it answered at least half of 1/N of
   the reviews, N the replicas answering then); the scale-up (the HPA's decision, each new
   replica's Ready) and the scale-down (the HPA back at its minimum, the replicas back at it)
   after the load stopped. `--record NAME` writes it all to docs/evidence/NAME-DATE.md.

    scripts/cluster up --nodes 2 && scripts/image
    .venv/bin/python -m benchmarks.hpa [--seconds 240] [--clients 6] [--pods 2000] [--set KEY=VALUE] [--record hpa]

Not part of the test suite: it takes minutes and its figures depend on the machine's load.
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from benchmarks import evidence
from benchmarks.scaleup import carries_preference, cluster_raw, metrics, summed, with_preference
from harness import nodes as realnodes
from harness.controlplane import LOOPBACK, Cluster, ControlPlaneError, attach, default_directory
from harness.gobuild import cache_root, find_go
from webhook.resources import parse_quantity

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "deploy/helm/netqos-webhook"
METRICS_SERVER_MODULE = "sigs.k8s.io/metrics-server"
METRICS_SERVER_VERSION = "v0.9.0"
METRICS_SERVER_PORT = 4443  # in the nodes' network namespace, on the node address
RELEASE = "netqos-hpa"  # the chart's release, namespace and fullname
LOAD_NAMESPACE = "hpa-load"
NOWHERE = {"netqos.io/benchmark-nowhere": "true"}  # a nodeSelector no node matches
FAIL_OPEN = "apiserver_admission_webhook_fail_open_count"
REJECTED = "apiserver_admission_webhook_rejection_count"
APISERVICE = "v1beta1.metrics.k8s.io"
REVIEWS = "netqos_admission_requests_total"  # each webhook pod's own count of reviews answered
WEBHOOK_PORT = 8443  # the pods' HTTPS port, where /metrics is served too
WEBHOOK_PODS = "app.kubernetes.io/name=netqos-webhook,app.kubernetes.io/component=webhook"
FAIR = 0.5  # a replica has its fair share from an interval where it answered >= FAIR / N of the reviews


# --- metrics-server ---------------------------------------------------------------------------------


def build_metrics_server() -> Path:
    """The metrics-server binary, built once from its Go module into the cache (outside the repository)."""
    directory = cache_root() / f"metrics-server-{METRICS_SERVER_VERSION}"
    binary = directory / "metrics-server"
    if binary.exists():
        return binary
    go = find_go()
    if go is None:
        raise ControlPlaneError("no Go toolchain to build metrics-server (set GO=/path/to/go)")
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["nice", "-n", "10", go, "install", f"{METRICS_SERVER_MODULE}/cmd/metrics-server@{METRICS_SERVER_VERSION}"],
        env={**os.environ, "GOBIN": str(directory), "CGO_ENABLED": "0"},
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise ControlPlaneError(f"go install {METRICS_SERVER_MODULE}@{METRICS_SERVER_VERSION}: {done.stderr[-2000:]}")
    return binary


def _api_objects(address: str) -> list[dict[str, Any]]:
    """The Service without selector, its EndpointSlice (the node address), the APIService, and the
    read access to metrics.k8s.io that the unauthenticated aggregated requests need (module docstring)."""
    name, ns = "metrics-server", "kube-system"
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": METRICS_SERVER_PORT, "protocol": "TCP"}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": ns, "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": METRICS_SERVER_PORT, "protocol": "TCP"}],
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": APISERVICE},
            "spec": {
                "service": {"name": name, "namespace": ns, "port": 443},
                "group": "metrics.k8s.io",
                "version": "v1beta1",
                "insecureSkipTLSVerify": True,  # its self-signed serving certificate
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "netqos-benchmark-metrics-reader"},
            "rules": [
                {"apiGroups": ["metrics.k8s.io"], "resources": ["pods", "nodes"], "verbs": ["get", "list"]},
                # its discovery document, which the API server's availability check reads
                {"nonResourceURLs": ["/apis/metrics.k8s.io", "/apis/metrics.k8s.io/*"], "verbs": ["get"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "netqos-benchmark-metrics-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "netqos-benchmark-metrics-reader",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:anonymous"}],
        },
    ]


@contextmanager
def metrics_server(cluster: Cluster, binary: Path, timeout: float = 120) -> Iterator[int]:
    """metrics-server running and serving the metrics API through the API server; yields its pid."""
    network = realnodes.recorded(cluster.directory)
    if network is None or not cluster.nodes:
        raise ControlPlaneError("no real nodes: start the cluster with 'scripts/cluster up --nodes 2'")
    workdir = cluster.directory / "metrics-server"
    workdir.mkdir(exist_ok=True)
    # The API server as the nodes dial it (the host's end of their link), with the admin's credentials.
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://{network.host_address}:{cluster.ports['kube-apiserver']}"
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    kubeconfig.chmod(0o600)
    command = [
        "nsenter", f"--net=/run/netns/{network.namespace}", "--", str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={network.node_address}",
        f"--secure-port={METRICS_SERVER_PORT}",
        f"--cert-dir={workdir / 'certs'}",
        "--kubelet-insecure-tls",
        "--kubelet-preferred-address-types=InternalIP",
        "--kubelet-use-node-status-port",  # each kubelet serves on its own port
        "--metric-resolution=15s",
    ]  # fmt: skip
    with open(workdir / "metrics-server.log", "ab") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cluster.directory,
            start_new_session=True,
        )  # fmt: skip
    try:
        for obj in _api_objects(network.node_address):
            cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))
        deadline = time.monotonic() + timeout
        while _nodes_measured(cluster) < len(cluster.nodes):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = (workdir / "metrics-server.log").read_text(errors="replace")[-3000:]
                raise ControlPlaneError(f"metrics-server serves no node metrics within {timeout:.0f} s:\n{tail}")
            time.sleep(2)
        yield process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        cluster.request("DELETE", f"/apis/apiregistration.k8s.io/v1/apiservices/{APISERVICE}")


def _nodes_measured(cluster: Cluster) -> int:
    """The nodes the metrics API has a reading of (0 while the APIService is not available)."""
    status, body = cluster.request("GET", "/apis/metrics.k8s.io/v1beta1/nodes")
    return len(body.get("items") or []) if status == 200 and isinstance(body, dict) else 0


# --- the chart ----------------------------------------------------------------------------------------


def helm_binary() -> str:
    done = subprocess.run([str(REPO / "scripts/helm"), "--path"], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise ControlPlaneError(f"scripts/helm --path: {done.stderr.strip()}")
    return done.stdout.strip()


@contextmanager
def chart(cluster: Cluster, sets: list[str], workdir: Path) -> Iterator[None]:
    """The chart installed with its HPA on, ready on the real nodes; uninstalled afterwards."""
    helm, env = helm_binary(), {**os.environ, **cluster.env()}
    certs = workdir / "certs"
    cli = [sys.executable, "-m", "webhook", "certs", "--out", str(certs), "--service", RELEASE, "--namespace", RELEASE]
    subprocess.run(cli, check=True, capture_output=True, timeout=120, env=env)
    cluster.create_namespace(RELEASE)
    cluster.kubectl(
        "-n", RELEASE, "create", "secret", "tls", f"{RELEASE}-tls",
        f"--cert={certs / 'tls.crt'}", f"--key={certs / 'tls.key'}",
    )  # fmt: skip
    command = [
        helm, "install", RELEASE, str(CHART), "-n", RELEASE, "--kubeconfig", env["KUBECONFIG"],
        "--set", f"fullnameOverride={RELEASE}", "--set", "certificates.source=secret",
        "--set-file", f"certificates.secret.caBundle={certs / 'ca.crt'}", "--set", "autoscaling.enabled=true",
        *(arg for value in sets for arg in ("--set", value)), "--wait", "--timeout", "300s",
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=360)
        if done.returncode != 0:
            raise ControlPlaneError(f"helm install: {done.stderr.strip()}")
        cluster.wait_webhook(active=True, timeout=60)
        yield
    finally:
        uninstall = [helm, "uninstall", RELEASE, "-n", RELEASE, "--kubeconfig", env["KUBECONFIG"], "--wait"]
        subprocess.run(uninstall, capture_output=True, timeout=180)
        cluster.delete_namespace(RELEASE, timeout=180)


# --- the load -----------------------------------------------------------------------------------------


def probe_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "hpa-load-", "labels": {"qos": "latency-sensitive"}},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}], "nodeSelector": NOWHERE},
    }


@dataclass
class Load:
    """Dry-run creates from `clients` threads, each on its own kept-alive connection, until stopped."""

    cluster: Cluster
    clients: int
    sent: int = 0
    carrying: int = 0
    errors: list[str] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=self._client, daemon=True) for _ in range(self.clients)]
        for thread in threads:
            thread.start()
        return threads

    def _client(self) -> None:
        body = json.dumps(probe_pod()).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        path = f"/api/v1/namespaces/{LOAD_NAMESPACE}/pods?dryRun=All"
        conn = None
        while not self.stopping.is_set():
            try:
                if conn is None:
                    port = self.cluster.ports["kube-apiserver"]
                    conn = http.client.HTTPSConnection(LOOPBACK, port, context=self.cluster.ssl_context(), timeout=60)
                conn.request("POST", path, body=body, headers=headers)
                response = conn.getresponse()
                raw = response.read()
                ok = response.status == 201 and carries_preference(json.loads(raw))
                with self.lock:
                    self.sent += 1
                    self.carrying += ok
                    if response.status != 201 and len(self.errors) < 20:
                        self.errors.append(f"{response.status}: {raw[:200]!r}")
            except (OSError, http.client.HTTPException) as err:
                conn = None
                with self.lock:
                    if len(self.errors) < 20:
                        self.errors.append(repr(err))
                time.sleep(0.5)


def unschedulable_deployment(replicas: int) -> dict[str, Any]:
    labels = {"app": "hpa-load", "qos": "latency-sensitive"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "hpa-load", "namespace": LOAD_NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "hpa-load"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": NOWHERE,
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }


# --- samples -----------------------------------------------------------------------------------------


@dataclass
class PodReading:
    """One webhook pod at one sample; times in seconds since the start of the run."""

    name: str
    node: str
    created_at: float
    ready_at: float | None  # when its Ready condition last turned true; None: not Ready
    reviews: float | None  # its own count of reviews answered; None: not Ready, or /metrics unread


@dataclass
class Sample:
    seconds: float
    phase: str  # load / cooldown
    hpa_current: int
    hpa_desired: int
    cpu_percent: int | None  # the HPA's status: average utilisation of the CPU request
    ready: int  # the webhook Deployment's ready replicas
    pod_millicores: list[int]  # each webhook pod's CPU, from the metrics API
    creates_per_second: float  # dry-run creates answered since the previous sample
    pods_created: int  # of the unschedulable Deployment
    fail_open: float  # since the start
    load_average: float
    pods: list[PodReading] = field(default_factory=list)  # the webhook's, each with its count of reviews


def sample(
    cluster: Cluster, t0: tuple[float, float], phase: str, load: Load, previous: tuple[float, int], base: float
) -> Sample:
    """What the HPA, the Deployment, the metrics API and each webhook pod say now; `t0` is the
    start as (monotonic, wall clock) seconds."""
    hpa = cluster.get(f"/apis/autoscaling/v2/namespaces/{RELEASE}/horizontalpodautoscalers/{RELEASE}") or {}
    status = hpa.get("status") or {}
    cpu = None
    for current in status.get("currentMetrics") or []:
        cpu = ((current.get("resource") or {}).get("current") or {}).get("averageUtilization")
    deployment = cluster.get(f"/apis/apps/v1/namespaces/{RELEASE}/deployments/{RELEASE}") or {}
    pod_metrics = cluster.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{RELEASE}/pods") or {}
    millicores = sorted(
        sum(_millicores(c["usage"]["cpu"]) for c in item.get("containers", [])) for item in pod_metrics.get("items", [])
    )
    now = time.monotonic()
    with load.lock:
        sent = load.sent
    rate = (sent - previous[1]) / max(now - previous[0], 1e-9)
    listed = cluster.get(f"/api/v1/namespaces/{LOAD_NAMESPACE}/pods?limit=1") or {}
    created = len(listed.get("items") or []) + int((listed.get("metadata") or {}).get("remainingItemCount") or 0)
    return Sample(
        seconds=now - t0[0],
        phase=phase,
        hpa_current=int(status.get("currentReplicas") or 0),
        hpa_desired=int(status.get("desiredReplicas") or 0),
        cpu_percent=cpu,
        ready=int((deployment.get("status") or {}).get("readyReplicas") or 0),
        pod_millicores=millicores,
        creates_per_second=rate,
        pods_created=created,
        fail_open=summed(metrics(cluster), FAIL_OPEN) - base,
        load_average=os.getloadavg()[0],
        pods=webhook_pods(cluster, t0[1]),
    )


def webhook_pods(cluster: Cluster, wall0: float) -> list[PodReading]:
    """Each webhook pod, and for a Ready one its count of reviews answered."""
    listed = cluster.get(f"/api/v1/namespaces/{RELEASE}/pods?labelSelector={quote(WEBHOOK_PODS)}") or {}
    readings = []
    for pod in listed.get("items") or []:
        name = pod["metadata"]["name"]
        ready_at = _ready_since(pod)
        readings.append(
            PodReading(
                name=name,
                node=(pod.get("spec") or {}).get("nodeName") or "",
                created_at=_seconds(pod["metadata"]["creationTimestamp"]) - wall0,
                ready_at=None if ready_at is None else ready_at - wall0,
                reviews=None if ready_at is None else reviews_answered(cluster, name),
            )
        )
    return sorted(readings, key=lambda r: (r.created_at, r.name))


def _ready_since(pod: dict[str, Any]) -> float | None:
    """When the pod's Ready condition last turned true (Unix seconds; the API's one-second
    resolution), or None while it is not Ready."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            return _seconds(condition["lastTransitionTime"])
    return None


def _seconds(timestamp: str) -> float:
    return dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def reviews_answered(cluster: Cluster, pod: str) -> float | None:
    """The pod's own `netqos_admission_requests_total`, summed over its labels, through the API
    server's pod proxy (which does not verify the pod's certificate: `proxyTLSClientConfig`,
    pkg/controlplane/apiserver/config.go); None when it does not answer."""
    try:
        status, raw = cluster_raw(
            cluster, f"/api/v1/namespaces/{RELEASE}/pods/https:{pod}:{WEBHOOK_PORT}/proxy/metrics"
        )
    except (OSError, http.client.HTTPException):
        return None
    return counter(raw.decode(errors="replace"), REVIEWS) if status == 200 else None


def counter(exposition: str, name: str) -> float:
    """The sum of a metric's samples in a Prometheus text exposition."""
    total = 0.0
    for line in exposition.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _millicores(quantity: str) -> int:
    """A CPU quantity as the metrics API writes it (nanocores "12345n", "250m", "1") in millicores."""
    return round(parse_quantity(quantity, "usage.cpu") * 1000)


# --- the run -----------------------------------------------------------------------------------------


@dataclass
class Result:
    samples: list[Sample]
    dry_run_creates: int
    dry_run_with_preference: int
    pods: int
    pods_with_preference: int
    fail_open: float
    rejected: float
    errors: list[str]
    sets: list[str]
    load_end: float = 0.0  # seconds since the start, when the clients stopped
    min_replicas: int = 2  # the HPA's
    clients: int = 0


def run(cluster: Cluster, args: argparse.Namespace) -> Result:
    binary = build_metrics_server()
    with tempfile.TemporaryDirectory(prefix="netqos-hpa-") as tmp, metrics_server(cluster, binary):
        with chart(cluster, args.set, Path(tmp)):
            _wait_first_reading(cluster, timeout=180)
            cluster.create_namespace(LOAD_NAMESPACE)
            try:
                return _measure(cluster, args)
            finally:
                _remove_load(cluster)


def _remove_load(cluster: Cluster) -> None:
    """The load's namespace and its thousands of pods (one request may outlast its 30 s: retried)."""
    for attempt in range(3):
        try:
            cluster.delete_namespace(LOAD_NAMESPACE, timeout=600)
            return
        except TimeoutError:
            if attempt == 2:
                raise


def _wait_first_reading(cluster: Cluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    path = f"/apis/autoscaling/v2/namespaces/{RELEASE}/horizontalpodautoscalers/{RELEASE}"
    while not ((cluster.get(path) or {}).get("status") or {}).get("currentMetrics"):
        if time.monotonic() > deadline:
            raise ControlPlaneError(
                f"the HPA has no CPU reading {timeout:.0f} s after the install: {cluster.get(path)}"
            )
        time.sleep(3)


def _measure(cluster: Cluster, args: argparse.Namespace) -> Result:
    before = metrics(cluster)
    base = summed(before, FAIL_OPEN)
    load = Load(cluster, args.clients)
    t0 = (time.monotonic(), time.time())
    samples = [sample(cluster, t0, "idle", load, (t0[0], 0), base)]
    load_end = 0.0
    threads = load.run()
    if args.pods:
        cluster.create(unschedulable_deployment(args.pods), LOAD_NAMESPACE)
    previous = (time.monotonic(), 0)
    for phase, seconds in (("load", args.seconds), ("cooldown", args.cooldown)):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(args.interval)
            samples.append(sample(cluster, t0, phase, load, previous, base))
            previous = (time.monotonic(), load.sent)
            print(json.dumps(asdict(samples[-1])), file=sys.stderr)
        if phase == "load":
            load.stopping.set()
            load_end = time.monotonic() - t0[0]
            for thread in threads:
                thread.join(timeout=70)
    after = metrics(cluster)
    pods, carrying = with_preference(cluster, LOAD_NAMESPACE)
    hpa = cluster.get(f"/apis/autoscaling/v2/namespaces/{RELEASE}/horizontalpodautoscalers/{RELEASE}") or {}
    return Result(
        samples=samples,
        dry_run_creates=load.sent,
        dry_run_with_preference=load.carrying,
        pods=pods,
        pods_with_preference=carrying,
        fail_open=summed(after, FAIL_OPEN) - base,
        rejected=summed(after, REJECTED) - summed(before, REJECTED),
        errors=load.errors,
        sets=args.set,
        load_end=load_end,
        min_replicas=int((hpa.get("spec") or {}).get("minReplicas") or 1),
        clients=args.clients,
    )


# --- per replica ----------------------------------------------------------------------------------------


@dataclass
class Interval:
    """Between two samples of the load: the reviews each pod answered (pods whose count is known
    at both ends, or that became Ready in between: a new process counts from 0)."""

    start: float
    end: float
    reviews: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.reviews.values())


def intervals(samples: list[Sample], load_end: float) -> list[Interval]:
    """The intervals from the first sample (the load starts right after it) to the last sample
    taken before `load_end`. A pod first counted after the start that became Ready after it counts
    from 0 (its process began then); one Ready before it, from its first count."""
    during = [s for s in samples if s.seconds <= load_end + 1e-6]
    last = {pod.name: pod.reviews for pod in during[0].pods if pod.reviews is not None} if during else {}
    out = []
    for before, after in zip(during, during[1:], strict=False):
        reviews = {}
        for pod in after.pods:
            if pod.reviews is None:
                continue
            if pod.name in last:
                previous = last[pod.name]
                reviews[pod.name] = pod.reviews - previous if pod.reviews >= previous else pod.reviews  # a restart
            elif pod.ready_at is not None and pod.ready_at > during[0].seconds:  # Ready during the load
                reviews[pod.name] = pod.reviews
            last[pod.name] = pod.reviews
        out.append(Interval(before.seconds, after.seconds, reviews))
    return out


@dataclass
class Share:
    """One replica's part of the load from the moment it became Ready (or the load began)."""

    name: str
    node: str
    created_at: float
    ready_at: float | None
    new: bool  # became Ready after the load began
    reviews: float  # answered while Ready, during the load
    minutes: float  # Ready during the load
    share: float  # of all reviews answered while it was Ready
    fair: float  # 1/N averaged over those intervals, N the replicas answering
    first_review_after: float | None  # s from Ready to the first sample that counted a review (new ones)
    fair_share_after: float | None  # s from Ready to the end of the first interval at >= FAIR/N

    @property
    def per_minute(self) -> float:
        return self.reviews / self.minutes if self.minutes > 0 else 0.0

    @property
    def took_share_within_a_minute(self) -> bool:
        return self.fair_share_after is not None and self.fair_share_after <= 60


def shares(samples: list[Sample], load_end: float) -> list[Share]:
    """Each webhook pod seen Ready during the load, in the order they were created."""
    spans = intervals(samples, load_end)
    if not spans:
        return []
    start, end = spans[0].start, spans[-1].end
    pods = {pod.name: pod for s in samples if s.seconds <= end + 1e-6 for pod in s.pods if pod.ready_at is not None}
    out = []
    for name, pod in sorted(pods.items(), key=lambda item: (item[1].created_at, item[0])):
        ready_at = pod.ready_at if pod.ready_at is not None else start
        mine = [span for span in spans if span.end > ready_at and name in span.reviews]
        answered = sum(span.reviews[name] for span in mine)
        total = sum(span.total for span in mine)
        fair = [1 / len(span.reviews) for span in mine if span.total > 0]
        new = ready_at > start
        out.append(
            Share(
                name=name,
                node=pod.node,
                created_at=pod.created_at,
                ready_at=pod.ready_at,
                new=new,
                reviews=answered,
                minutes=max(end - max(ready_at, start), 0.0) / 60,
                share=answered / total if total else 0.0,
                fair=sum(fair) / len(fair) if fair else 0.0,
                first_review_after=_first(mine, ready_at, name, fair=False) if new else None,
                fair_share_after=_first(mine, ready_at, name, fair=True),
            )
        )
    return out


def _first(spans: list[Interval], since: float, name: str, fair: bool) -> float | None:
    """Seconds from `since` to the end of the first of `spans` where `name` answered a review (or,
    with `fair`, at least FAIR/N of them); None: never."""
    for span in spans:
        answered = span.reviews[name]
        if answered > 0 and (not fair or answered / span.total >= FAIR / len(span.reviews)):
            return max(span.end - since, 0.0)
    return None


@dataclass
class Scaling:
    """The HPA's decisions and the replicas that followed, in seconds since the start."""

    decisions: list[tuple[float, int]]  # (when the HPA's desired count changed, to what)
    at_min: float | None  # after the load: the HPA's desired count back at its minimum
    back_to_min: float | None  # after the load: the ready replicas and the pods back at the minimum


def scaling(samples: list[Sample], load_end: float, min_replicas: int) -> Scaling:
    decisions: list[tuple[float, int]] = []
    for s in samples:
        if not decisions or s.hpa_desired != decisions[-1][1]:
            decisions.append((s.seconds, s.hpa_desired))
    after = [s for s in samples if s.seconds > load_end]
    at_min = next((s.seconds for s in after if s.hpa_desired == min_replicas), None)
    back = next((s.seconds for s in after if s.ready == min_replicas and len(s.pods) == min_replicas), None)
    return Scaling(decisions, at_min, back)


def cpu_per_review(samples: list[Sample], load_end: float, settle: float = 60) -> float | None:
    """Milliseconds of webhook CPU per review: the pods' CPU (metrics API) over the reviews per
    second they counted, summed over the samples of the load after `settle` s (the metrics API
    averages over its resolution, so the first readings lag the load)."""
    spans = {span.end: span for span in intervals(samples, load_end)}
    millicores = rate = 0.0
    for s in samples:
        span = spans.get(s.seconds)
        if span is None or s.seconds < settle or not s.pod_millicores or span.end <= span.start:
            continue
        millicores += sum(s.pod_millicores)
        rate += span.total / (span.end - span.start)
    return millicores / rate if rate else None


def table(result: Result) -> str:
    """The run as markdown: the samples, each replica's share, the scale-up and the scale-down."""
    lines = [
        "| t s | phase | HPA current / desired | CPU % of request (HPA) | ready | webhook pods' CPU m "
        "(metrics API) | dry-run creates/s | pods created | fail-open | load avg |",
        "|---:|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for s in result.samples:
        cpu = "-" if s.cpu_percent is None else str(s.cpu_percent)
        lines.append(
            f"| {s.seconds:.0f} | {s.phase} | {s.hpa_current} / {s.hpa_desired} | {cpu} | {s.ready} | "
            f"{', '.join(map(str, s.pod_millicores)) or '-'} | {s.creates_per_second:.0f} | {s.pods_created} | "
            f"{s.fail_open:.0f} | {s.load_average:.1f} |"
        )
    lines += [
        "",
        f"dry-run creates: {result.dry_run_creates}, with the preference: {result.dry_run_with_preference}; "
        f"pods of the unschedulable Deployment: {result.pods}, with the preference: {result.pods_with_preference}; "
        f"fail-open: {result.fail_open:.0f}, rejected: {result.rejected:.0f}; "
        f"chart values: autoscaling.enabled=true {' '.join(result.sets)}",
    ]
    if result.errors:
        lines.append(f"client errors (first {len(result.errors)}): {result.errors}")
    return "\n".join([*lines, "", *replica_table(result), "", *minute_table(result), "", *scaling_lines(result)])


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def replica_table(result: Result) -> list[str]:
    lines = [
        "## Each replica's share of the reviews (its own netqos_admission_requests_total)",
        "",
        f"Times in seconds since the start; the load ran from 0 to {result.load_end:.0f}. Fair share: an interval "
        f"between two samples in which the replica answered at least {FAIR:.0%} of 1/N of the reviews (N the "
        "replicas answering then); first review and fair share are counted at the sample that saw them.",
        "",
        "| replica | node | created | Ready | reviews while Ready | min Ready (load) | reviews/min after Ready "
        "| share while Ready | 1/N | Ready to first review s | Ready to fair share s | share within 60 s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in shares(result.samples, result.load_end):
        within = ("yes" if r.took_share_within_a_minute else "no") if r.new else "(Ready before the load)"
        lines.append(
            f"| {r.name} | {r.node} | {r.created_at:.0f} | {_s(r.ready_at)} | {r.reviews:.0f} | {r.minutes:.1f} | "
            f"{r.per_minute:.0f} | {r.share:.0%} | {r.fair:.0%} | {_s(r.first_review_after)} | "
            f"{_s(r.fair_share_after)} | {within} |"
        )
    ms = cpu_per_review(result.samples, result.load_end)
    if ms is not None:
        lines += [
            "",
            f"Webhook CPU per review (metrics API CPU over the reviews counted, after the first 60 s): {ms:.2f} ms",
        ]
    return lines


def minute_table(result: Result) -> list[str]:
    """Reviews each replica answered in each minute of the load (by the sample that counted them)."""
    spans = intervals(result.samples, result.load_end)
    names = [r.name for r in shares(result.samples, result.load_end)]
    if not spans or not names:
        return []
    lines = [
        "## Reviews per replica per minute of the load",
        "",
        "| minute | " + " | ".join(name.rsplit("-", 1)[-1] for name in names) + " |",
        "|---:|" + "---:|" * len(names),
    ]
    for minute in range(int(spans[-1].end // 60) + 1):
        inside = [span for span in spans if minute * 60 < span.end <= (minute + 1) * 60]
        cells = [
            _s(sum(span.reviews[name] for span in inside if name in span.reviews))
            if any(name in span.reviews for span in inside)
            else "-"
            for name in names
        ]
        lines.append(f"| {minute}-{minute + 1} | " + " | ".join(cells) + " |")
    return lines


def scaling_lines(result: Result) -> list[str]:
    scaled = scaling(result.samples, result.load_end, result.min_replicas)
    new = [r for r in shares(result.samples, result.load_end) if r.new]
    decisions = ", ".join(f"{count} at {t:.0f} s" for t, count in scaled.decisions)
    ready = ", ".join(f"{r.name} created {r.created_at:.0f} s, Ready {_s(r.ready_at)} s" for r in new) or "none"
    down = (
        f"the HPA's desired count back at {result.min_replicas} {_s(_after(scaled.at_min, result.load_end))} s "
        f"after the load stopped, the replicas back at {result.min_replicas} "
        f"{_s(_after(scaled.back_to_min, result.load_end))} s after it"
    )
    return [
        "## Scale-up and scale-down",
        "",
        f"- the HPA's desired replicas (at the samples): {decisions}",
        f"- new replicas: {ready}",
        f"- scale-down: {down} ('-': not within the cooldown)",
    ]


def _after(t: float | None, load_end: float) -> float | None:
    return None if t is None else t - load_end


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hpa", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=240, help="of sustained load (default 240)")
    parser.add_argument("--cooldown", type=float, default=60, help="of sampling after the load (default 60)")
    parser.add_argument("--interval", type=float, default=10, help="between samples (default 10 s)")
    parser.add_argument("--clients", type=int, default=6, help="threads sending dry-run creates (default 6)")
    parser.add_argument(
        "--pods", type=int, default=2000, help="replicas of the unschedulable Deployment (default 2,000; 0: none)"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="another chart value (repeatable)"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the result as JSON")
    parser.add_argument("--record", metavar="NAME", help="also write the run to docs/evidence/NAME-DATE.md")
    args = parser.parse_args(argv)
    cluster = attach(default_directory())
    load, started = os.getloadavg()[0], time.monotonic()
    result = run(cluster, args)
    report = table(result)
    print(report)
    if args.json:
        args.json.write_text(json.dumps(asdict(result), indent=2))
    if args.record:
        command = shlex.join([".venv/bin/python", "-m", "benchmarks.hpa", *(sys.argv[1:] if argv is None else argv)])
        title = "The chart's HorizontalPodAutoscaler on real nodes: each replica's share of the reviews"
        body = f"Load: {result.clients} client threads of dry-run creates, {args.pods} unschedulable pods.\n\n{report}"
        seconds = time.monotonic() - started
        path = evidence.write(args.record, title, command, body, (load, os.getloadavg()[0]), seconds)
        print(f"recorded: {path.relative_to(evidence.REPO)}", file=sys.stderr)
    ok = result.fail_open == 0 and result.dry_run_creates == result.dry_run_with_preference
    return 0 if ok and result.pods == result.pods_with_preference else 1


if __name__ == "__main__":
    sys.exit(main())
