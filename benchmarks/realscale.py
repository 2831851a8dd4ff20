"""The read-only commands on the REAL API server at Kubernetes' documented limits.

On the real control plane of tests/e2e (harness.controlplane: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler; no kubelets), a seeded world is loaded:

- N Nodes (5,000), each with its status: `net` 15 % high, 10 % low (the slow nodes), 5 % another
  value, the rest unlabelled; three zones; 5 % tainted `dedicated=batch:NoSchedule`, 3 %
  `PreferNoSchedule`; allocatable 8/16/32/64 CPUs and 32-256 GiB, 110 pods;
- P bound pods (150,000) in 100 namespaces, owned by real objects: paused Deployments, each with
  its ReplicaSet, and StatefulSets (OnDelete), 10-100 replicas each. A fifth of the workloads are
  latency-sensitive (`qos=latency-sensitive`): 80 % of those carry the webhook's terms and
  annotation (created since it was registered), 15 % do not (created before it; a third of their
  pods stranded on net=low nodes), 5 % opted out. The latency-sensitive pods' status is written
  Running and Ready, as a kubelet would (rebalance reads their owners' readiness); the others stay
  Pending on their node, which every command counts alike (bound and not finished), and the load
  sends a fifth fewer requests.

The load runs with bounded concurrency (--concurrency keep-alive connections), with the controller
manager stopped (SIGSTOP: its ReplicaSet and StatefulSet controllers would create the pods
themselves before ours exist; the world is static, so it stays stopped through the measurements and
is resumed at the end). Then each of these runs as a child process, --repeat times, alternating:

- the floor: a plain paginated list of every pod, `limit=500`, decoded with the stdlib json;
- `netqos-webhook status -A -o json`;
- `netqos-webhook rebalance -o json` (the plan; nothing is evicted);
- `netqos-webhook explain --kubeconfig K --pod FILE -o json` of one latency-sensitive pod.

Each: wall time, CPU time, peak RSS (getrusage of the child), and the requests it sent, counted by
the API server itself (`apiserver_request_total`, GET and LIST, before and after; nothing else lists
while the controller manager is stopped). The load time and the RSS of kube-apiserver and etcd are
reported, and the load average beside every timing.

    scripts/bench --realscale                       5,000 nodes, 150,000 pods (API server ~5 GB), 1 run
    scripts/bench --realscale --fraction 0.1        500 nodes, 15,000 pods: for iterating
    scripts/bench --realscale --smoke               100 nodes, 3,000 pods: checks the harness (CI)
    scripts/bench --realscale --repeat 3 --json FILE
    scripts/bench --realscale --loaded              measure again the world an earlier run left in
                                                    $NETQOS_CLUSTER_DIR (same --fraction and --seed)
    scripts/bench --realscale ... --record          also write the table to docs/evidence/realscale-DATE.md

With $NETQOS_CLUSTER_DIR naming a running cluster (scripts/cluster up) it loads into that one and
leaves it running (a second load into the same cluster fails: names are taken); otherwise it starts
one in a temporary directory and stops it at the end. Results: docs/performance.md ("Scale on the
real API server").
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import scaleup
from harness import controlplane, evidence, gobuild, procfs
from harness.controlplane import LOOPBACK, Cluster
from webhook.names import INJECTED_ANNOTATION, OPT_OUT_ANNOTATION

REPO = Path(__file__).resolve().parent.parent
FULL_NODES, FULL_PODS, FULL_REPLICAS = 5_000, 150_000, 10_000
SMOKE_FRACTION = 1 / 50
TARGET_SECONDS = 30.0
EXPLAIN_TARGET_SECONDS = 10.0
TARGET_RSS_MIB = 1024.0
NAMESPACES = 100
QOS = {"qos": "latency-sensitive"}
TERMS = [  # what the default policy (deploy/base/policy.yaml) adds
    {"weight": 90, "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]}},
    {"weight": 10, "preference": {"matchExpressions": [{"key": "net", "operator": "NotIn", "values": ["low"]}]}},
    {"weight": 100, "preference": {"matchExpressions": [{"key": "net", "operator": "Exists"}]}},
    {"weight": 100, "preference": {"matchExpressions": [{"key": "net", "operator": "DoesNotExist"}]}},
]
RULE = "netqos"  # the default policy's rule: the injected annotation's value
ZONES = ("zone-a", "zone-b", "zone-c")
IMAGES = tuple(f"registry.example/app-{i}:1.{i}" for i in range(20))
PAGE = 500  # the floor's page size: kubectl's chunk size, as the CLI's
MEASURED = ("floor", "status", "rebalance", "explain")


# --- the world ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    kind: str  # Deployment | StatefulSet
    namespace: str
    name: str
    replicas: int
    style: str  # ordinary | injected | missing | opted-out
    cpu_m: int
    memory_mi: int
    image: str


def node_object(i: int, rng: random.Random) -> dict[str, Any]:
    """A Node with its status, as a kubelet would have registered it."""
    name = f"node-{i:05}"
    roll = rng.random()
    net = "high" if roll < 0.15 else "low" if roll < 0.25 else "medium" if roll < 0.30 else None
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "topology.kubernetes.io/zone": ZONES[i % len(ZONES)],
        **({"net": net} if net else {}),
    }
    spec: dict[str, Any] = {}
    taint = rng.random()
    if taint < 0.05:
        spec["taints"] = [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
    elif taint < 0.08:
        spec["taints"] = [{"key": "maintenance", "effect": "PreferNoSchedule"}]
    cpu = rng.choice((8, 16, 32, 64))
    allocatable = {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "images": [
                {"names": [image], "sizeBytes": 50_000_000 + 1_000_000 * n} for n, image in enumerate(IMAGES[:5])
            ],
        },
    }


def workloads(pods: int, rng: random.Random) -> list[Workload]:
    """Workloads of 10-100 replicas whose replicas add up to `pods`."""
    out: list[Workload] = []
    left = pods
    while left > 0:
        n = len(out)
        replicas = min(left, rng.randint(10, 100))
        left -= replicas
        style = "ordinary"
        if n % 5 == 0:  # a fifth latency-sensitive: 80 % injected, 15 % missing, 5 % opted out
            k = (n // 5) % 20
            style = "injected" if k < 16 else "missing" if k < 19 else "opted-out"
        out.append(
            Workload(
                kind="StatefulSet" if n % 4 == 3 else "Deployment",
                namespace=f"team-{n % NAMESPACES:03}",
                name=f"app-{n:05}",
                replicas=replicas,
                style=style,
                cpu_m=rng.choice((50, 100, 250, 500)),
                memory_mi=rng.choice((64, 128, 256, 512)),
                image=rng.choice(IMAGES),
            )
        )
    return out


def labels_of(w: Workload) -> dict[str, str]:
    return {"app": w.name, **(QOS if w.style != "ordinary" else {})}


def template(w: Workload) -> dict[str, Any]:
    """The workload's pod template, as its pods carry it (the terms only where injected)."""
    annotations = {}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": w.image,
                "resources": {"requests": {"cpu": f"{w.cpu_m}m", "memory": f"{w.memory_mi}Mi"}},
            }
        ],
        "terminationGracePeriodSeconds": 30,
    }
    if w.style == "opted-out":
        annotations[OPT_OUT_ANNOTATION] = "false"
    return {"metadata": {"labels": labels_of(w), "annotations": annotations}, "spec": spec}


