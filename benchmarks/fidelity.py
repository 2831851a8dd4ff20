"""Fidelity: how often the stock kube-scheduler, fed the affinity the webhook injects, puts a pod
where the NetQoS scheduler would have put it. Measured on random clusters, for the default policy
and the classic terms side by side.

    python -m benchmarks.fidelity [--clusters N] [--seed S] [--netqos-weight W]
                                  [--sampled-clusters M] [--json]

A seeded generator draws each cluster: 2-100 nodes; `net` high / low / another value / no label
in shares drawn per cluster; a zone and, on some nodes, a `disk=ssd` label; allocatable CPU,
memory and pod slots; pods already running with their requests (some without requests, counted
by the scheduler's non-zero defaults), so some nodes are full; PreferNoSchedule and NoSchedule
taints; images already pulled. Then one pod, latency-sensitive (70%) or ordinary, with random
requests, tolerations and image; a quarter of the pods prefer a zone and/or an SSD node of their
own (preferred node affinity on other keys, weights 10-100). Every prediction comes from
`webhook.scheduler.cycle.rank`, the code behind `explain`: the stock scheduler's (default profile, the
pod after `policy.evaluate`, once per policy) and the NetQoS scheduler's (the same profile plus
the NetQoS plugin at weight W, the pod as written).

Agreement: the two sets of best-total nodes are equal (ties kept). Pods are counted by kind:
latency-sensitive without preferences of their own, with a feasible net=high node or without
one; latency-sensitive with preferences of their own; ordinary. Every disagreement is put down
to one cause (`cause`).

The sampled part (`--sampled-clusters`): clusters of 100-5,000 nodes (log-uniform), where
kube-scheduler filters only until it has found numFeasibleNodesToFind feasible nodes, walking
the node list from a start index that each cycle moves on by the nodes it processed
(`cycle.Sampling`). Each cluster schedules a few latency-sensitive pods in turn with each
scheduler, percentageOfNodesToScore unset (adaptive) and 100; the table gives how often the pod
lands on a net=high node. Results are in docs/scheduling.md, "How often the two agree".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import shlex
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks import evidence
from webhook.admission_policy import MUTATING_KIND, admission_policies
from webhook.affinity import preferred_score
from webhook.policy import Policy, evaluate
from webhook.policy_file import default_policy, load_policy
from webhook.resources import CPU, MEMORY, NON_ZERO_DEFAULTS, PODS
from webhook.scheduler.cycle import Ranking, Sampling, rank
from webhook.scheduler.framework import default_normalize
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile, Taint
from webhook.scheduler.plugins.netqos import NETQOS_NODE_LABEL
from webhook.scheduler.read import pod_info
from webhook.scheduler.registry import (
    BALANCED_ALLOCATION,
    DEFAULT_PROFILE,
    IMAGE_LOCALITY,
    NETQOS,
    NODE_AFFINITY,
    NODE_RESOURCES_FIT,
    TAINT_TOLERATION,
)

CLASSIC_FILE = "deploy/examples/policies/classic.yaml"
GI = 1024**3
MB = 1000**2
IMAGES = tuple(f"registry.example.com/app-{i}:1.{i}" for i in range(8))
NET_CLASSES = ("high", "low", "other", "unlabelled")
ZONES = ("a", "b", "c")
ZONE_KEY = "topology.kubernetes.io/zone"
CPU_SIZES = (2000, 4000, 8000, 16000)  # millicores
MEMORY_SIZES = (4 * GI, 8 * GI, 16 * GI, 32 * GI, 64 * GI)
REQUEST_CPU = (0, 100, 250, 500, 1000, 2000)  # 0: the container names no cpu request
REQUEST_MEMORY = (0, 128 * 2**20, 512 * 2**20, GI, 2 * GI, 4 * GI)
OWN_WEIGHTS = (10, 30, 50, 100)
PREFER_NO_SCHEDULE = Taint("example.com/maintenance", "soon", "PreferNoSchedule")
NO_SCHEDULE = Taint("dedicated", "gpu", "NoSchedule")
SAMPLED_SIZES = (100, 5000)
PODS_PER_SAMPLED_CLUSTER = 3
PERCENTAGES = (0, 100)  # percentageOfNodesToScore: 0 is unset (adaptive)

HIGH_FEASIBLE = "latency-sensitive, no own preferences, a net=high node feasible"
NO_HIGH = "latency-sensitive, no own preferences, no net=high node feasible"
OWN = "latency-sensitive with preferred node affinity of its own"
ORDINARY = "ordinary (not selected)"
KINDS = (HIGH_FEASIBLE, NO_HIGH, OWN, ORDINARY)
# The second pod of each cluster (`own_case`): latency-sensitive, with own terms of one shape.
OWN_ZONES = "own: zones at several weights"
OWN_SEVERAL = "own: several terms on several keys"
OWN_SMALL = "own: small weights (1-9)"
OWN_HEAVY = "own: weights summing past 222 (ours split over several terms)"
OWN_SHAPES = (OWN_ZONES, OWN_SEVERAL, OWN_SMALL, OWN_HEAVY)
# Every pod with own terms, by whether a feasible node its own terms score best is net=high.
OWN_COINCIDE = "own: its best own node is net=high (coincide)"
OWN_CONFLICT = "own: no best own node is net=high (conflict)"
OWN_ALL = "all with preferred node affinity of their own"
OWN_ROWS = (OWN, *OWN_SHAPES, OWN_COINCIDE, OWN_CONFLICT, OWN_ALL)


@dataclass(frozen=True)
class Case:
    nodes: tuple[Node, ...]
    usage: dict[str, NodeUsage]
    pod: dict[str, Any]


@dataclass(frozen=True)
class Outcome:
    kind: str
    agree: dict[str, bool]  # policy name -> same best nodes as the NetQoS scheduler
    causes: dict[str, str]  # policy name -> cause of a disagreement
    relation: str | None = None  # OWN_COINCIDE or OWN_CONFLICT for a pod with own terms


def net_class(labels: dict[str, str] | Any) -> str:
    net = labels.get(NETQOS_NODE_LABEL)
    if net is None:
        return "unlabelled"
    return net if net in ("high", "low") else "other"


def generate(rng: random.Random, count: int | None = None, own_share: float = 0.25) -> Case:
    """One random cluster (2-100 nodes unless `count`) and pod."""
    nodes, usage = _nodes(rng, rng.randint(2, 100) if count is None else count)
    return Case(nodes, usage, _pod(rng, own_share))


def _nodes(rng: random.Random, count: int) -> tuple[tuple[Node, ...], dict[str, NodeUsage]]:
    shares = [rng.random() ** 2 for _ in NET_CLASSES]  # squared: often one class dominates
    prefer_tainted, hard_tainted = rng.choice((0.0, 0.1, 0.3)), rng.choice((0.0, 0.05, 0.2))
    nodes, usage = [], {}
    for i in range(count):
        name = f"node-{i:04}"
        klass = rng.choices(NET_CLASSES, shares)[0]
        labels = {"kubernetes.io/hostname": name, ZONE_KEY: rng.choice(ZONES)}
        if klass != "unlabelled":
            labels[NETQOS_NODE_LABEL] = klass if klass != "other" else rng.choice(("medium", "10g"))
        if rng.random() < 0.5:
            labels["disk"] = "ssd"
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
    return tuple(nodes), usage


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


def _pod(rng: random.Random, own_share: float, latency_sensitive: float = 0.7) -> dict[str, Any]:
    labels = {"app": "web"}
    if rng.random() < latency_sensitive:
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
    if rng.random() < own_share:
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": _own_terms(rng)}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels}, "spec": spec}


def _own_terms(rng: random.Random) -> list[dict[str, Any]]:
    """A zone preference, an SSD preference, or both, at weights from 10 to 100."""
    zone = {"key": ZONE_KEY, "operator": "In", "values": [rng.choice(ZONES)]}
    ssd = {"key": "disk", "operator": "In", "values": ["ssd"]}
    picked = rng.choice(([zone], [ssd], [zone, ssd]))
    return [{"weight": rng.choice(OWN_WEIGHTS), "preference": {"matchExpressions": [e]}} for e in picked]


def own_case(rng: random.Random, case: Case) -> tuple[str, Case]:
    """A second pod on the same cluster, latency-sensitive, with own terms of one shape drawn
    from `rng` (a stream of its own, so the first pods are the same with or without it)."""
    pod = _pod(rng, own_share=0.0, latency_sensitive=1.0)
    shape = rng.choice(OWN_SHAPES)
    zones = rng.sample(ZONES, rng.randint(2, 3))
    if shape == OWN_ZONES:
        weights = rng.sample(range(1, 101), len(zones))
        terms = [_term(w, (ZONE_KEY, "In", [z])) for w, z in zip(weights, zones, strict=True)]
    elif shape == OWN_SEVERAL:
        terms = rng.sample(_several(rng, case.nodes, zones), rng.randint(2, 4))
    elif shape == OWN_SMALL:
        terms = [_term(rng.randint(1, 9), e) for e in rng.sample(_expressions(rng, case.nodes), rng.randint(1, 2))]
    else:
        terms = [_term(rng.randint(60, 100), e) for e in rng.sample(_expressions(rng, case.nodes), rng.randint(3, 5))]
    pod["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}
    return shape, Case(case.nodes, case.usage, pod)


def _term(weight: int, *expressions: tuple[str, str, list[str]]) -> dict[str, Any]:
    exprs = [{"key": k, "operator": o, **({"values": v} if v else {})} for k, o, v in expressions]
    return {"weight": weight, "preference": {"matchExpressions": exprs}}


def _expressions(rng: random.Random, nodes: Sequence[Node]) -> list[tuple[str, str, list[str]]]:
    hosts = [n.name for n in rng.sample(nodes, min(2, len(nodes)))]
    return [
        (ZONE_KEY, "In", [rng.choice(ZONES)]),
        (ZONE_KEY, "NotIn", [rng.choice(ZONES)]),
        ("disk", "In", ["ssd"]),
        ("disk", "DoesNotExist", []),
        ("kubernetes.io/hostname", "In", hosts),
    ]


def _several(rng: random.Random, nodes: Sequence[Node], zones: list[str]) -> list[dict[str, Any]]:
    """Terms on zone, disk and hostname, one with two requirements, at weights 1-100."""
    exprs = _expressions(rng, nodes)
    terms = [_term(rng.randint(1, 100), e) for e in exprs]
    terms.append(_term(rng.randint(1, 100), (ZONE_KEY, "In", zones[:1]), ("disk", "In", ["ssd"])))
    return terms


def own_relation(before: PodInfo, base: Ranking, labels: dict[str, Any]) -> str:
    """Whether a feasible node that the pod's own terms score best is net=high."""
    raw = {n.name: preferred_score(before.preferred, labels[n.name], n.name) for n in base.feasible}
    best = max(raw.values(), default=0)
    coincide = any(net_class(labels[name]) == "high" for name, score in raw.items() if score == best)
    return OWN_COINCIDE if coincide else OWN_CONFLICT


