"""`explain` against the real kube-scheduler: random clusters on the real control plane of
`scripts/cluster` (harness.controlplane), a pod created through the webhook and bound by
the real scheduler, and `netqos-webhook explain --kubeconfig` asked beforehand where it goes.

    python -m benchmarks.explain_real [--clusters N] [--seed S] [--max-nodes M] [--image-volumes] [--json]
    scripts/fidelity-real --clusters 100          (the same, with the environment set up)

For each cluster a seeded generator draws 2 to M nodes (Node objects whose status it writes:
`net` high / low / another value / no label, allocatable CPU, memory and pod slots, NoSchedule and
PreferNoSchedule taints, images already pulled with their sizes) and pods already bound to them
with their requests (some with none, counted by the scheduler's non-zero defaults; some nodes
full), then one pod: latency-sensitive or ordinary, random requests, tolerations and image; the
pod of every other cluster prefers nodes of its own (preferred node affinity on the nodes' zone,
`disk=ssd` and hostname labels: several terms at weights 1-100, zones that exclude each other), so
the webhook scales the table to its terms (docs/scheduling.md, "The pod's own node affinity"). Then:

1. `explain --pod FILE --kubeconfig K -o json` reads the cluster: `predicted` (the stock
   scheduler, the pod after the webhook) and `netqos_predicted` (the NetQoS profile, the pod as
   written), each the set of best-total nodes (ties kept);
2. the pod is created through the API server, which calls the registered `netqos-webhook serve`;
   the real scheduler (default profile) binds it: the node must be in `predicted`;
3. it is deleted, and the same pod is created again with `schedulerName: netqos-scheduler` and the
   opt-out annotation (so the webhook leaves it as written, and the NetQoS plugin scores it): the
   node the `netqos-scheduler` profile binds it to must be in `netqos_predicted`.

With --image-volumes the pod of one cluster in two also mounts an image volume (`spec.volumes[].image`)
of one of the images the nodes hold, which ImageLocality ignores before 1.36, sums from 1.36 and
counts in its scale from 1.37; it is drawn apart from the rest, so a seed gives the same clusters
with or without it. Kubernetes 1.34 (ImageVolume off) is refused with the flag.

Nodes get names unique to their cluster, so the scheduler's cache never mixes two clusters. Every
miss is printed with explain's ranking. Results: docs/scheduling.md ("explain against the real
scheduler").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness import controlplane, gobuild
from harness.controlplane import NETQOS_SCHEDULER, Cluster
from harness.server import Server, start_server
from webhook.names import INJECTED_ANNOTATION, OPT_OUT_ANNOTATION

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "explain-real"
GI = 1024**3
MB = 1000**2
IMAGES = tuple(f"registry.example.com/app-{i}:1.{i}" for i in range(8))
NET_CLASSES = ("high", "low", "other", "unlabelled")
CPU_SIZES = (2, 4, 8, 16)  # cores
MEMORY_SIZES = (4, 8, 16, 32, 64)  # GiB
REQUEST_CPU = (0, 100, 250, 500, 1000, 2000)  # millicores; 0: no cpu request
REQUEST_MEMORY = (0, 128, 512, 1024, 2048, 4096)  # MiB; 0: no memory request
ZONES = ("a", "b", "c")
ZONE_KEY = "topology.kubernetes.io/zone"
UNBOUND_WAIT = 10  # seconds a pod explain finds no node for must stay unbound
EXPLAIN_TIMEOUT = 300  # seconds for one `explain` run: a few on a quiet machine, minutes on a shared, loaded one
APP = {"app": "web"}  # the probe's app: the Service of a `behind_service` case selects it
PREFER_NO_SCHEDULE = {"key": "example.com/maintenance", "value": "soon", "effect": "PreferNoSchedule"}
NO_SCHEDULE = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@dataclass(frozen=True)
class Case:
    index: int
    nodes: list[dict[str, Any]]
    bound: list[dict[str, Any]]
    pod: dict[str, Any]
    service: dict[str, Any] | None = None  # a Service selecting the probe and its siblings
    kind: str = "bare"  # "bare", "behind a Service" or "anti-affinity"


@dataclass
class Result:
    index: int
    nodes: int
    latency_sensitive: bool
    own_preferences: bool  # the pod has preferred node affinity of its own
    bound: str  # the node the default profile bound the mutated pod to
    predicted: list[str]
    netqos_bound: str  # the node the netqos-scheduler profile bound the pod as written to
    netqos_predicted: list[str]
    explain: dict[str, Any] = field(repr=False)

    kind: str = "bare"

    @property
    def agrees(self) -> bool:
        return self.bound in self.predicted if self.bound else not self.predicted

    @property
    def netqos_agrees(self) -> bool:
        return self.netqos_bound in self.netqos_predicted if self.netqos_bound else not self.netqos_predicted


# --- the random clusters ---------------------------------------------------------------------------


def generate(rng: random.Random, index: int, max_nodes: int, image_volumes: bool = False) -> Case:
    """A random cluster; one case in three has the probe behind a Service with siblings already on
    the nodes (PodTopologySpread's default constraints spread it), one in three pods with pod
    anti-affinity (the probe's own, required or preferred, and siblings' against it)."""
    kind = ("bare", "behind a Service", "anti-affinity")[index % 3]
    count = rng.randint(2, max_nodes)
    shares = [rng.random() ** 2 for _ in NET_CLASSES]  # squared: often one class dominates
    prefer_tainted, hard_tainted = rng.choice((0.0, 0.1, 0.3)), rng.choice((0.0, 0.05, 0.2))
    # One size per image, as a registry serves it: the scheduler's cache keeps one size per image
    # name for the whole cluster (the first node's), so sizes differing by node are not a case.
    sizes = {image: rng.randint(20, 900) * MB for image in IMAGES}
    nodes, bound = [], []
    for i in range(count):
        name = f"c{index}-node-{i:02}"
        labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
        labels[ZONE_KEY] = rng.choice(ZONES)
        if rng.random() < 0.5:
            labels["disk"] = "ssd"
        klass = rng.choices(NET_CLASSES, shares)[0]
        if klass != "unlabelled":
            labels["net"] = klass if klass != "other" else rng.choice(("medium", "10g"))
        taints = []
        if rng.random() < prefer_tainted:
            taints.append(PREFER_NO_SCHEDULE)
        if rng.random() < hard_tainted:
            taints.append(NO_SCHEDULE)
        cpu, memory, slots = rng.choice(CPU_SIZES), rng.choice(MEMORY_SIZES), rng.choice((110, 110, 110, 8))
        images = [{"names": [image], "sizeBytes": sizes[image]} for image in IMAGES if rng.random() < 0.2]
        allocatable = {"cpu": str(cpu), "memory": f"{memory}Gi", "pods": str(slots)}
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "spec": {"taints": taints} if taints else {},
                "status": {
                    "allocatable": allocatable,
                    "capacity": allocatable,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                    "images": images,
                },
            }
        )
        bound += _load(rng, name, cpu * 1000, memory * 1024, slots)
    pod = _pod(rng)
    if index % 2:
        names = [n["metadata"]["name"] for n in nodes]
        pod["spec"]["affinity"] = {
            "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": _own(rng, names)}
        }
    service = None
    if kind != "bare":
        bound += _siblings(rng, nodes, anti=kind == "anti-affinity")
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {"selector": dict(APP), "ports": [{"port": 80}]},
        }
    if kind == "anti-affinity":
        _anti_affinity(rng, pod)
    if image_volumes:
        _image_volume(random.Random(f"{index}-{count}-{pod['spec']['containers'][0]['image']}"), pod)
    return Case(index, nodes, bound, pod, service, kind)


def _image_volume(rng: random.Random, pod: dict[str, Any]) -> None:
    """One pod in two mounts an image volume of one of the images (its own generator: the
    cluster's draws stay those of the seed)."""
    if rng.random() < 0.5:
        image = rng.choice(IMAGES)
        pod["spec"]["volumes"] = [{"name": "data", "image": {"reference": image, "pullPolicy": "IfNotPresent"}}]


def _own(rng: random.Random, names: list[str]) -> list[dict[str, Any]]:
    """Preferred terms of the pod's own: one to four, on zones (which exclude each other), SSDs,
    a hostname, or a zone and an SSD together, at weights from 1 to 100."""
    choices = [
        [(ZONE_KEY, "In", [rng.choice(ZONES)])],
        [(ZONE_KEY, "In", [rng.choice(ZONES)])],
        [(ZONE_KEY, "NotIn", [rng.choice(ZONES)])],
        [("disk", "In", ["ssd"])],
        [("kubernetes.io/hostname", "In", [rng.choice(names)])],
        [(ZONE_KEY, "In", [rng.choice(ZONES)]), ("disk", "In", ["ssd"])],
    ]
    terms = []
    for expressions in rng.sample(choices, rng.randint(1, 4)):
        exprs = [{"key": k, "operator": o, "values": v} for k, o, v in expressions]
        terms.append({"weight": rng.randint(1, 100), "preference": {"matchExpressions": exprs}})
    return terms


def _siblings(rng: random.Random, nodes: list[dict[str, Any]], anti: bool) -> list[dict[str, Any]]:
    """Pods of the probe's app already on a few nodes, some nodes holding several; with `anti`,
    some carry required anti-affinity against their app on their host."""
    siblings = []
    for i in range(rng.randint(1, max(2, len(nodes) // 2))):
        node = rng.choice(nodes)["metadata"]["name"]
        spec: dict[str, Any] = {
            "nodeName": node,
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {}}}],
            "tolerations": [{"operator": "Exists"}],
        }
        if anti and rng.random() < 0.3:
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term()]}}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"web-{i}", "labels": dict(APP)}, "spec": spec}
        siblings.append(pod)
    return siblings