def owner_objects(w: Workload) -> list[dict[str, Any]]:
    """The controller objects: a paused Deployment (its controller never rolls or creates a
    ReplicaSet) or an OnDelete StatefulSet. The ReplicaSet comes later: it needs the uid."""
    spec = {"replicas": w.replicas, "selector": {"matchLabels": {"app": w.name}}, "template": template(w)}
    if w.kind == "Deployment":
        return [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": w.name},
                "spec": {**spec, "paused": True},
            }
        ]
    sts = {**spec, "serviceName": w.name, "updateStrategy": {"type": "OnDelete"}, "podManagementPolicy": "Parallel"}
    return [{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": w.name}, "spec": sts}]


def replica_set(w: Workload, deployment_uid: str) -> dict[str, Any]:
    t = template(w)
    t["metadata"]["labels"]["pod-template-hash"] = "5d8f7c"
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{w.name}-5d8f7c",
            "labels": t["metadata"]["labels"],
            "ownerReferences": [_ref("Deployment", w.name, deployment_uid)],
        },
        "spec": {
            "replicas": w.replicas,
            "selector": {"matchLabels": {"app": w.name, "pod-template-hash": "5d8f7c"}},
            "template": t,
        },
    }


def _ref(kind: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


@dataclass
class Nodes:
    """The node names by class, for placing pods."""

    high: list[str] = field(default_factory=list)
    low: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)