def kind_of(before: PodInfo, netqos: Ranking, labels: dict[str, Any]) -> str:
    if before.labels.get("qos") != "latency-sensitive":
        return ORDINARY
    if before.preferred:
        return OWN
    return HIGH_FEASIBLE if any(net_class(labels[n.name]) == "high" for n in netqos.feasible) else NO_HIGH


@dataclass(frozen=True)
class Prediction:
    """One scheduler's weighted NodeAffinity and NetQoS scores and totals, per feasible node."""

    affinity: dict[str, int]
    netqos: dict[str, int]
    totals: dict[str, int]

    @property
    def predicted(self) -> set[str]:
        best = max(self.totals.values(), default=None)
        return {name for name, total in self.totals.items() if total == best}


def compare(
    case: Case,
    policies: dict[str, Policy],
    profile: Profile,
    netqos_weight: int,
    admitted: Mapping[str, Any] | None = None,
) -> Outcome:
    """Every policy's prediction for one case against the NetQoS scheduler's, with causes;
    `admitted`: more predictions, of the pod as something else mutated it (name -> the pod after).

    One `rank` of the pod as written gives every node's filter result and scores; the pod after a
    policy differs only in its preferred terms, which filter nothing and change only NodeAffinity,
    so each prediction re-normalises that one column (`predict`); the NetQoS scheduler's adds the
    plugin's column. tests/tools/test_fidelity.py checks both against a full `rank`.
    """
    before = pod_info(case.pod)
    base = rank(before, case.nodes, case.usage, profile)
    labels = {n.name: n.labels for n in case.nodes}
    netqos = predict(base, labels, before.preferred, profile, netqos_weight)
    agree, causes = {}, {}
    seen: dict[tuple[Any, ...], Prediction] = {}
    mutated = {name: evaluate(policy, case.pod).pod for name, policy in policies.items()}
    for name, pod in {**mutated, **(admitted or {})}.items():
        after = pod_info(pod)
        key = tuple(t.identity for t in after.preferred)
        stock = seen.get(key) or seen.setdefault(key, predict(base, labels, after.preferred, profile, 0))
        agree[name] = stock.predicted == netqos.predicted
        if not agree[name]:
            causes[name] = cause(base, stock, netqos)
    kind = kind_of(before, base, labels)
    relation = own_relation(before, base, labels) if kind == OWN else None
    return Outcome(kind, agree, causes, relation)