def _term(key: str = "kubernetes.io/hostname") -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": dict(APP)}, "topologyKey": key}


def _anti_affinity(rng: random.Random, pod: dict[str, Any]) -> None:
    """The probe's own anti-affinity against its siblings: required on the host, or preferred on
    the host or the zone."""
    if rng.random() < 0.5:
        anti: dict[str, Any] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term()]}
    else:
        key = rng.choice(("kubernetes.io/hostname", ZONE_KEY))
        weighted = {"weight": rng.choice((10, 50, 100)), "podAffinityTerm": _term(key)}
        anti = {"preferredDuringSchedulingIgnoredDuringExecution": [weighted]}
    pod["spec"].setdefault("affinity", {})["podAntiAffinity"] = anti


def _load(rng: random.Random, node: str, cpu: int, memory: int, slots: int) -> list[dict[str, Any]]:
    """Pods already on `node`: up to about its size, a few over (a full node)."""
    count = rng.randint(0, min(slots, 5))
    if rng.random() < 0.05:
        count = slots if slots <= 8 else count
    target = rng.random() * 1.1
    pods = []
    for i in range(count):
        requests = {}
        if rng.random() < 0.8:
            requests["cpu"] = f"{int(target * cpu / max(count, 1))}m"
        if rng.random() < 0.8:
            requests["memory"] = f"{int(target * memory / max(count, 1))}Mi"
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{node}-running-{i}", "labels": {"app": "existing"}},
                "spec": {
                    "nodeName": node,
                    "containers": [
                        {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": requests}}
                    ],
                    "tolerations": [{"operator": "Exists"}],
                },
            }
        )
    return pods