def bound_pod(w: Workload, nodes: Nodes, rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """A pod of the workload (its metadata and spec, unnamed), dressed as its style says and bound:
    injected ones mostly on net=high nodes, a third of the missing ones stranded on net=low nodes,
    the others anywhere."""
    everywhere = nodes.high + nodes.low + nodes.other
    t = template(w)
    meta: dict[str, Any] = t["metadata"]
    spec: dict[str, Any] = t["spec"]
    if w.style == "injected":
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": TERMS}}
        meta["annotations"][INJECTED_ANNOTATION] = RULE
        where = rng.choice(nodes.high if rng.random() < 0.8 else everywhere)
    elif w.style == "missing":
        where = rng.choice(nodes.low if rng.random() < 1 / 3 else everywhere)
    else:
        where = rng.choice(everywhere)
    spec["nodeName"] = where
    if not meta["annotations"]:
        del meta["annotations"]
    return meta, spec


def pod_objects(w: Workload, owner_uid: str, nodes: Nodes, rng: random.Random) -> Iterator[dict[str, Any]]:
    """The workload's pods (`bound_pod`), named and owned as its controller names and owns them."""
    for i in range(w.replicas):
        meta, spec = bound_pod(w, nodes, rng)
        if w.kind == "Deployment":
            name = f"{w.name}-5d8f7c-{i:05x}"
            meta["labels"]["pod-template-hash"] = "5d8f7c"
            meta["ownerReferences"] = [_ref("ReplicaSet", f"{w.name}-5d8f7c", owner_uid)]
        else:
            name = f"{w.name}-{i}"
            meta["labels"].update({"statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": str(i)})
            meta["ownerReferences"] = [_ref("StatefulSet", w.name, owner_uid)]
            spec.update(hostname=name, subdomain=w.name)
        meta["name"] = name
        yield {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


RUNNING_STATUS = {
    "status": {
        "phase": "Running",
        "hostIP": "192.0.2.1",  # TEST-NET-1: documentation only, never routed
        "conditions": [
            {"type": kind, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ],
    }
}


# --- loading, with bounded concurrency ---------------------------------------------------------------


class Client:
    """Keep-alive HTTPS connections to the API server as the admin, one per thread."""

    def __init__(self, cluster: Cluster) -> None:
        self.port = cluster.ports["kube-apiserver"]
        self.context = cluster.ssl_context()
        self.local = threading.local()

    def send(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        for attempt in range(3):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = http.client.HTTPSConnection(
                    LOOPBACK, self.port, context=self.context, timeout=60
                )
            try:
                headers = {"Accept": "application/json", "Content-Type": content_type}
                conn.request(method, path, body=data, headers=headers)
                response = conn.getresponse()
                raw = response.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
                continue
            if response.status == 429:  # API Priority and Fairness: back off as it says
                time.sleep(float(response.getheader("Retry-After") or 1))
                continue
            return response.status, raw
        return 429, b""


def bounded(jobs: Iterable[Callable[[], object]], concurrency: int) -> None:
    """Run `jobs` on `concurrency` threads, at most 4 x `concurrency` waiting: the generator is
    consumed as the threads free up, never all at once. The first failure stops everything."""
    waiting: queue.Queue[Callable[[], object] | None] = queue.Queue(maxsize=4 * concurrency)
    failures: list[BaseException] = []

    def work() -> None:
        while (job := waiting.get()) is not None:
            if not failures:
                try:
                    job()
                except BaseException as err:  # reported by the caller's thread
                    failures.append(err)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for job in jobs:
        if failures:
            break
        waiting.put(job)
    for _ in threads:
        waiting.put(None)
    for t in threads:
        t.join()
    if failures:
        raise failures[0]


def create(client: Client, path: str, obj: dict[str, Any]) -> dict[str, Any]:
    status, raw = client.send("POST", path, obj)
    if status not in (200, 201):
        raise SystemExit(f"POST {path} {obj['metadata'].get('name')}: {status} {raw[:300]!r}")
    created: dict[str, Any] = json.loads(raw)
    return created


@dataclass
class Loaded:
    workloads: int
    seconds: float
    load_average: float


@dataclass
class World:
    """What `seed` makes of `nodes` and `pods`: the same every time, so a later run can measure a
    world an earlier one loaded (--loaded)."""

    node_objs: list[dict[str, Any]]
    names: Nodes
    plan: list[Workload]
    seeds: dict[str, float]

    @classmethod
    def of(cls, nodes: int, pods: int, seed: int) -> World:
        rng = random.Random(seed)
        node_objs = [node_object(i, rng) for i in range(nodes)]
        names = Nodes()
        for n in node_objs:
            net = n["metadata"]["labels"].get("net")
            (names.high if net == "high" else names.low if net == "low" else names.other).append(n["metadata"]["name"])
        plan = workloads(pods, rng)
        return cls(node_objs, names, plan, {w.name: rng.random() for w in plan})

    def explain_pod(self) -> dict[str, Any]:
        """A new pod of the first injected workload, for explain."""
        injected = next(w for w in self.plan if w.style == "injected")
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "realscale-explained", "namespace": injected.namespace, "labels": labels_of(injected)},
            "spec": template(injected)["spec"],
        }


def load(cluster: Cluster, world: World, concurrency: int) -> Loaded:
    """Create the world (see the module docstring) in the namespaces team-000...; the controller
    manager must be stopped."""
    client = Client(cluster)
    started = time.perf_counter()
    names, plan, seeds = world.names, world.plan, world.seeds
    bounded((partial(create, client, "/api/v1/nodes", n) for n in world.node_objs), concurrency)
    uids: dict[str, str] = {}

    def owner(w: Workload) -> None:
        for obj in owner_objects(w):
            plural = obj["kind"].lower() + "s"
            made = create(client, f"/apis/apps/v1/namespaces/{w.namespace}/{plural}", obj)
            uid = made["metadata"]["uid"]
            if w.kind == "Deployment":
                rs = create(client, f"/apis/apps/v1/namespaces/{w.namespace}/replicasets", replica_set(w, uid))
                uid = rs["metadata"]["uid"]
            uids[w.name] = uid

    bounded((partial(owner, w) for w in plan), concurrency)

    def one_pod(pod: dict[str, Any]) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        create(client, f"/api/v1/namespaces/{ns}/pods", pod)
        if not QOS.items() <= pod["metadata"]["labels"].items():
            return  # only the latency-sensitive workloads' readiness is read (rebalance's owners)
        path = f"/api/v1/namespaces/{ns}/pods/{name}/status"
        status, raw = client.send("PATCH", path, RUNNING_STATUS, "application/merge-patch+json")
        if status != 200:
            raise SystemExit(f"PATCH {path}: {status} {raw[:300]!r}")

    def all_pods() -> Iterator[Callable[[], object]]:
        for w in plan:
            for pod in pod_objects(w, uids[w.name], names, random.Random(seeds[w.name])):
                pod["metadata"]["namespace"] = w.namespace
                yield partial(one_pod, pod)

    bounded(all_pods(), concurrency)
    seconds = time.perf_counter() - started
    return Loaded(len(plan), seconds, os.getloadavg()[0])


# --- measuring ------------------------------------------------------------------------------------


def requests_served(cluster: Cluster) -> dict[str, float]:
    """The API server's own count of GET and LIST requests, by verb and resource."""
    status, raw = scaleup.cluster_raw(cluster, "/metrics")
    counts: dict[str, float] = {}
    for line in raw.decode().splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(part.split("=", 1) for part in line[line.index("{") + 1 : line.index("}")].split(","))
        verb, resource = labels.get("verb", "").strip('"'), labels.get("resource", "").strip('"')
        if verb in ("GET", "LIST") and resource and resource != "leases":
            key = f"{verb} {resource}"
            counts[key] = counts.get(key, 0) + float(line.rsplit(" ", 1)[1])
    return counts


@dataclass
class Run:
    what: str
    seconds: float
    cpu_seconds: float
    max_rss_mib: float
    requests: dict[str, float]
    load_average: float
    exit_code: int
    summary: dict[str, Any]

    @property
    def total_requests(self) -> int:
        return int(sum(self.requests.values()))


def measure_child(cluster: Cluster, what: str, argv: list[str]) -> Run:
    """`argv` in a child of a fresh interpreter (`--measure-child`), so RUSAGE_CHILDREN is its own."""
    before = requests_served(cluster)
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.realscale", "--measure-child", json.dumps(argv)],
        capture_output=True,
        timeout=900,
        cwd=REPO,
    )
    after = requests_served(cluster)
    if done.returncode != 0:
        raise SystemExit(f"{what}: the measuring child failed: {done.stderr.decode()[-3000:]}")
    result = json.loads(done.stdout)
    if result["exit_code"] not in (0, 3):
        raise SystemExit(f"{what} exited {result['exit_code']}: {result['stderr'][-3000:]}")
    requests = {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0) > 0}
    return Run(
        what,
        result["seconds"],
        result["cpu_seconds"],
        result["max_rss_mib"],
        requests,
        os.getloadavg()[0],
        result["exit_code"],
        summarise(what, result["stdout"]),
    )