def predict(
    base: Ranking, labels: dict[str, Any], preferred: Sequence[Any], profile: Profile, netqos_weight: int
) -> Prediction:
    """The totals of `base` (a ranking of the pod) as if the pod had `preferred` terms, plus the
    NetQoS plugin at `netqos_weight` (0: none): NodeAffinity's raw scores summed and normalised
    again, the totals adjusted by the change, the plugin's table added."""
    feasible = base.feasible
    raw = [preferred_score((*preferred, *profile.added_preferred), labels[n.name], n.name) for n in feasible]
    weight = profile.weights.get(NODE_AFFINITY, 0)
    affinity, netqos, totals = {}, {}, {}
    for node, normalised in zip(feasible, default_normalize(raw), strict=True):
        old = node.scores.get(NODE_AFFINITY)
        affinity[node.name] = 0 if old is None else normalised * weight
        netqos[node.name] = node.netqos_score * netqos_weight
        totals[node.name] = (node.total or 0) - (old or 0) * weight + affinity[node.name] + netqos[node.name]
    return Prediction(affinity, netqos, totals)


OTHER_GROUPS = (
    ("resource scores", (NODE_RESOURCES_FIT, BALANCED_ALLOCATION)),
    ("a PreferNoSchedule taint", (TAINT_TOLERATION,)),
    ("image locality", (IMAGE_LOCALITY,)),
)