def _pod(rng: random.Random) -> dict[str, Any]:
    labels = {"app": "web"}
    if rng.random() < 0.7:
        labels["qos"] = "latency-sensitive"
    requests = {}
    cpu, memory = rng.choice(REQUEST_CPU), rng.choice(REQUEST_MEMORY)
    if cpu:
        requests["cpu"] = f"{cpu}m"
    if memory:
        requests["memory"] = f"{memory}Mi"
    container: dict[str, Any] = {"name": "app", "image": rng.choice(IMAGES), "resources": {"requests": requests}}
    spec: dict[str, Any] = {"containers": [container]}
    if rng.random() < 0.2:
        spec["tolerations"] = [{"key": "example.com/maintenance", "operator": "Exists"}]
    if rng.random() < 0.1:
        spec.setdefault("tolerations", []).append({"key": "dedicated", "operator": "Equal", "value": "gpu"})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": NAMESPACE, "labels": labels},
        "spec": spec,
    }


# --- one case on the real cluster ------------------------------------------------------------------


def run_case(cluster: Cluster, case: Case, workdir: Path) -> Result:
    """Set the cluster up as `case` says, ask explain, then let the real scheduler bind the pod."""
    _reset(cluster)
    _settle(cluster, 0, 0)
    if case.service is not None:
        cluster.create(case.service, NAMESPACE)
    for node in case.nodes:
        cluster.create(node)
    for pod in case.bound:
        cluster.create(pod, NAMESPACE)
    _settle(cluster, len(case.nodes), len(case.bound))
    path = workdir / f"pod-{case.index}.yaml"
    path.write_text(yaml.safe_dump(case.pod))
    explained = _explain(cluster, path)

    created = cluster.create(case.pod, NAMESPACE)
    assert created["metadata"].get("annotations", {}).get(INJECTED_ANNOTATION) or not _selected(case.pod), (
        "the webhook did not mutate the latency-sensitive pod: is it registered?"
    )
    bound = _bound(cluster, "probe", explained["predicted"])
    _delete_pod(cluster, "probe")
    _settle(cluster, len(case.nodes), len(case.bound))

    written = json.loads(json.dumps(case.pod))
    written["metadata"]["name"] = "probe-netqos"
    written["metadata"]["annotations"] = {OPT_OUT_ANNOTATION: "false"}  # the pod as written
    written["spec"]["schedulerName"] = NETQOS_SCHEDULER
    cluster.create(written, NAMESPACE)
    netqos_bound = _bound(cluster, "probe-netqos", explained["netqos_predicted"])
    return Result(
        case.index,
        len(case.nodes),
        _selected(case.pod),
        bool((case.pod["spec"].get("affinity") or {}).get("nodeAffinity")),
        bound,
        list(explained["predicted"]),
        netqos_bound,
        list(explained["netqos_predicted"]),
        explained,
        case.kind,
    )


