"""A real Kubernetes control plane on loopback, from the binaries `harness.gobuild` builds: etcd,
kube-apiserver, kube-controller-manager and kube-scheduler (as `netqos-scheduler`: kube-scheduler
with the NetQoS score plugin registered, running the default profile and a `netqos-scheduler`
profile).

There is no kubelet, as with KWOK or kube-scheduler-simulator: Nodes are API objects whose status
the caller writes, the scheduler binds pods to them, and the caller writes pod status where a
kubelet would. So that a node is exactly what was written, the API server does not taint new
nodes `not-ready` (the TaintNodesByCondition admission plugin is off) and kube-controller-manager
runs every controller but the node lifecycle controller (which would mark kubelet-less nodes
unreachable). Everything else is stock: RBAC, service-account tokens, the default admission
plugins plus MutatingAdmissionWebhook and MutatingAdmissionPolicy, Deployments, ReplicaSets, the
disruption controller behind PodDisruptionBudgets and the Eviction API. `up(..., nodes=N)` adds
real kubelets (`harness.nodes`) once the control plane is ready.

- `up(directory, bin_dir)` starts the processes (each in its own session, listening on free
  loopback ports), with certificates and kubeconfigs (`harness.pki`) in `directory`, and waits
  until the API server is ready, the scheduler healthy and the `default` service account exists;
  it records what runs in `directory/state.json` (`Cluster.save`);
- `attach(directory)` finds a cluster started earlier (`scripts/cluster up`, `harness.clustercli`)
  from that record, `Cluster.down()` stops one. Several clusters run at once in different
  directories.

On 1.34 and 1.35 the API server runs with the MutatingAdmissionPolicy feature gate and its
v1beta1 API enabled (beta, off by default there: `Release.apiserver_flags`).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import http.client
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import nodes as realnodes
from harness import pki
from harness.gobuild import KUBERNETES_VERSION, BuildError, Release, kubernetes_source, release
from webhook.names import INJECTED_ANNOTATION

CLUSTER_DIR_ENV = "NETQOS_CLUSTER_DIR"  # the state directory of a cluster (scripts/cluster, tests/e2e)
STATE_FILE = "state.json"
LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.0.0.0/24"
DEFAULT_SCHEDULER = "default-scheduler"
NETQOS_SCHEDULER = "netqos-scheduler"
NETQOS_PLUGIN = "NetQoS"
NETQOS_WEIGHT = 1
ADMISSION_PLUGINS = ("MutatingAdmissionWebhook", "MutatingAdmissionPolicy", "ValidatingAdmissionWebhook")
START_TIMEOUT = 90.0  # seconds for every component to be ready; a healthy start takes ~10-20 s
STOP_TIMEOUT = 10.0


class ControlPlaneError(RuntimeError):
    """The control plane could not be started, reached or found; the message says which part and why."""


# --- the cluster -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Cluster:
    """A running control plane: its directory, ports and processes (see the module docstring)."""

    directory: Path
    bin_dir: Path
    ports: dict[str, int]
    pids: dict[str, int]
    start_seconds: float = 0.0
    kubernetes: str = KUBERNETES_VERSION  # the release's version, as its /version reports it
    nodes: list[str] = field(default_factory=list)  # real nodes (harness.nodes), by name
    node_pids: dict[str, int] = field(default_factory=dict)

    @property
    def minor(self) -> str:
        """The minor release, "1.36": what version-specific expectations compare against."""
        return ".".join(self.kubernetes.lstrip("v").split(".")[:2])

    # --- where things are ------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.ports['kube-apiserver']}"

    @property
    def kubectl_path(self) -> Path:
        return self.bin_dir / "kubectl"

    def log(self, component: str) -> Path:
        return self.directory / "logs" / f"{component}.log"

    def log_tail(self, component: str, lines: int = 40) -> str:
        try:
            return "\n".join(self.log(component).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def env(self) -> dict[str, str]:
        """The environment in which kubectl and the CLI use this cluster (and tests reuse it)."""
        return {
            "KUBECONFIG": str(self.kubeconfig),
            CLUSTER_DIR_ENV: str(self.directory),
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    # --- clients ---------------------------------------------------------------------------------
    def ssl_context(self) -> ssl.SSLContext:
        """Trusts the cluster's CA and presents the admin (system:masters) client certificate."""
        context = ssl.create_default_context(cafile=str(self.directory / "pki" / "ca.crt"))
        context.load_cert_chain(str(self.directory / "pki" / "admin.crt"), str(self.directory / "pki" / "admin.key"))
        return context

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30,
    ) -> tuple[int, Any]:
        """One request to the API server as the admin: (status, the decoded JSON body or None)."""
        conn = http.client.HTTPSConnection(
            LOOPBACK, self.ports["kube-apiserver"], context=self.ssl_context(), timeout=timeout
        )
        try:
            data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
            headers = {"Accept": "application/json"}
            if data is not None:
                headers["Content-Type"] = content_type
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        try:
            return response.status, json.loads(raw) if raw else None
        except ValueError:
            return response.status, raw.decode(errors="replace")

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """The cluster's own kubectl (built with it) against this cluster."""
        result = subprocess.run(
            [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} exited {result.returncode}: {result.stderr.strip()}")
        return result

    # --- objects, as a kubelet-less cluster needs them ---------------------------------------------
    def create(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Create one object (a Node may carry its status: the API server keeps it on create)."""
        status, body = self.request("POST", _collection(obj, namespace), obj)
        if status not in (200, 201):
            raise ControlPlaneError(f"creating {obj['kind']} {obj['metadata'].get('name')}: {status} {body}")
        created: dict[str, Any] = body
        return created

    def get(self, path: str) -> dict[str, Any] | None:
        status, body = self.request("GET", path)
        if status == 404:
            return None
        if status != 200:
            raise ControlPlaneError(f"GET {path}: {status} {body}")
        found: dict[str, Any] = body
        return found

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.get(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def write_pod_status(self, pod: dict[str, Any], phase: str = "Running") -> dict[str, Any]:
        """What a kubelet would report for a pod it started: the phase, Ready, an IP, its containers.
        The pod IP is made up from the pod's uid in 10.244.0.0/16 (endpoints may not be loopback
        addresses); nothing ever dials it."""
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ready = "True" if phase == "Running" else "False"
        digest = hashlib.sha256(pod["metadata"]["uid"].encode()).digest()
        ip = f"10.244.{digest[0]}.{digest[1] % 254 + 1}"
        status = {
            "phase": phase,
            "hostIP": "192.0.2.1",  # TEST-NET-1: documentation only, never routed
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": now,
            "conditions": [
                {
                    "type": kind,
                    "status": ready if kind in ("Ready", "ContainersReady") else "True",
                    "lastTransitionTime": now,
                }
                for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": phase == "Running",
                    "restartCount": 0,
                    "started": phase == "Running",
                    "state": {"running": {"startedAt": now}},
                }
                for c in pod["spec"]["containers"]
            ],
        }
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        code, body = self.request("PATCH", path, {"status": status}, "application/merge-patch+json")
        if code != 200:
            raise ControlPlaneError(f"PATCH {path}: {code} {body}")
        patched: dict[str, Any] = body
        return patched

    def wait_bound(self, namespace: str, name: str, timeout: float = 30) -> str:
        """The node the scheduler bound the pod to; on timeout, the pod's events say why not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pod = self.pod(namespace, name)
            node = (pod or {}).get("spec", {}).get("nodeName")
            if node:
                return str(node)
            time.sleep(0.1)
        events = self.get(f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.name%3D{name}") or {}
        messages = [f"{e.get('reason')}: {e.get('message')}" for e in events.get("items", [])]
        raise ControlPlaneError(
            f"pod {namespace}/{name} not bound within {timeout:.0f} s; events: {messages or 'none'}; "
            f"the scheduler's log:\n{self.log_tail('netqos-scheduler', 15)}"
        )

    def create_namespace(self, name: str, timeout: float = 60) -> None:
        """A namespace, once its default service account exists (pods cannot be created before).
        One of the same name still being deleted is waited for."""
        deadline = time.monotonic() + timeout
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        while (status := self.request("POST", "/api/v1/namespaces", namespace))[0] == 409:
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"namespace {name} exists (or is being deleted) after {timeout:.0f} s")
            time.sleep(0.2)
        if status[0] != 201:
            raise ControlPlaneError(f"creating namespace {name}: {status}")
        while self.get(f"/api/v1/namespaces/{name}/serviceaccounts/default") is None:
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"namespace {name}: no default service account within {timeout:.0f} s")
            time.sleep(0.1)

    def delete_namespace(self, name: str, timeout: float = 60) -> None:
        """Delete it, and its pods at once: no kubelet will ever confirm a graceful deletion, and
        a pod left terminating would still count on its node. Returns when no pod is left (the
        namespace, terminating, admits no new one; `create_namespace` waits for one of the same
        name to be gone)."""
        self.request("DELETE", f"/api/v1/namespaces/{name}")
        deadline = time.monotonic() + timeout
        while (self.get(f"/api/v1/namespaces/{name}/pods?limit=1") or {}).get("items"):
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"pods of namespace {name} still there {timeout:.0f} s after its deletion")
            self.request("DELETE", f"/api/v1/namespaces/{name}/pods", {"gracePeriodSeconds": 0})
            time.sleep(0.1)

    def wait_webhook(self, active: bool, timeout: float = 30) -> None:
        """Until the API server has seen the webhook configuration change (registered or removed):
        it watches configurations, so a pod created right after a change may still miss it. The
        probe is a server-side dry run of a selected pod, which calls the webhook like a real one."""
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": "webhook-probe-", "labels": {"qos": "latency-sensitive"}},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
        }
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, body = self.request("POST", "/api/v1/namespaces/default/pods?dryRun=All", probe)
            if status == 201 and (INJECTED_ANNOTATION in (body["metadata"].get("annotations") or {})) == active:
                return
            time.sleep(0.1)
        change = "call" if active else "stop calling"
        raise ControlPlaneError(f"the API server did not {change} the webhook within {timeout:.0f} s")

    def scheduler_metrics(self, scheduler: str = NETQOS_SCHEDULER) -> str:
        """A scheduler's /metrics (Prometheus text), read as the admin. `scheduler`: the
        cluster's, or one `start_scheduler` started."""
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # its self-signed serving certificate
        context.load_cert_chain(str(self.directory / "pki" / "admin.crt"), str(self.directory / "pki" / "admin.key"))
        conn = http.client.HTTPSConnection(LOOPBACK, self.ports[scheduler], context=context, timeout=10)
        try:
            conn.request("GET", "/metrics")
            return conn.getresponse().read().decode()
        finally:
            conn.close()

    def scheduler_cache(self, scheduler: str = NETQOS_SCHEDULER) -> dict[str, int]:
        """The scheduler cache's sizes (`scheduler_cache_size`: nodes, pods, assumed_pods), from
        its /metrics; refreshed by the scheduler once a second."""
        text = self.scheduler_metrics(scheduler)
        sizes = {}
        for line in text.splitlines():
            if line.startswith("scheduler_cache_size{"):
                kind = line.split('type="', 1)[1].split('"', 1)[0]
                sizes[kind] = int(float(line.rsplit(" ", 1)[1]))
        return sizes

    def wait_scheduler_cache(
        self, nodes: int, pods: int, timeout: float = 60, scheduler: str = NETQOS_SCHEDULER
    ) -> None:
        """Until the scheduler's cache holds `nodes` nodes and `pods` bound pods, none assumed:
        its informers have seen what the API server holds (they lag behind it under load)."""
        deadline = time.monotonic() + timeout
        want = {"nodes": nodes, "pods": pods, "assumed_pods": 0}
        while (have := self.scheduler_cache(scheduler)) != want:
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"the scheduler's cache holds {have}, not {want}, after {timeout:.0f} s")
            time.sleep(0.2)

    def compact_etcd(self, probe: str = "/api/v1/pods", timeout: float = 40) -> int:
        """Compact etcd at its current revision as another API server's compactor would (every 5
        minutes by default): record the revision in `compact_rev_key`, which every API server
        watches, then compact. A continue token of a list begun before then expires (410 Expired),
        once the API server's watch cache has dropped its older snapshots (it looks every 15 s,
        k8s.io/apiserver pkg/storage/cacher/compactor.go): this returns when a token of a list of
        `probe` (two objects or more) taken before the compaction answers 410. The revision."""
        status, first = self.request("GET", f"{probe}?limit=1")
        token = (first or {}).get("metadata", {}).get("continue") if status == 200 else None
        if not token:
            raise ControlPlaneError(f"compact_etcd: {probe} has fewer than two objects to probe with ({status})")
        # a write after the probe's snapshot, outside the API server's keys: the compaction
        # revision is then newer than every snapshot taken before (older ones expire; it stays)
        revision = int(
            self._etcd("/v3/kv/put", {"key": _b64("netqos-compaction"), "value": _b64("1")})["header"]["revision"]
        )
        self._etcd("/v3/kv/put", {"key": _b64("compact_rev_key"), "value": _b64(str(revision))})
        self._etcd("/v3/kv/compaction", {"revision": revision, "physical": True})
        deadline = time.monotonic() + timeout
        while self.request("GET", f"{probe}?limit=1&continue={token}")[0] != 410:
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"the API server still continues lists begun before revision {revision}")
            time.sleep(0.5)
        return revision

    def _etcd(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A call to etcd's JSON gateway on loopback."""
        conn = http.client.HTTPConnection(LOOPBACK, self.ports["etcd"], timeout=30)
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            response = conn.getresponse()
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
        finally:
            conn.close()
        if response.status != 200:
            raise ControlPlaneError(f"etcd {path}: {response.status} {answer}")
        return answer

    def delete_nodes(self) -> None:
        self.request("DELETE", "/api/v1/nodes")

    # --- more schedulers -------------------------------------------------------------------------
    def start_scheduler(self, name: str, config: dict[str, Any]) -> Path:
        """Start another kube-scheduler (the harness's build, with the NetQoS plugin registered)
        beside the cluster's, running `config`, a KubeSchedulerConfiguration: what a test would give
        `--scheduler-config`. Its profiles need schedulerNames of their own (the cluster's scheduler
        serves `default-scheduler` and `netqos-scheduler`). The harness adds its client connection
        and turns leader election off; the file it runs is written to the cluster's directory and
        returned. It runs until `stop_scheduler(name)` or `down()`; its log is `log(name)`."""
        taken = {DEFAULT_SCHEDULER, NETQOS_SCHEDULER}
        names = [str(p.get("schedulerName", DEFAULT_SCHEDULER)) for p in config.get("profiles") or [{}]]
        if taken & set(names) or name in self.pids:
            raise ControlPlaneError(f"scheduler {name}: its profiles {names} need names the cluster does not run")
        kubeconfig = self.directory / f"{NETQOS_SCHEDULER}.kubeconfig"  # system:kube-scheduler's identity
        runs = {**config, "clientConnection": {"kubeconfig": str(kubeconfig)}, "leaderElection": {"leaderElect": False}}
        path = _write(self.directory / f"{name}-config.json", json.dumps(runs, indent=2))
        port = self.ports[name] = free_port()
        command = [
            str(self.bin_dir / NETQOS_SCHEDULER),
            f"--config={path}",
            f"--secure-port={port}",
            f"--bind-address={LOOPBACK}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--cert-dir={self.directory / name}",
            "--profiling=false",
        ]
        self.pids[name] = _spawn(self, name, command)
        self.save()
        try:
            _wait(self, name, lambda: _probe("https", port, "/healthz", None) == "ok")
        except ControlPlaneError:
            self.stop_scheduler(name)
            raise
        return path

    def stop_scheduler(self, name: str) -> None:
        """Stop a scheduler `start_scheduler` started (SIGTERM, then SIGKILL), and forget it."""
        pid = self.pids.pop(name)
        self.ports.pop(name, None)
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline and _running(pid, self.bin_dir):
            time.sleep(0.1)
        if _running(pid, self.bin_dir):
            _signal(pid, signal.SIGKILL)
        self.save()

    # --- health ----------------------------------------------------------------------------------
    def alive(self) -> dict[str, bool]:
        return {name: _running(pid, self.bin_dir) for name, pid in self.pids.items()}

    def healthy(self) -> dict[str, str]:
        """Each component: "ok", or what is wrong with it."""
        report = {}
        for name, running in self.alive().items():
            report[name] = "ok" if running else "not running"
        checks = {
            "etcd": ("http", self.ports["etcd"], "/health"),
            "kube-apiserver": ("https", self.ports["kube-apiserver"], "/readyz"),
            "kube-controller-manager": ("https", self.ports["kube-controller-manager"], "/healthz"),
            "netqos-scheduler": ("https", self.ports["netqos-scheduler"], "/healthz"),
        }
        for name, (scheme, port, path) in checks.items():
            if report.get(name) == "ok":
                answer = _probe(scheme, port, path, self if name == "kube-apiserver" else None)
                if answer != "ok":
                    report[name] = answer
        for name, pid in self.node_pids.items():
            report[name] = "ok" if _alive(pid) else "not running"
        # an `up` killed part way leaves processes that answer but nodes that may not be Ready yet:
        # only the `up` that finished records its start time, so without one the cluster is not up
        report["start"] = "ok" if self.start_seconds else "unfinished: the 'up' that started it did not finish"
        if report["start"] == "ok" and report.get("kube-apiserver") == "ok":
            report.update(self.node_readiness())
        return report

    def node_readiness(self) -> dict[str, str]:
        """Each real node: "ok" when its Node object says Ready, else what it says."""
        if not self.nodes:
            return {}
        found = self.get("/api/v1/nodes") or {"items": []}
        ready = {
            n["metadata"]["name"]
            for n in found["items"]
            if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
        }
        return {f"node {name}": "ok" if name in ready else "not Ready" for name in self.nodes}

    def down(self) -> None:
        """Stop every process (SIGTERM, then SIGKILL) and remove the directory; real nodes first
        (their containers, mounts, network and cgroups: `nodes.teardown`)."""
        left = realnodes.teardown(self.directory)
        if left:
            raise ControlPlaneError(
                f"the nodes of {self.directory} left {', '.join(left)}; run 'scripts/cluster down' again"
            )
        for pid in self.pids.values():
            if _running(pid, self.bin_dir):
                _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline and any(self.alive().values()):
            time.sleep(0.1)
        for pid in self.pids.values():
            if _running(pid, self.bin_dir):
                _signal(pid, signal.SIGKILL)
        shutil.rmtree(self.directory, ignore_errors=True)

    def save(self) -> None:
        state = {
            "bin_dir": str(self.bin_dir),
            "ports": self.ports,
            "pids": self.pids,
            "start_seconds": self.start_seconds,
            "kubernetes": self.kubernetes,
            "nodes": self.nodes,
            "node_pids": self.node_pids,
        }
        _replace(self.directory / STATE_FILE, json.dumps(state, indent=2))


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _collection(obj: dict[str, Any], namespace: str | None) -> str:
    version = obj["apiVersion"]
    base = f"/api/{version}" if "/" not in version else f"/apis/{version}"
    plural = _PLURALS.get(obj["kind"], obj["kind"].lower() + "s")
    namespace = namespace or obj["metadata"].get("namespace")
    return (
        f"{base}/namespaces/{namespace}/{plural}"
        if namespace and obj["kind"] not in _CLUSTER_KINDS
        else f"{base}/{plural}"
    )


_PLURALS = {"PodDisruptionBudget": "poddisruptionbudgets", "Endpoints": "endpoints"}
_CLUSTER_KINDS = {"Node", "Namespace", "MutatingWebhookConfiguration", "ClusterRole", "ClusterRoleBinding"}


def _running(pid: int, bin_dir: Path) -> bool:
    """The process is alive and is one of ours (its executable is in bin_dir), not a reused pid."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except OSError:
        return False
    return Path(exe).parent == bin_dir.resolve()


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)  # each component leads its own session and process group
    except ProcessLookupError:
        pass


def _probe(scheme: str, port: int, path: str, cluster: Cluster | None) -> str:
    try:
        if scheme == "http":
            conn: http.client.HTTPConnection = http.client.HTTPConnection(LOOPBACK, port, timeout=5)
        else:
            if cluster is not None:
                context = cluster.ssl_context()
            else:  # the component's self-signed serving certificate; /healthz needs no identity
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            conn = http.client.HTTPSConnection(LOOPBACK, port, context=context, timeout=5)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read().decode(errors="replace")
        finally:
            conn.close()
    except (OSError, http.client.HTTPException) as err:
        return f"{path} unreachable: {err}"
    return "ok" if response.status == 200 else f"{path} answered {response.status}: {body[:200]}"


def attach(directory: Path) -> Cluster:
    """The cluster started earlier in `directory`."""
    try:
        state = json.loads((directory / STATE_FILE).read_text())
    except (OSError, ValueError) as err:
        raise ControlPlaneError(f"no cluster in {directory} ({err}); start one with 'scripts/cluster up'") from None
    return Cluster(
        directory,
        Path(state["bin_dir"]),
        dict(state["ports"]),
        dict(state["pids"]),
        float(state.get("start_seconds", 0.0)),
        str(state.get("kubernetes", KUBERNETES_VERSION)),
        list(state.get("nodes", [])),
        dict(state.get("node_pids", {})),
    )


def default_directory() -> Path:
    named = os.environ.get(CLUSTER_DIR_ENV)
    if named:
        return Path(named)
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"netqos-webhook-cluster-{os.getuid()}"


def up(directory: Path, bin_dir: Path, of: Release | None = None, nodes: int = 0) -> Cluster:
    """Start a control plane in `directory` (made empty first) from the binaries in `bin_dir`,
    which were built for release `of` (default: `release()`), and `nodes` real nodes
    (harness.nodes; root only) once it is ready."""
    of = of or release()
    started = time.monotonic()
    left = realnodes.teardown(directory)  # a crashed cluster's nodes, before their directory goes
    if left:
        raise ControlPlaneError(f"an earlier cluster in {directory} left {', '.join(left)}")
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    (directory / "logs").mkdir()
    ports = {
        name: free_port()
        for name in ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "netqos-scheduler")
    }
    cluster = Cluster(directory, bin_dir, ports, {}, kubernetes=of.version)
    network = None
    if nodes:
        reason = realnodes.unavailable_reason()
        if reason:
            raise ControlPlaneError(reason)
        realnodes.ensure_packages(lambda line: print(line, file=sys.stderr))
        network = realnodes.allocate(directory)
    service_cidr = network.service_cidr if network else SERVICE_CIDR
    advertise = network.host_address if network else LOOPBACK
    files = pki.control_plane(directory / "pki", cluster.server, _apiserver_hosts(service_cidr, advertise))
    commands = _commands(cluster, files, of, service_cidr, advertise)
    try:
        for name in ("etcd", "kube-apiserver", "kube-controller-manager", "netqos-scheduler"):
            cluster.pids[name] = _spawn(cluster, name, commands[name])
            cluster.save()
            if name == "etcd":
                _wait(cluster, name, lambda: _probe("http", ports["etcd"], "/health", None) == "ok")
            if name == "kube-apiserver":
                _wait(cluster, name, lambda: _probe("https", ports["kube-apiserver"], "/readyz", cluster) == "ok")
        _wait(
            cluster,
            "netqos-scheduler",
            lambda: _probe("https", ports["netqos-scheduler"], "/healthz", None) == "ok",
        )
        _wait(
            cluster,
            "kube-controller-manager",
            lambda: cluster.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
            "the default service account",
        )
        if network is not None:
            _start_nodes(cluster, network, nodes, of)
    except BaseException:
        cluster.down()
        raise
    cluster.start_seconds = time.monotonic() - started
    cluster.save()
    return cluster


def _start_nodes(cluster: Cluster, network: realnodes.Network, count: int, of: Release) -> None:
    """The node network, a kubelet (and containerd) per node, kube-proxy; until every node is Ready."""
    realnodes.create_network(network, cluster.ports["kube-apiserver"])
    server = f"https://{network.host_address}:{cluster.ports['kube-apiserver']}"
    names = [name for name, _labels in realnodes.node_names(count)]
    kubelets, proxy = pki.node_credentials(cluster.directory / "pki", server, names)
    credentials = realnodes.NodeCredentials(cluster.directory / "pki" / "ca.crt", kubelets, proxy)
    pause = realnodes.pause_archive(
        realnodes.build_pause(_kubernetes_source(of) / "build/pause/linux/pause.c", cluster.bin_dir / "pause"),
        cluster.bin_dir / "pause-image.tar",
    )
    cluster.nodes = list(kubelets)
    cluster.node_pids = realnodes.start(cluster.directory, network, cluster.bin_dir, credentials, pause)
    cluster.save()

    def ready() -> bool:
        return all(v == "ok" for v in cluster.node_readiness().values())

    deadline = time.monotonic() + realnodes.START_TIMEOUT
    while not ready():
        dead = [name for name, pid in cluster.node_pids.items() if not _alive(pid)]
        if dead or time.monotonic() > deadline:
            why = f"{', '.join(dead)} exited" if dead else f"not Ready within {realnodes.START_TIMEOUT:.0f} s"
            tails = "\n".join(f"{n}: {cluster.log_tail(n, 8)}" for n in (dead or list(cluster.node_pids))[:3])
            raise ControlPlaneError(f"the nodes {cluster.nodes}: {why}; logs in {cluster.directory}/logs\n{tails}")
        time.sleep(0.5)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kubernetes_source(of: Release) -> Path:
    try:
        return kubernetes_source(of)
    except BuildError as err:
        raise ControlPlaneError(str(err)) from None


def _apiserver_hosts(service_cidr: str, advertise: str) -> list[str]:
    """What the API server's serving certificate names: loopback, the address it advertises, the
    first address of the Service range (the `kubernetes` Service's) and that Service's DNS names."""
    return [
        LOOPBACK,
        *([advertise] if advertise != LOOPBACK else []),
        "localhost",
        str(next(ipaddress.ip_network(service_cidr).hosts())),
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]


@contextmanager
def running(directory: Path, bin_dir: Path, of: Release | None = None, nodes: int = 0) -> Iterator[Cluster]:
    cluster = up(directory, bin_dir, of, nodes)
    try:
        yield cluster
    finally:
        cluster.down()


def _scheduler_config(kubeconfig: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "profiles": [
            {"schedulerName": DEFAULT_SCHEDULER},
            {
                "schedulerName": NETQOS_SCHEDULER,
                "plugins": {"multiPoint": {"enabled": [{"name": NETQOS_PLUGIN, "weight": NETQOS_WEIGHT}]}},
            },
        ],
    }


def _commands(
    cluster: Cluster, files: dict[str, Path], of: Release, service_cidr: str = SERVICE_CIDR, advertise: str = LOOPBACK
) -> dict[str, list[str]]:
    d, p, b = cluster.directory, cluster.ports, cluster.bin_dir
    etcd_url, peer_url = f"http://{LOOPBACK}:{p['etcd']}", f"http://{LOOPBACK}:{p['etcd-peer']}"
    scheduler_config = _write(
        d / "scheduler-config.json", json.dumps(_scheduler_config(files["netqos-scheduler.kubeconfig"]), indent=2)
    )

    def component(name: str, port: int) -> list[str]:
        kubeconfig = str(files[f"{name}.kubeconfig"])
        return [
            f"--secure-port={port}",
            f"--bind-address={LOOPBACK}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--cert-dir={d / name}",
        ]

    return {
        "etcd": [
            str(b / "etcd"),
            "--name=default",
            f"--data-dir={d / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=default={peer_url}",
            "--unsafe-no-fsync=true",  # a throwaway cluster: durability is not the point, speed is
            "--log-level=warn",
        ],
        "kube-apiserver": [
            str(b / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={advertise}",
            f"--secure-port={p['kube-apiserver']}",
            f"--tls-cert-file={files['apiserver.crt']}",
            f"--tls-private-key-file={files['apiserver.key']}",
            f"--client-ca-file={files['ca.crt']}",
            f"--service-account-key-file={files['sa.pub']}",
            f"--service-account-signing-key-file={files['sa.key']}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={service_cidr}",
            "--authorization-mode=Node,RBAC",
            # logs and exec through the kubelets of real nodes, as the admin
            f"--kubelet-client-certificate={cluster.directory / 'pki' / 'admin.crt'}",
            f"--kubelet-client-key={cluster.directory / 'pki' / 'admin.key'}",
            "--kubelet-preferred-address-types=InternalIP",  # never a DNS lookup of a node's name
            f"--enable-admission-plugins={','.join(ADMISSION_PLUGINS)}",
            "--disable-admission-plugins=TaintNodesByCondition",
            "--profiling=false",
            # Without real nodes it advertises 127.0.0.1, which the `kubernetes` Service's endpoints
            # may not hold (ValidateEndpointIP): the lease reconciler logs it on 1.34-1.36 and makes
            # 1.37 refuse to start (pkg/controlplane/instance.go). No pod needs that Service then.
            *(["--endpoint-reconciler-type=none"] if advertise == LOOPBACK else []),
            *of.apiserver_flags,
        ],
        "kube-controller-manager": [
            str(b / "kube-controller-manager"),
            f"--kubeconfig={files['kube-controller-manager.kubeconfig']}",
            *component("kube-controller-manager", p["kube-controller-manager"]),
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={files['sa.key']}",
            f"--root-ca-file={files['ca.crt']}",
            f"--service-cluster-ip-range={service_cidr}",
            "--controllers=*,-node-lifecycle-controller",
            # its client's default (20 requests/s) would make a ReplicaSet of 10,000 take 8 minutes
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--profiling=false",
        ],
        "netqos-scheduler": [
            str(b / "netqos-scheduler"),
            f"--config={scheduler_config}",
            *component("netqos-scheduler", p["netqos-scheduler"]),
            "--profiling=false",
        ],
    }


def _spawn(cluster: Cluster, name: str, command: list[str]) -> int:
    with open(cluster.log(name), "ab") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cluster.directory,
            start_new_session=True,
        )
    return process.pid


def _wait(cluster: Cluster, name: str, ready: Any, what: str | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if not _running(cluster.pids[name], cluster.bin_dir):
            raise ControlPlaneError(
                f"{name} exited during start; its log ({cluster.log(name)}):\n{cluster.log_tail(name)}"
            )
        try:
            if ready():
                return
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.2)
    log = f"{name}'s log ({cluster.log(name)}):\n{cluster.log_tail(name)}"
    raise ControlPlaneError(f"{what or name} not ready within {START_TIMEOUT:.0f} s; {log}")


def _write(path: Path, data: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data)
    return path


def _replace(path: Path, data: str) -> None:
    """Write `path` whole or not at all: the state file is read while `up` still runs (by
    `status`, a second `up`, `down` after a crash), and a reader that met it truncated would
    take a running cluster for none and leave its processes behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(data)
    os.replace(partial, path)