def cause(base: Ranking, stock: Prediction, netqos: Prediction) -> str:
    """Why the stock scheduler's best node(s) differ from the NetQoS scheduler's.

    With a the stock scheduler's pick and b the NetQoS scheduler's, the other plugins score both
    alike in the two schedulers, so their lead O for a lies between NodeAffinity's lead for b
    (stock) and the plugin's plus the pod's own NodeAffinity (NetQoS scheduler): the cause is
    how those two leads differ, and the plugin group that weighs most in O's direction.
    """
    w, q = stock.predicted, netqos.predicted
    if w & q:
        return "tie: the predicted sets overlap (a random pick among equals may still agree)"
    a, b = min(w), min(q)
    plugin_lead = (netqos.netqos[b] + netqos.affinity[b]) - (netqos.netqos[a] + netqos.affinity[a])
    affinity_lead = stock.affinity[b] - stock.affinity[a]
    scores = {n.name: n.scores for n in base.feasible}
    others = {
        group: sum((scores[a].get(x, 0) - scores[b].get(x, 0)) * base.weights.get(x, 0) for x in plugins)
        for group, plugins in OTHER_GROUPS
    }
    if plugin_lead <= 0:  # the others favour b: the one favouring it most tipped the NetQoS scheduler
        top = min(others, key=lambda g: others[g])
        return f"NodeAffinity favours the stock scheduler's node more than the plugin did; {top} tipped the plugin only"
    top = max(others, key=lambda g: others[g])  # the others favour a
    if affinity_lead <= 0:
        return f"NodeAffinity does not favour the plugin's node (the pod's own terms outweigh ours); {top} tipped it"
    return f"NodeAffinity favours the plugin's node by less than the plugin did; {top} overturned its lead"