def _bound(cluster: Cluster, name: str, predicted: list[str]) -> str:
    """The node the scheduler binds the pod to; when explain predicts no feasible node, "" if the
    pod stays unbound for UNBOUND_WAIT seconds (the scheduler leaves it Pending too)."""
    if predicted:
        return cluster.wait_bound(NAMESPACE, name)
    deadline = time.monotonic() + UNBOUND_WAIT
    while time.monotonic() < deadline:
        node = ((cluster.pod(NAMESPACE, name) or {}).get("spec") or {}).get("nodeName")
        if node:
            return str(node)
        time.sleep(0.2)
    return ""


def _selected(pod: dict[str, Any]) -> bool:
    return bool(pod["metadata"]["labels"].get("qos") == "latency-sensitive")


def _reset(cluster: Cluster) -> None:
    cluster.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods", {"gracePeriodSeconds": 0})
    cluster.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/services/web")
    cluster.delete_nodes()
    if cluster.get(f"/api/v1/namespaces/{NAMESPACE}") is None:
        cluster.create_namespace(NAMESPACE)


def _settle(cluster: Cluster, nodes: int, pods: int) -> None:
    """Until the scheduler's cache holds exactly the case's nodes and pods (all the cluster's bound
    pods are the case's): its informers lag behind the API server, and a node left from the
    previous case would change the scores (ImageLocality counts every node)."""
    cluster.wait_scheduler_cache(nodes, pods)


def _delete_pod(cluster: Cluster, name: str, timeout: float = 30) -> None:
    cluster.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", {"gracePeriodSeconds": 0})
    deadline = time.monotonic() + timeout
    while cluster.pod(NAMESPACE, name) is not None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"pod {name} still there {timeout:.0f} s after its deletion")
        time.sleep(0.05)


def _explain(cluster: Cluster, path: Path) -> dict[str, Any]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "explain",
            "--pod",
            str(path),
            "--kubeconfig",
            str(cluster.kubeconfig),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=EXPLAIN_TIMEOUT,
        cwd=REPO,
    )
    if result.returncode != 0:
        raise RuntimeError(f"explain exited {result.returncode}: {result.stderr}")
    report: dict[str, Any] = json.loads(result.stdout)
    return report


# --- the run ---------------------------------------------------------------------------------------


@contextmanager
def environment(workdir: Path) -> Iterator[Cluster]:
    """The cluster named by $NETQOS_CLUSTER_DIR, or one of our own; with a webhook registered."""
    with ExitStack() as stack:
        named = os.environ.get(controlplane.CLUSTER_DIR_ENV)
        if named and (Path(named) / controlplane.STATE_FILE).exists():
            cluster = controlplane.attach(Path(named))
        else:
            built = gobuild.build()
            cluster = stack.enter_context(controlplane.running(workdir / "cluster", built.bin_dir))
        server = stack.enter_context(start_server(workdir / "webhook"))
        register(cluster, server)
        try:
            yield cluster
        finally:
            _reset(cluster)
            cluster.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")


def register(cluster: Cluster, server: Server) -> None:
    url = f"https://127.0.0.1:{server.port}/mutate"
    subprocess.run(
        [sys.executable, "-m", "webhook", "register", "--url", url, "--certs", str(server.certs.directory)],
        check=True,
        capture_output=True,
        timeout=120,
        env={**os.environ, **cluster.env()},
        cwd=REPO,
    )
    cluster.wait_webhook(active=True)


