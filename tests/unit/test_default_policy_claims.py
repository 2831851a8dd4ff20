"""The default policy's claims, checked on random clusters drawn here, not by scripts/fidelity's
generator: other node sizes, label values, taints and pods, and the pods' own preferences on
other keys. Each pod goes through `policy.evaluate` (what /mutate patches) and is ranked twice
by `rank`: by the stock scheduler after the policy, by the NetQoS scheduler (the same
profile plus the plugin at weight 1) as written.

- every latency-sensitive pod without preferred node affinity of its own, with two or more
  feasible nodes of which one or more is net=high, gets the plugin's node (the same set of best
  nodes, ties kept);
- latency-sensitive pods without preferences of their own agree at least 96% overall;
- all latency-sensitive pods agree at least as often as with the classic 90/10 terms;
- ordinary pods are never patched.

Pods whose own affinity names `net` are left alone by design (explicit wins) and are not drawn.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.fixtures import REPO
from webhook.policy import Decision, Policy, evaluate
from webhook.policy_file import default_policy, load_policy
from webhook.scheduler.cycle import rank
from webhook.scheduler.model import Node, NodeUsage, Taint
from webhook.scheduler.read import pod_info
from webhook.scheduler.registry import DEFAULT_PROFILE, NETQOS

NET_VALUES = ("high", "high", "low", "low", "medium", "HIGH", "", None, None)  # None: no label
RACKS = ("r1", "r2", "r3", "r4")
TAINTS = (
    Taint("team", "ml", "NoSchedule"),
    Taint("spot", "true", "PreferNoSchedule"),
    Taint("node.kubernetes.io/unreachable", "", "NoExecute"),
)
IMAGES = ("ghcr.io/acme/api:2", "ghcr.io/acme/worker:7", "docker.io/library/nginx:1.27")
CLUSTERS = 1000


def _node(rng: random.Random, i: int) -> tuple[Node, NodeUsage]:
    labels = {"rack": rng.choice(RACKS)}
    net = rng.choice(NET_VALUES)
    if net is not None:
        labels["net"] = net
    if rng.random() < 0.3:
        labels["gpu"] = "a100"
    taints = tuple(t for t in TAINTS if rng.random() < 0.12)
    cpu = rng.choice((1000, 3500, 7800, 31000))
    memory = rng.choice((2, 6, 30, 120)) * 2**30
    allocatable = {"cpu": cpu, "memory": memory, "pods": rng.choice((8, 30, 250))}
    images = {image: rng.choice((30, 200, 700)) * 10**6 for image in IMAGES if rng.random() < 0.35}
    share = rng.choice((0.0, 0.2, 0.6, 0.95, 1.05))
    requested = {"cpu": int(cpu * share * rng.random()), "memory": int(memory * share * rng.random())}
    pods = rng.randint(0, allocatable["pods"])
    usage = NodeUsage(requested, {k: v + pods * 10**6 for k, v in requested.items()}, pods)
    return Node(f"n{i}", labels, taints, rng.random() < 0.03, allocatable, images), usage


def _pod(rng: random.Random) -> dict[str, Any]:
    labels = {"app": "shop"}
    if rng.random() < 0.65:
        labels["qos"] = "latency-sensitive"
    elif rng.random() < 0.3:
        labels["qos"] = "batch"
    requests = {}
    if rng.random() < 0.8:
        requests["cpu"] = rng.choice(("50m", "300m", "1", "3"))
    if rng.random() < 0.8:
        requests["memory"] = rng.choice(("64Mi", "1Gi", "4Gi"))
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": rng.choice(IMAGES), "resources": {"requests": requests}}]
    }
    tolerations = [{"key": t.key, "operator": "Exists"} for t in TAINTS if rng.random() < 0.25]
    if tolerations:
        spec["tolerations"] = tolerations
    node_affinity: dict[str, Any] = {}
    if rng.random() < 0.3:
        keys = rng.sample(("rack", "gpu"), rng.randint(1, 2))
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "weight": rng.randint(1, 100),
                "preference": {"matchExpressions": [_expression(rng, key)]},
            }
            for key in keys
        ]
    if rng.random() < 0.15:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["r4"]}]}]
        }
    if node_affinity:
        spec["affinity"] = {"nodeAffinity": node_affinity}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels}, "spec": spec}


def _expression(rng: random.Random, key: str) -> dict[str, Any]:
    if key == "gpu":
        return {"key": "gpu", "operator": "Exists"}
    return {"key": "rack", "operator": "In", "values": rng.sample(RACKS, rng.randint(1, 2))}


@dataclass
class Tally:
    pods: int = 0
    agree: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, agreed: bool) -> None:
        self.agree[name] = self.agree.get(name, 0) + agreed

    def share(self, name: str) -> float:
        return self.agree.get(name, 0) / self.pods


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    rng = random.Random(20261203)
    policies: dict[str, Policy] = {
        "default": default_policy(),
        "classic": load_policy(REPO / "deploy/examples/policies/classic.yaml"),
    }
    netqos_profile = DEFAULT_PROFILE.with_plugin(NETQOS, 1)
    no_own, latency = Tally(), Tally()
    misses: list[str] = []
    exact_cases = ordinary = 0
    for c in range(CLUSTERS):
        pairs = [_node(rng, i) for i in range(rng.randint(2, 60))]
        nodes = [n for n, _ in pairs]
        usage = {n.name: u for n, u in pairs}
        pod = _pod(rng)
        before = pod_info(pod)
        netqos = rank(before, nodes, usage, netqos_profile)
        if before.labels.get("qos") != "latency-sensitive":
            ordinary += 1
            for policy in policies.values():
                outcome = evaluate(policy, pod)
                assert outcome.decision is Decision.NOT_SELECTED and outcome.pod is pod
            continue
        own = bool(before.preferred)
        feasible = netqos.feasible
        exact_case = not own and len(feasible) >= 2 and any(n.net == "high" for n in feasible)
        exact_cases += exact_case
        latency.pods += 1
        no_own.pods += not own
        for name, policy in policies.items():
            after = pod_info(evaluate(policy, pod).pod)
            agreed = set(rank(after, nodes, usage, DEFAULT_PROFILE).predicted) == set(netqos.predicted)
            latency.add(name, agreed)
            if not own:
                no_own.add(name, agreed)
            if name == "default" and exact_case and not agreed:
                misses.append(f"cluster {c}")
    return {"no_own": no_own, "latency": latency, "misses": misses, "exact_cases": exact_cases, "ordinary": ordinary}


def test_with_a_feasible_net_high_node_every_pod_without_own_preferences_gets_the_plugins_node(measured):
    assert measured["exact_cases"] > 300
    assert measured["misses"] == []


def test_latency_sensitive_pods_without_own_preferences_agree_at_least_96_percent(measured):
    assert measured["no_own"].pods > 400
    assert measured["no_own"].share("default") >= 0.96


def test_all_latency_sensitive_pods_agree_at_least_as_often_as_with_the_classic_terms(measured):
    latency = measured["latency"]
    assert latency.pods > 600
    assert latency.share("default") >= latency.share("classic")


def test_ordinary_pods_are_never_patched(measured):
    assert measured["ordinary"] > 200  # each one asserted NOT_SELECTED and left as it was
