"""Fidelity: how often the stock kube-scheduler, fed the affinity the webhook injects, puts a pod
where the NetQoS scheduler would have put it. Measured on random clusters.

    python -m benchmarks.fidelity [--clusters N] [--seed S] [--netqos-weight W] [--json]

A seeded generator draws each cluster: 2-100 nodes; `net` high / low / another value / no label
in shares drawn per cluster; allocatable CPU, memory and pod slots; pods already running with
their requests (some without requests, counted by the scheduler's non-zero defaults), so some
nodes are full; PreferNoSchedule and NoSchedule taints; images already pulled. Then one pod,
latency-sensitive or ordinary, with random requests, tolerations and image. Both predictions
come from `webhook.scheduling.rank`, the code behind `explain`: the stock scheduler's (default
profile, the pod after the policy) and the NetQoS scheduler's (the same profile plus the NetQoS
plugin at weight W, the pod as written). The pod goes through `policy.evaluate`, the decision
`/mutate` sends as its patch.

Agreement on the node: the two sets of best-total nodes are equal (ties kept). Agreement on the
class: the sets of `net` classes of those nodes are equal. Every disagreement is put down to one
cause (`cause`). Results are in docs/scheduling.md, "How often the two agree".
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from webhook.policy import evaluate
from webhook.policy_file import default_policy
from webhook.resources import CPU, MEMORY, NON_ZERO_DEFAULTS, PODS
from webhook.scheduling import (
    BALANCED_ALLOCATION,
    DEFAULT_PROFILE,
    IMAGE_LOCALITY,
    NETQOS,
    NETQOS_NODE_LABEL,
    NODE_AFFINITY,
    NODE_RESOURCES_FIT,
    TAINT_TOLERATION,
    Node,
    NodeUsage,
    Profile,
    Ranking,
    Taint,
    pod_view,
    rank,
)

GI = 1024**3
MB = 1000**2
IMAGES = tuple(f"registry.example.com/app-{i}:1.{i}" for i in range(8))
NET_CLASSES = ("high", "low", "other", "unlabelled")
CPU_SIZES = (2000, 4000, 8000, 16000)  # millicores
MEMORY_SIZES = (4 * GI, 8 * GI, 16 * GI, 32 * GI, 64 * GI)
REQUEST_CPU = (0, 100, 250, 500, 1000, 2000)  # 0: the container names no cpu request
REQUEST_MEMORY = (0, 128 * 2**20, 512 * 2**20, GI, 2 * GI, 4 * GI)
PREFER_NO_SCHEDULE = Taint("example.com/maintenance", "soon", "PreferNoSchedule")
NO_SCHEDULE = Taint("dedicated", "gpu", "NoSchedule")


@dataclass(frozen=True)
class Case:
    nodes: tuple[Node, ...]
    usage: dict[str, NodeUsage]
    pod: dict[str, Any]


@dataclass(frozen=True)
class Outcome:
    latency_sensitive: bool
    agree_node: bool
    agree_class: bool
    cause: str  # "" when the nodes agree


def net_class(labels: dict[str, str] | Any) -> str:
    net = labels.get(NETQOS_NODE_LABEL)
    if net is None:
        return "unlabelled"
    return net if net in ("high", "low") else "other"


def generate(rng: random.Random) -> Case:
    """One random cluster and pod."""
    count = rng.randint(2, 100)
    shares = [rng.random() ** 2 for _ in NET_CLASSES]  # squared: often one class dominates
    prefer_tainted, hard_tainted = rng.choice((0.0, 0.1, 0.3)), rng.choice((0.0, 0.05, 0.2))
    nodes, usage = [], {}
    for i in range(count):
        name = f"node-{i:03}"
        klass = rng.choices(NET_CLASSES, shares)[0]
        labels = {"kubernetes.io/hostname": name}
        if klass != "unlabelled":
            labels[NETQOS_NODE_LABEL] = klass if klass != "other" else rng.choice(("medium", "10g"))
        taints = []
        if rng.random() < prefer_tainted:
            taints.append(PREFER_NO_SCHEDULE)
        if rng.random() < hard_tainted:
            taints.append(NO_SCHEDULE)
        cpu, memory = rng.choice(CPU_SIZES), rng.choice(MEMORY_SIZES)
        slots = rng.choice((110, 110, 110, 16))
        images = {image: rng.randint(20, 900) * MB for image in IMAGES if rng.random() < 0.2}
        nodes.append(Node(name, labels, tuple(taints), False, {CPU: cpu, MEMORY: memory, PODS: slots}, images))
        usage[name] = _load(rng, cpu, memory, slots)
    pod = _pod(rng)
    return Case(tuple(nodes), usage, pod)


def _load(rng: random.Random, cpu: int, memory: int, slots: int) -> NodeUsage:
    """What the pods already on a node request: up to about its size, a few over (full nodes).

    Drawn as totals, as NodeInfo sums them: the pods' requests, and the non-zero requests in
    which each pod without a cpu or memory request counts 100m / 200Mi.
    """
    pods = rng.randint(0, min(slots, 40))
    if rng.random() < 0.05:
        pods = slots  # out of pod slots
    target = rng.random() * 1.1 if pods else 0.0
    requested = {CPU: int(target * cpu * rng.uniform(0.7, 1.0)), MEMORY: int(target * memory * rng.uniform(0.7, 1.0))}
    without = rng.randint(0, pods)  # pods that name no request: the non-zero defaults count them
    non_zero = {name: requested[name] + without * NON_ZERO_DEFAULTS[name] for name in (CPU, MEMORY)}
    return NodeUsage(requested, non_zero, pods)


def _pod(rng: random.Random) -> dict[str, Any]:
    labels = {"app": "web"}
    if rng.random() < 0.7:
        labels["qos"] = "latency-sensitive"
    requests = {}
    cpu, memory = rng.choice(REQUEST_CPU), rng.choice(REQUEST_MEMORY)
    if cpu:
        requests["cpu"] = f"{cpu}m"
    if memory:
        requests["memory"] = str(memory)
    container: dict[str, Any] = {"name": "app", "image": rng.choice(IMAGES), "resources": {"requests": requests}}
    spec: dict[str, Any] = {"containers": [container]}
    if rng.random() < 0.2:
        spec["tolerations"] = [{"key": "example.com/maintenance", "operator": "Exists"}]
    if rng.random() < 0.1:
        spec.setdefault("tolerations", []).append({"key": "dedicated", "operator": "Equal", "value": "gpu"})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels}, "spec": spec}


def compare(case: Case, profile: Profile, netqos_profile: Profile) -> Outcome:
    """Both predictions for one case, and the cause of a disagreement."""
    policy = DEFAULT_POLICY
    before = pod_view(case.pod)
    after = pod_view(evaluate(policy, case.pod).pod)
    stock = rank(after, case.nodes, case.usage, profile)
    netqos = rank(before, case.nodes, case.usage, netqos_profile)
    labels = {n.name: n.labels for n in case.nodes}
    w, q = set(stock.predicted), set(netqos.predicted)
    agree_node = w == q
    agree_class = {net_class(labels[n]) for n in w} == {net_class(labels[n]) for n in q}
    latency = before.labels.get("qos") == "latency-sensitive"
    return Outcome(latency, agree_node, agree_class, "" if agree_node else cause(stock, netqos, labels))


def cause(stock: Ranking, netqos: Ranking, labels: dict[str, Any]) -> str:
    """Why the stock scheduler's best node(s) differ from the NetQoS scheduler's."""
    w, q = set(stock.predicted), set(netqos.predicted)
    if w & q:
        return "tie: the predicted sets overlap (a random pick among equals may still agree)"
    a = min(w)
    b = min(q)
    by_name = {n.name: n for n in stock.nodes}
    nq = {n.name: n for n in netqos.nodes}
    affinity_lead = _weighted(by_name[a], NODE_AFFINITY, stock) - _weighted(by_name[b], NODE_AFFINITY, stock)
    plugin_lead = _weighted(nq[a], NETQOS, netqos) - _weighted(nq[b], NETQOS, netqos)
    if affinity_lead <= 0 or plugin_lead < 0:
        return "the pod's own preferences decide, not the injected terms"
    others = {
        group: sum(_weighted(nq[b], p, netqos) - _weighted(nq[a], p, netqos) for p in plugins)
        for group, plugins in (
            ("resource scores (NodeResourcesFit, BalancedAllocation)", (NODE_RESOURCES_FIT, BALANCED_ALLOCATION)),
            ("a PreferNoSchedule taint (TaintToleration)", (TAINT_TOLERATION,)),
            ("image locality", (IMAGE_LOCALITY,)),
        )
    }
    top = max(others, key=lambda g: others[g])
    high_feasible = any(net_class(labels[n.name]) == "high" for n in stock.feasible)
    if not high_feasible:
        return (
            f"no feasible net=high node, so NodeAffinity normalises the next class up to 100 (x2): "
            f"{top} outweighed the plugin's lead but not the affinity's"
        )
    if plugin_lead == 0:
        return f"{top} decided between nodes the plugin scores alike, the affinity did not"
    return f"{top} outweighed the plugin's lead but not the affinity's"


def _weighted(node: Any, plugin: str, ranking: Ranking) -> int:
    score: int = node.scores.get(plugin, 0) * ranking.weights.get(plugin, 0)
    return score


DEFAULT_POLICY = default_policy()


@dataclass(frozen=True)
class Summary:
    clusters: int
    seed: int
    netqos_weight: int
    seconds: float  # wall clock
    cpu_seconds: float  # this process's CPU time: what the machine's other load does not inflate
    rows: dict[str, dict[str, int]]  # "all" / "latency-sensitive": counts
    causes: dict[str, int]


def run(clusters: int, seed: int, netqos_weight: int) -> Summary:
    rng = random.Random(seed)
    profile = DEFAULT_PROFILE
    netqos_profile = profile.with_netqos(netqos_weight)
    rows = {"all": Counter[str](), "latency-sensitive": Counter[str]()}
    causes: Counter[str] = Counter()
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(clusters):
        outcome = compare(generate(rng), profile, netqos_profile)
        for key in ("all", "latency-sensitive") if outcome.latency_sensitive else ("all",):
            rows[key]["pods"] += 1
            rows[key]["agree_node"] += outcome.agree_node
            rows[key]["agree_class"] += outcome.agree_class
        if outcome.cause:
            causes[outcome.cause] += 1
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    rows_out = {k: dict(v) for k, v in rows.items()}
    return Summary(clusters, seed, netqos_weight, seconds, cpu_seconds, rows_out, dict(causes))


def markdown(summary: Summary) -> str:
    lines = [
        f"{summary.clusters} clusters, seed {summary.seed}, NetQoS plugin weight {summary.netqos_weight}, "
        f"{summary.seconds:.1f} s ({summary.cpu_seconds:.1f} s of CPU)",
        "",
        "| pods | count | same node | same `net` class |",
        "|------|------:|----------:|-----------------:|",
    ]
    for key, row in summary.rows.items():
        pods = row.get("pods", 0)
        lines.append(
            f"| {key} | {pods} | {_share(row.get('agree_node', 0), pods)} | {_share(row.get('agree_class', 0), pods)} |"
        )
    lines += ["", "| cause of a different node | clusters |", "|---|---:|"]
    for text, count in sorted(summary.causes.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"| {text} | {count} |")
    return "\n".join(lines) + "\n"


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fidelity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=10_000, help="how many random clusters (default 10000)")
    parser.add_argument("--seed", type=int, default=1, help="the generator's seed (default 1)")
    parser.add_argument("--netqos-weight", type=int, default=1, help="the NetQoS plugin's weight (default 1)")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON instead of markdown")
    args = parser.parse_args(argv)
    if args.clusters < 1 or args.netqos_weight < 1:
        parser.error("--clusters and --netqos-weight must be at least 1")
    summary = run(args.clusters, args.seed, args.netqos_weight)
    if args.json:
        print(json.dumps(summary.__dict__, indent=2))
    else:
        sys.stdout.write(markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