def describe_miss(result: Result, which: str) -> str:
    """A miss, with explain's ranking (its totals under both profiles) beside the bound node."""
    bound, predicted = (
        (result.bound, result.predicted) if which == "stock" else (result.netqos_bound, result.netqos_predicted)
    )
    lines = [
        f"cluster {result.index} ({result.nodes} nodes, {result.kind}): {which} bound {bound}, "
        f"explain predicted {', '.join(predicted)}",
        f"  {'NODE':<16} {'NET':<10} {'FEASIBLE':<8} {'TOTAL':>6} {'NETQOS TOTAL':>12}  REASONS",
    ]
    for node in sorted(result.explain["nodes"], key=lambda n: -(n["total"] or 0)):
        lines.append(
            f"  {node['name']:<16} {str(node['net']):<10} {str(node['feasible']):<8} {str(node['total']):>6} "
            f"{str(node['netqos_total']):>12}  {'; '.join(node['reasons'])}"
        )
    return "\n".join(lines)


def run(
    cluster: Cluster,
    clusters: int,
    seed: int,
    max_nodes: int,
    workdir: Path,
    out: Any = sys.stderr,
    image_volumes: bool = False,
) -> list[Result]:
    rng = random.Random(seed)
    results = []
    for index in range(clusters):
        result = run_case(cluster, generate(rng, index, max_nodes, image_volumes), workdir)
        results.append(result)
        for which, ok in (("stock", result.agrees), ("netqos", result.netqos_agrees)):
            if not ok:
                print(describe_miss(result, which), file=out, flush=True)
    return results


def summary(results: Sequence[Result], seconds: float) -> dict[str, Any]:
    return {
        "clusters": len(results),
        "nodes_min": min(r.nodes for r in results),
        "nodes_max": max(r.nodes for r in results),
        "latency_sensitive": sum(r.latency_sensitive for r in results),
        "own_preferences": sum(r.latency_sensitive and r.own_preferences for r in results),
        # the two real profiles bound the latency-sensitive pod with own preferences alike
        "own_same_node": sum(r.latency_sensitive and r.own_preferences and r.bound == r.netqos_bound for r in results),
        "stock_agree": sum(r.agrees for r in results),
        "netqos_agree": sum(r.netqos_agrees for r in results),
        "by_kind": {
            kind: {
                "clusters": sum(r.kind == kind for r in results),
                "stock_agree": sum(r.agrees for r in results if r.kind == kind),
                "netqos_agree": sum(r.netqos_agrees for r in results if r.kind == kind),
            }
            for kind in sorted({r.kind for r in results})
        },
        "seconds": round(seconds, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/fidelity-real", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-nodes", type=int, default=60)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--image-volumes", action="store_true", help="one pod in two also mounts an image volume (Kubernetes 1.35+)"
    )
    args = parser.parse_args(argv)
    # SIGTERM ends the run like Ctrl-C: the webhook server and a cluster of our own are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="explain-real-") as tmp, environment(Path(tmp)) as cluster:
        if args.image_volumes and cluster.minor == "1.34":
            print("scripts/fidelity-real: --image-volumes needs Kubernetes 1.35 or newer (ImageVolume is off in 1.34)")
            return 2
        results = run(cluster, args.clusters, args.seed, args.max_nodes, Path(tmp), image_volumes=args.image_volumes)
    total = summary(results, time.monotonic() - started)
    if args.json:
        print(json.dumps(total, indent=2))
    else:
        n = total["clusters"]
        print(
            "| clusters | nodes | latency-sensitive pods (with own preferences) | stock: bound node in explain's "
            "prediction | netqos-scheduler: bound node in explain's NetQoS prediction | own preferences: both "
            "profiles bound the same node | time |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        print(
            f"| {n} | {total['nodes_min']}-{total['nodes_max']} | {total['latency_sensitive']} "
            f"({total['own_preferences']}) | {total['stock_agree']}/{n} | {total['netqos_agree']}/{n} | "
            f"{total['own_same_node']}/{total['own_preferences']} | {total['seconds']} s |"
        )
        for kind, counts in total["by_kind"].items():
            k = counts["clusters"]
            print(f"| {kind}: {k} | | | {counts['stock_agree']}/{k} | {counts['netqos_agree']}/{k} | | |")
    return 0 if total["stock_agree"] == total["netqos_agree"] == total["clusters"] else 1


if __name__ == "__main__":
    sys.exit(main())