def summarise(what: str, stdout: str) -> dict[str, Any]:
    """What the run found, to check it read the world (not only how long it took)."""
    out: dict[str, Any] = json.loads(stdout)
    if what == "floor":
        return out
    if what == "status":
        return {"selected": out["pods"]["selected"], "missing": out["pods"]["missing"], "movable": out.get("movable")}
    if what == "rebalance":
        return {"candidates": len(out.get("candidates") or []), "movable": len(out.get("movable") or [])}
    return {"predicted": out.get("predicted"), "nodes": len(out.get("nodes") or out.get("ranking") or [])}


def child(argv: list[str]) -> None:
    """The measuring child: run `argv`, print wall, CPU, peak RSS and its output as JSON."""
    import resource

    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=REPO)
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "seconds": seconds,
                "cpu_seconds": usage.ru_utime + usage.ru_stime,
                "max_rss_mib": usage.ru_maxrss / 1024,
                "exit_code": done.returncode,
                "stdout": done.stdout,
                "stderr": done.stderr,
            }
        )
    )


def floor(kubeconfig_dir: str, port: int) -> None:
    """The floor: every pod, `limit=500` pages, stdlib json; prints how many and how many pages."""
    import ssl

    pki = Path(kubeconfig_dir) / "pki"
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    conn = http.client.HTTPSConnection(LOOPBACK, port, context=context, timeout=60)
    token, pods, pages = "", 0, 0
    while True:
        query = f"limit={PAGE}" + (f"&continue={token}" if token else "")
        conn.request("GET", f"/api/v1/pods?{query}", headers={"Accept": "application/json"})
        page = json.loads(conn.getresponse().read())
        pods += len(page["items"])
        pages += 1
        token = page["metadata"].get("continue") or ""
        if not token:
            break
    print(json.dumps({"pods": pods, "pages": pages}))


