"""The plugin table is the one place a plugin is evaluated: a Filter or Score plugin added to it
changes what explain predicts, what status says and what rebalance plans; a profile that picks
another entry for a plugin (a Kubernetes version's variant) is followed by the cycle and by the
what-if placement alike."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from typing import Any

import pytest

from harness.kubeapi import node, pod
from tests.unit.test_rebalance import make_plan
from tests.unit.test_status_cost import cluster_view
from webhook import explain, placement, rebalance, status
from webhook.policy_file import default_policy
from webhook.scheduler import cycle, registry
from webhook.scheduler.framework import FilterPlugin, Reads, ScorePlugin
from webhook.scheduler.incremental import World
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile, UsageTally
from webhook.scheduler.plugins.netqos import NETQOS_TARGET
from webhook.scheduler.read import node_info, pod_info
from webhook.scheduler.registry import BALANCED_ALLOCATION, BALANCED_ALLOCATION_WITH_POD, DEFAULT_PROFILE

NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
BLOCKED = "example.com/blocked"
BLOCKED_REASON = "node(s) were blocked by the example plugin"
ZONE = "topology.kubernetes.io/zone"
QOS = {"qos": "latency-sensitive", "app": "web"}


def _blocked(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    return (BLOCKED_REASON,) if BLOCKED in node.labels else ()


def _zone_a(state: Any, node: Node, usage: NodeUsage) -> int:
    return 100 if node.labels.get(ZONE) == "a" else 0


BLOCKING = FilterPlugin("ExampleBlocked", _blocked, Reads.NODE, lambda pod: None)
ZONED = ScorePlugin("ExampleZoneA", lambda pod, nodes, profile: True, _zone_a, None, Reads.NODE, lambda p, f: None)


@pytest.fixture
def with_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "FILTER_PLUGINS", (*registry.FILTER_PLUGINS, BLOCKING))


@pytest.fixture
def with_score(monkeypatch: pytest.MonkeyPatch) -> Profile:
    monkeypatch.setattr(registry, "SCORE_PLUGINS", {**registry.SCORE_PLUGINS, ZONED.name: ZONED})
    monkeypatch.setattr(registry, "SCORE_ORDER", (*registry.SCORE_ORDER, ZONED.name))
    return DEFAULT_PROFILE.with_plugin(ZONED.name, 10)


def sized(obj: dict[str, Any], **labels: str) -> dict[str, Any]:
    obj["metadata"]["labels"].update(labels)
    obj["status"] = {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}
    return obj


def nodes() -> list[dict[str, Any]]:
    return [sized(node("fast", "high"), **{BLOCKED: "yes"}), sized(node("slow", "low"), **{ZONE: "a"})]


def stranded() -> dict[str, Any]:
    p = pod("shop", "web-0", QOS, "slow", ("ReplicaSet", "web-1"), "2026-01-01T00:00:00Z")
    p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    return p


def sibling() -> dict[str, Any]:
    p = pod("shop", "web-peer", {"app": "web"}, "slow", ("ReplicaSet", "web-1"), "2026-01-01T00:00:00Z")
    p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    return p


def explained(profile: Profile = DEFAULT_PROFILE) -> tuple[str, ...]:
    new = stranded()
    new["spec"].pop("nodeName")
    report = explain.explain(default_policy(), new, [node_info(n) for n in nodes()], profile=profile)
    return report.ranking.predicted


def why_not_fast() -> tuple[str, ...]:
    [row] = status.analyse(cluster_view(nodes(), [stranded()])).not_on_high
    return row.why


def planned(profile: Profile = DEFAULT_PROFILE) -> tuple[str, str | None, str]:
    row = make_plan(nodes(), [stranded(), sibling()], profile=profile, min_replicas=1).candidates[0]
    return row.action, row.target, row.reason


def test_without_the_example_plugins_every_consumer_sends_the_pod_to_the_fast_node() -> None:
    assert explained() == ("fast",)
    assert why_not_fast() == (placement.FEASIBLE_NOW,)
    assert planned()[:2] == ("evict", "fast")


@pytest.mark.usefixtures("with_filter")
def test_a_filter_plugin_added_to_the_table_changes_explain_status_and_rebalance() -> None:
    assert explained() == ("slow",)
    assert why_not_fast() == (f"1/1 net=high node(s): {BLOCKED_REASON}",)
    action, target, reason = planned()
    assert (action, target) == ("skip", None)
    assert reason == f"no net=high node fits the replacement: 1/1 net=high node(s): {BLOCKED_REASON}"


def test_a_score_plugin_added_to_the_table_changes_explain_and_rebalance(with_score: Profile) -> None:
    assert explained(with_score) == ("slow",)
    action, target, reason = planned(with_score)
    assert (action, target) == ("skip", None)
    assert reason.startswith("kube-scheduler would place the replacement on slow (net=low)")
    # status answers which filters keep a pod off the fast nodes: scores do not enter it
    assert why_not_fast() == (placement.FEASIBLE_NOW,)


# --- a variant entry: NodeResourcesBalancedAllocation before 1.36 -----------------------------------


PRE_136 = dataclasses.replace(DEFAULT_PROFILE, variants={BALANCED_ALLOCATION: BALANCED_ALLOCATION_WITH_POD})


def test_the_pre_136_balanced_allocation_scores_the_balance_with_the_pod() -> None:
    """A 4-CPU 16Gi node with 2 CPUs and 2Gi taken; the pod asks 1 CPU and 1Gi. With the pod the
    shares are 3/4 and 3/16: (1 - (0.75 - 0.1875) / 2) x 100 = 71. Since 1.36 the score is the
    change: without the pod 2/4 and 2/16 give 81, so 50 + (50 + 71 - 81) / 2 = 70."""
    n = node_info(sized(node("n")))
    usage = {"n": NodeUsage({"cpu": 2000, "memory": 2 * 2**30}, {"cpu": 2000, "memory": 2 * 2**30}, 1)}
    p = dataclasses.replace(pod_info(stranded()), node_name="")
    assert cycle.rank(p, [n], usage, PRE_136).nodes[0].scores[BALANCED_ALLOCATION] == 71
    assert cycle.rank(p, [n], usage).nodes[0].scores[BALANCED_ALLOCATION] == 70


@pytest.mark.parametrize("seed", range(20))
def test_the_what_if_placement_follows_the_profiles_variant_as_the_cycle_does(seed: int) -> None:
    rng = random.Random(seed)
    raw = []
    for i in range(rng.randint(2, 7)):
        n = node(f"n{i}", rng.choice(["high", "low", None]))
        cpu, memory = rng.choice([2, 4, 8]), rng.choice([4, 16, 64])
        n["status"] = {"allocatable": {"cpu": str(cpu), "memory": f"{memory}Gi", "pods": "110"}}
        raw.append(n)
    world_nodes = [node_info(n) for n in raw]
    tallies = {n.name: UsageTally() for n in world_nodes}
    world = World(world_nodes, tallies, PRE_136, NETQOS_TARGET)
    new = pod("shop", "new", QOS)
    new["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m", "memory": rng.choice(["1Gi", "8Gi"])}}
    view = dataclasses.replace(pod_info(new), preferred=default_policy().rules[0].preferences)
    for _ in range(8):
        predictor = world.predictor(view)
        usage = {n.name: world.usage[i] for i, n in enumerate(world.nodes)}
        assert predictor.predicted() == sorted(cycle.rank(view, world.nodes, usage, PRE_136).predicted)
        mover = pod("shop", "m", {})
        mover["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": rng.choice(["250m", "1"]), "memory": rng.choice(["512Mi", "6Gi"])}
        }
        world.move(rng.randrange(len(world.nodes)), pod_info(mover), remove=False)


# --- the fast nodes: the policy's own top-scoring values ----------------------------------------------

TIERED = b"""
apiVersion: netqos.io/v1alpha1
kind: NetQoSPolicy
rules:
- name: tiers
  podSelector:
    matchLabels:
      qos: latency-sensitive
  nodeScore:
    key: example.com/tier
    scores:
    - {value: gold, score: 100}
    - {value: platinum, score: 100}
    - {value: bronze, score: 0}
    unlistedScore: 10
"""


def test_the_fast_nodes_are_the_policys_top_scoring_values() -> None:
    from webhook.policy_file import policy_from_bytes
    from webhook.scheduler.plugins.netqos import fast_target

    assert str(fast_target(default_policy())) == "net=high"
    tiered = fast_target(policy_from_bytes(TIERED, "tiers.yaml"))
    assert (tiered.key, tiered.values) == ("example.com/tier", frozenset({"gold", "platinum"}))
    assert str(tiered) == "example.com/tier in (gold,platinum)"


def test_rebalance_moves_pods_to_the_policys_fast_nodes_not_to_net_high() -> None:
    from webhook.policy_file import policy_from_bytes

    policy = policy_from_bytes(TIERED, "tiers.yaml")
    cluster = rebalance.Inventory(policy, rebalance.Options(now=NOW, min_replicas=1))
    gold = sized(node("gold-1"), **{"example.com/tier": "gold"})
    high = sized(node("high-1", "high"))
    slow = sized(node("slow", "low"), **{"example.com/tier": "bronze"})
    for n in (gold, high, slow):
        cluster.add_node(n)
    for p in (stranded(), sibling()):
        cluster.add_pod(p)
    assert cluster.fast == {"gold-1"}