def policies() -> dict[str, Policy]:
    """The default policy (its table scaled per pod beside the pod's own terms), the same at the
    fixed scale (what the admission policy injects, and the webhook did before), the classic."""
    default = default_policy()
    return {
        "default": default,
        "default at the fixed scale": dataclasses.replace(default, per_pod=False),
        "classic": load_policy(CLASSIC_FILE),
    }


ADMISSION = "default (admission policy)"
CHUNK = 500  # pods per run of the API server's admission code: one process start each


def admission_policy_pods(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods after the default policy compiled into MutatingAdmissionPolicies (`manifests --as
    admission-policy`), run by the API server's own CEL and patcher (harness/apiserver_cel.py: the
    kube-apiserver's admission code, built once from Go modules). Raises `Unavailable` without Go."""
    from harness import apiserver_cel  # the test harness's build of it: Go and a module download

    objects = [o for o in admission_policies(default_policy()) if o["kind"] == MUTATING_KIND]
    out = []
    for result in apiserver_cel.run(objects, pods)["pods"]:
        if result["errors"]:
            raise RuntimeError(f"the admission policy failed on a pod: {result['errors']}")
        out.append(result["after"])
    return out


@dataclass
class Summary:
    clusters: int
    seed: int
    netqos_weight: int
    seconds: float  # wall clock
    cpu_seconds: float  # this process's CPU time: what the machine's other load does not inflate
    rows: dict[str, dict[str, int]]  # kind -> {"pods", "agree_<policy>"}
    causes: dict[str, dict[str, dict[str, int]]]  # policy -> kind -> cause -> count
    sampled: dict[str, Any] = field(default_factory=dict)


def run(clusters: int, seed: int, netqos_weight: int, admission: bool = False) -> Summary:
    """`admission`: also the default policy as the admission policy carries it out (the column
    `ADMISSION`), each pod mutated by the API server's own admission code."""
    rng = random.Random(seed)
    profile = DEFAULT_PROFILE
    chosen = policies()
    shapes_rng = random.Random(f"own shapes {seed}")  # the second pods: the first stream stays as it was
    rows: dict[str, Counter[str]] = {kind: Counter() for kind in (*KINDS, *OWN_ROWS)}
    causes: dict[str, dict[str, Counter[str]]] = {name: {} for name in (*chosen, *([ADMISSION] if admission else []))}
    started, cpu_started = time.perf_counter(), time.process_time()
    for done in range(0, clusters, CHUNK):
        cases = []
        for _ in range(min(CHUNK, clusters - done)):
            case = generate(rng)
            shape, second_case = own_case(shapes_rng, case)
            cases.append((case, shape, second_case))
        pods = [c.pod for case, _, second_case in cases for c in (case, second_case)]
        after = iter(admission_policy_pods(pods) if admission else [])
        for case, shape, second_case in cases:
            first = compare(case, chosen, profile, netqos_weight, {ADMISSION: next(after)} if admission else None)
            second = compare(
                second_case, chosen, profile, netqos_weight, {ADMISSION: next(after)} if admission else None
            )
            _count(rows, causes, first, second, shape)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    return Summary(
        clusters,
        seed,
        netqos_weight,
        seconds,
        cpu_seconds,
        {k: dict(v) for k, v in rows.items()},
        {name: {k: dict(v) for k, v in by_kind.items()} for name, by_kind in causes.items()},
    )


def _count(
    rows: dict[str, Counter[str]],
    causes: dict[str, dict[str, Counter[str]]],
    first: Outcome,
    second: Outcome,
    shape: str,
) -> None:
    """One cluster's two pods into the rows and causes: the first by its kind, the second (given
    preferences of its own) by its shape."""
    for outcome, kinds in (
        (first, (first.kind, *((first.relation, OWN_ALL) if first.relation else ()))),
        (second, (shape, second.relation or OWN_CONFLICT, OWN_ALL)),
    ):
        for kind in kinds:
            rows[kind]["pods"] += 1
            for name, agreed in outcome.agree.items():
                rows[kind][f"agree_{name}"] += agreed
        for name, text in outcome.causes.items():
            causes[name].setdefault(kinds[0], Counter())[text] += 1


def run_sampled(clusters: int, seed: int, netqos_weight: int) -> dict[str, Any]:
    """Large clusters under kube-scheduler's sampling: how often a latency-sensitive pod (no own
    preferences) lands on a net=high node, per scheduler and percentageOfNodesToScore."""
    rng = random.Random(seed)
    profile = DEFAULT_PROFILE
    netqos_profile = profile.with_plugin(NETQOS, netqos_weight)
    # the pods here have no preferred terms of their own: the fixed scale would repeat the default
    chosen = {name: policy for name, policy in policies().items() if name in ("default", "classic")}
    schedulers = ["NetQoS scheduler", *(f"stock, {name} policy" for name in chosen)]
    on_high: Counter[str] = Counter()
    sample_had_high: Counter[str] = Counter()
    pods = cluster_had_high = 0
    sizes = []
    started, cpu_started = time.perf_counter(), time.process_time()
    low, high = SAMPLED_SIZES
    for _ in range(clusters):
        count = round(math.exp(rng.uniform(math.log(low), math.log(high))))
        sizes.append(count)
        nodes, usage = _nodes(rng, count)
        is_high = {n.name: net_class(n.labels) == "high" for n in nodes}
        first = rng.randrange(count)  # where earlier cycles left nextStartNodeIndex
        starts = {(s, pct): first for s in schedulers for pct in PERCENTAGES}
        for _ in range(PODS_PER_SAMPLED_CLUSTER):
            pod = _pod(rng, own_share=0.0, latency_sensitive=1.0)
            before = pod_info(pod)
            views = {"NetQoS scheduler": (before, netqos_profile)}
            for name, policy in chosen.items():
                views[f"stock, {name} policy"] = (pod_info(evaluate(policy, pod).pod), profile)
            pods += 1
            full = rank(before, nodes, usage, netqos_profile)
            cluster_had_high += any(is_high[n.name] for n in full.feasible)
            for scheduler, (view, prof) in views.items():
                for pct in PERCENTAGES:
                    ranking = rank(view, nodes, usage, prof, Sampling(starts[scheduler, pct], pct))
                    starts[scheduler, pct] = (starts[scheduler, pct] + ranking.processed) % count
                    predicted = ranking.predicted
                    if predicted:  # a random pick among the best: the expected share on net=high
                        on_high[f"{scheduler}|{pct}"] += sum(is_high[n] for n in predicted) / len(predicted)
                    sample_had_high[f"{scheduler}|{pct}"] += any(is_high[n.name] for n in ranking.feasible)
    return {
        "clusters": clusters,
        "pods": pods,
        "nodes_min": min(sizes, default=0),
        "nodes_max": max(sizes, default=0),
        "nodes_median": sorted(sizes)[len(sizes) // 2] if sizes else 0,
        "pods_with_a_feasible_net_high_node": cluster_had_high,
        "on_net_high": {k: round(v, 2) for k, v in on_high.items()},
        "sample_had_net_high": dict(sample_had_high),
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu_started,
    }


def markdown(summary: Summary) -> str:
    names = list(summary.causes)
    lines = [
        f"{summary.clusters} clusters, seed {summary.seed}, NetQoS plugin weight {summary.netqos_weight}, "
        f"{summary.seconds:.1f} s ({summary.cpu_seconds:.1f} s of CPU)",
        "",
        "| pods | count | " + " | ".join(f"same node, {n} policy" for n in names) + " |",
        "|------|------:|" + "".join("------:|" for _ in names),
    ]
    totals: Counter[str] = Counter()
    latency: Counter[str] = Counter()
    no_own: Counter[str] = Counter()
    for kind in KINDS:
        row = summary.rows.get(kind, {})
        totals.update(row)
        if kind != ORDINARY:
            latency.update(row)
        if kind in (HIGH_FEASIBLE, NO_HIGH):
            no_own.update(row)
        lines.append(_row(kind, row, names))
    lines.append(_row("latency-sensitive, no own preferences", no_own, names))
    lines.append(_row("all latency-sensitive", latency, names))
    lines.append(_row("all", totals, names))
    lines += ["", "| pods with preferred node affinity of their own | count | " + " | ".join(names) + " |"]
    lines.append("|------|------:|" + "".join("------:|" for _ in names))
    lines += [_row(kind, summary.rows.get(kind, {}), names) for kind in OWN_ROWS]
    for name in names:
        lines += ["", f"Disagreements, {name} policy:", "", "| pods | cause | count |", "|---|---|---:|"]
        by_kind = summary.causes[name]
        if not by_kind:
            lines.append("| - | none | 0 |")
        for kind in (*KINDS, *OWN_SHAPES):
            for text, count in sorted(by_kind.get(kind, {}).items(), key=lambda kv: (-kv[1], kv[0])):
                lines.append(f"| {kind} | {text} | {count} |")
    if summary.sampled:
        lines += ["", *_sampled_markdown(summary.sampled)]
    return "\n".join(lines) + "\n"


def _row(label: str, row: dict[str, int] | Counter[str], names: Sequence[str]) -> str:
    pods = row.get("pods", 0)
    return f"| {label} | {pods} | " + " | ".join(_share(row.get(f"agree_{n}", 0), pods) for n in names) + " |"


def _sampled_markdown(sampled: dict[str, Any]) -> list[str]:
    pods = sampled["pods"]
    lines = [
        f"{sampled['clusters']} sampled clusters of {sampled['nodes_min']}-{sampled['nodes_max']} nodes "
        f"(median {sampled['nodes_median']}), {pods} latency-sensitive pods without own preferences, "
        f"{sampled['pods_with_a_feasible_net_high_node']} of them with a feasible net=high node in the cluster; "
        f"{sampled['seconds']:.1f} s ({sampled['cpu_seconds']:.1f} s of CPU)",
        "",
        "| scheduler | percentageOfNodesToScore | pod lands on net=high | scored sample held a net=high node |",
        "|---|---|---:|---:|",
    ]
    for key in sampled["on_net_high"]:
        scheduler, pct = key.split("|")
        shown = "unset (adaptive)" if pct == "0" else pct
        lines.append(
            f"| {scheduler} | {shown} | {_share(sampled['on_net_high'][key], pods)} | "
            f"{_share(sampled['sample_had_net_high'].get(key, 0), pods)} |"
        )
    return lines


def _share(part: float, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fidelity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=10_000, help="how many random clusters (default 10000)")
    parser.add_argument("--seed", type=int, default=1, help="the generator's seed (default 1)")
    parser.add_argument("--netqos-weight", type=int, default=1, help="the NetQoS plugin's weight (default 1)")
    parser.add_argument(
        "--sampled-clusters",
        type=int,
        default=40,
        help="how many clusters of 100-5,000 nodes to schedule with kube-scheduler's sampling (default 40; 0: none)",
    )
    parser.add_argument(
        "--no-admission-policy",
        action="store_true",
        help="leave out the admission policy's column (it needs Go to build the API server's admission code)",
    )
    parser.add_argument("--json", action="store_true", help="print the counts as JSON instead of markdown")
    parser.add_argument(
        "--record",
        action="store_true",
        help="also write the tables to docs/evidence/fidelity-DATE.md with the run's header",
    )
    args = parser.parse_args(argv)
    if args.clusters < 1 or args.netqos_weight < 1 or args.sampled_clusters < 0:
        parser.error("--clusters and --netqos-weight must be at least 1, --sampled-clusters at least 0")
    load, started = os.getloadavg()[0], time.monotonic()
    summary = run(args.clusters, args.seed, args.netqos_weight, admission=not args.no_admission_policy)
    if args.sampled_clusters:
        summary.sampled = run_sampled(args.sampled_clusters, args.seed, args.netqos_weight)
    if args.json:
        print(json.dumps(summary.__dict__, indent=2))
    else:
        sys.stdout.write(markdown(summary))
    if args.record:
        command = shlex.join(["scripts/fidelity", *(argv if argv is not None else sys.argv[1:])])
        title = "How often the stock scheduler and the NetQoS scheduler agree"
        seconds = time.monotonic() - started
        path = evidence.write("fidelity", title, command, markdown(summary), (load, os.getloadavg()[0]), seconds)
        print(f"recorded: {path.relative_to(evidence.REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