def commands(cluster: Cluster, pod_file: Path) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "webhook"]
    kubeconfig = ["--kubeconfig", str(cluster.kubeconfig)]
    return {
        "floor": [
            sys.executable,
            "-m",
            "benchmarks.realscale",
            "--floor",
            str(cluster.directory),
            str(cluster.ports["kube-apiserver"]),
        ],
        "status": [*cli, "status", *kubeconfig, "-A", "-o", "json"],
        "rebalance": [*cli, "rebalance", *kubeconfig, "-o", "json"],
        "explain": [*cli, "explain", *kubeconfig, "--pod", str(pod_file), "-o", "json"],
    }


def expiry(cluster: Cluster) -> dict[str, Any]:
    """The CLI's reader on this world when etcd is compacted after its first page of every bound
    pod: the continue token expires (410), and the read starts over from the first page, once."""
    from webhook import cluster as kube

    attempts: list[int] = []

    def read(reader: kube.Reader) -> int:
        attempts.append(0)
        for _ in reader.list("Pod", field_selector=kube.ASSIGNED_NOT_FINISHED):
            attempts[-1] += 1
            if len(attempts) == 1 and attempts[0] == kube.PAGE_SIZE:
                cluster.compact_etcd()
        return attempts[-1]

    with kube.Reader(kube.connect(str(cluster.kubeconfig))) as reader:
        pods = reader.restarting(lambda: read(reader))
        return {"pods": pods, "restarts": reader.restarts, "requests": reader.requests, "first_read": attempts[0]}


