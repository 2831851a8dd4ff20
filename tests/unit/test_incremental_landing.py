"""`World.landing` given the pod's predictor answers exactly what `sampling.landing` answers when
it ranks every node again: the same walk, the same feasible nodes, the same probability of each
node, after every move, for pod specs that share their Score plugins' keys and specs that do not."""

from __future__ import annotations

import random

import pytest

from harness.pods import pod
from webhook.policy import evaluate
from webhook.policy_file import default_policy
from webhook.scheduler import sampling
from webhook.scheduler.incremental import World
from webhook.scheduler.model import Node, PodInfo, Taint, UsageTally
from webhook.scheduler.plugins.netqos import NETQOS_TARGET
from webhook.scheduler.read import pod_info
from webhook.scheduler.registry import DEFAULT_PROFILE

ALLOCATABLE = {"cpu": 4000, "memory": 8 << 30, "pods": 110}


def latency_sensitive(cpu: str, memory: str = "128Mi") -> PodInfo:
    """A latency-sensitive pod as the webhook admits it (the default policy's terms)."""
    containers = [{"name": "app", "image": "app:1", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    outcome = evaluate(default_policy(), pod(labels={"qos": "latency-sensitive"}, containers=containers))
    return pod_info(outcome.pod)


def world(count: int, seed: int) -> World:
    """`count` nodes, every tenth net=high and every tenth net=low, some tainted, each filled
    with pods of random requests (some full)."""
    rng = random.Random(seed)
    nodes = []
    for i in range(count):
        net = "high" if i % 10 == 0 else "low" if i % 10 == 1 else "none"
        taints = (Taint("dedicated", "batch", "PreferNoSchedule"),) if i % 7 == 3 else ()
        nodes.append(Node(f"n{i:04}", {"net": net}, allocatable=ALLOCATABLE, taints=taints))
    tallies = {}
    for n in nodes:
        tally = tallies[n.name] = UsageTally()
        for _ in range(rng.randrange(6)):
            tally.add(latency_sensitive(f"{rng.choice([100, 500, 900])}m", f"{rng.choice([128, 1024])}Mi"))
    return World(nodes, tallies, DEFAULT_PROFILE, NETQOS_TARGET)


def full_landing(w: World, pod_: PodInfo) -> sampling.Landing:
    usage = {n.name: u for n, u in zip(w.nodes, w.usage, strict=True)}
    return sampling.landing(pod_, w.nodes, usage, DEFAULT_PROFILE, w.namespaces)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("count", [150, 400])
def test_landing_from_the_predictor_equals_ranking_every_node_after_each_move(count, seed):
    w = world(count, seed)
    rng = random.Random(seed)
    # two specs share their requests (and so their usage scores), one does not
    specs = [latency_sensitive("500m"), latency_sensitive("500m", "128Mi"), latency_sensitive("900m", "1Gi")]
    compared = 0
    for step in range(40):
        pod_ = specs[step % len(specs)]
        predictor = w.predictor(pod_)
        found = w.landing(pod_, DEFAULT_PROFILE, predictor)
        assert found == full_landing(w, pod_), f"step {step}"
        assert found is not None and found.sampled
        compared += 1
        names = list(found.probability)
        w.move(w.index[rng.choice(names)], pod_, remove=False)
    assert compared == 40