# --- the run --------------------------------------------------------------------------------------


@contextmanager
def a_cluster() -> Iterator[Cluster]:
    named = os.environ.get(controlplane.CLUSTER_DIR_ENV)
    if named and (Path(named) / controlplane.STATE_FILE).exists():
        yield controlplane.attach(Path(named))
        return
    built = gobuild.build()
    with tempfile.TemporaryDirectory(prefix="netqos-realscale-") as directory:
        with controlplane.running(Path(directory) / "cluster", built.bin_dir) as cluster:
            yield cluster


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """The process stopped (SIGSTOP) while the block runs, continued after."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench --realscale", description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--fraction", type=float, default=1.0, help="of 5,000 nodes and 150,000 pods (default 1)")
    size.add_argument("--smoke", action="store_true", help="1/50: 100 nodes, 3,000 pods")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each measured command (default 1)")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight while loading (default 16)")
    parser.add_argument("--replicas", type=int, help="of the scale-up (default 10,000 x the fraction; 0: no scale-up)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--loaded",
        action="store_true",
        help="measure only: $NETQOS_CLUSTER_DIR already holds the world (an earlier run, same --fraction and --seed)",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--record", action="store_true", help="also write the table to docs/evidence/realscale-DATE.md")
    parser.add_argument("--measure-child", help=argparse.SUPPRESS)
    parser.add_argument("--floor", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure_child:
        child(json.loads(args.measure_child))
        return 0
    if args.floor:
        floor(args.floor[0], int(args.floor[1]))
        return 0
    fraction = SMOKE_FRACTION if args.smoke else args.fraction
    nodes, pods = round(FULL_NODES * fraction), round(FULL_PODS * fraction)
    results: dict[str, Any] = {"nodes": nodes, "pods": pods}
    replicas = args.replicas if args.replicas is not None else round(FULL_REPLICAS * fraction)
    if args.loaded and not os.environ.get(controlplane.CLUSTER_DIR_ENV):
        parser.error(f"--loaded measures the world of a running cluster: set ${controlplane.CLUSTER_DIR_ENV}")
    world = World.of(nodes, pods, args.seed)
    load_before, began = evidence.load_average(), time.perf_counter()
    with a_cluster() as cluster:
        if replicas and not args.loaded:
            print(f"scaling a Deployment 0 -> {replicas} under each installation...", file=sys.stderr)
            results["scaleup"] = [asdict(r) for r in scaleup.run_all(cluster, replicas)]
        if not args.loaded:
            for i in range(NAMESPACES):  # while the controller manager runs: it makes their service accounts
                cluster.create_namespace(f"team-{i:03}")
        with stopped(cluster.pids["kube-controller-manager"]):
            results["load"] = {"seconds": None, "workloads": len(world.plan), "load_average": None}
            if not args.loaded:
                print(f"loading {nodes} nodes and {pods} pods (concurrency {args.concurrency})...", file=sys.stderr)
                loaded = load(cluster, world, args.concurrency)
                results["load"] |= {"seconds": loaded.seconds, "load_average": loaded.load_average}
            results["load"] |= {
                "apiserver_rss_mib": procfs.memory_mib(cluster.pids["kube-apiserver"]),
                "etcd_rss_mib": procfs.memory_mib(cluster.pids["etcd"]),
            }
            print(json.dumps(results["load"]), file=sys.stderr)
            with tempfile.TemporaryDirectory() as directory:
                pod_file = Path(directory) / "pod.json"
                pod_file.write_text(json.dumps(world.explain_pod()))
                argvs = commands(cluster, pod_file)
                runs: list[Run] = []
                for _ in range(args.repeat):
                    for what in MEASURED:
                        runs.append(measure_child(cluster, what, argvs[what]))
                        print(json.dumps(asdict(runs[-1])), file=sys.stderr)
            results["expiry"] = expiry(cluster)
            print(json.dumps(results["expiry"]), file=sys.stderr)
            results["runs"] = [asdict(r) | {"total_requests": r.total_requests} for r in runs]
            results["apiserver_rss_mib"] = procfs.memory_mib(cluster.pids["kube-apiserver"])
            results["etcd_rss_mib"] = procfs.memory_mib(cluster.pids["etcd"])
    text = table(results)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    if args.record:
        command = " ".join(["scripts/bench", "--realscale", *(argv if argv is not None else sys.argv[1:])])
        title = f"The read-only commands on the real API server, {nodes} nodes and {pods} pods"
        path = evidence.write(
            "realscale", title, command, text, (load_before, evidence.load_average()), time.perf_counter() - began
        )
        print(f"recorded: {path.relative_to(evidence.REPO)}", file=sys.stderr)
    return 0


def budget(what: str, wall: float, floor_s: float, rss_mib: float) -> str:
    """The command's budget and whether the run kept it: max(30 s, 1.5x the floor) wall for status
    and rebalance, max(10 s, 1.5x the floor) for explain, and 1 GiB peak RSS."""
    if what == "floor":
        return ""
    limit = max(EXPLAIN_TARGET_SECONDS if what == "explain" else TARGET_SECONDS, 1.5 * floor_s)
    kept = wall <= limit and rss_mib <= TARGET_RSS_MIB
    return f"{limit:.0f} s, 1 GiB: {'kept' if kept else 'missed'}"


def table(results: dict[str, Any]) -> str:
    load = results["load"]
    loaded = (
        "loaded by an earlier run"
        if load["seconds"] is None
        else f"loaded in {load['seconds']:.0f} s (load average {load['load_average']:.1f})"
    )
    lines = [
        f"world: {results['nodes']} nodes, {results['pods']} pods, {load['workloads']} workloads; {loaded}; "
        f"kube-apiserver RSS {results['apiserver_rss_mib']:.0f} MiB, etcd RSS {results['etcd_rss_mib']:.0f} MiB",
        "",
        "| command | wall s (median) | CPU s | peak RSS MiB | requests (GET+LIST) | load avg | x floor | budget |",
        "|---|---|---|---|---|---|---|---|",
    ]
    by: dict[str, list[dict[str, Any]]] = {}
    for r in results["runs"]:
        by.setdefault(r["what"], []).append(r)
    floor_s = statistics.median(r["seconds"] for r in by["floor"])
    for what in MEASURED:
        rs = by[what]
        wall = statistics.median(r["seconds"] for r in rs)
        lines.append(
            f"| {what} | {wall:.1f} | {statistics.median(r['cpu_seconds'] for r in rs):.1f} | "
            f"{max(r['max_rss_mib'] for r in rs):.0f} | {rs[0]['total_requests']} | "
            f"{statistics.median(r['load_average'] for r in rs):.1f} | {wall / floor_s:.2f} | "
            f"{budget(what, wall, floor_s, max(r['max_rss_mib'] for r in rs))} |"
        )
    if results.get("scaleup"):
        lines += ["", scaleup.table([scaleup.ScaleUp(**r) for r in results["scaleup"]])]
    e = results["expiry"]
    lines += [
        "",
        f"410 Expired: etcd compacted after the first page ({e['first_read']} pods) of every bound pod; "
        f"read again from the first page ({e['restarts']} restart): {e['pods']} pods in {e['requests']} requests",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
