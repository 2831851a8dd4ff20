"""`status` classes nodes by the policy's score table: its key, its top-scoring values ("high")
and its lowest-scoring ones below the unlisted score ("low"), as `rebalance` targets them. The
class names, `-o json`'s keys, stay the same whatever the key; the texts name the target as a
label selector."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from harness.kubeapi import pod
from tests.fixtures import FIXTURES
from tests.unit.test_status_cost import cluster_view
from webhook import placement, status
from webhook.commands.status import render_table, to_json
from webhook.policy import Policy
from webhook.policy_file import compile_policy, default_policy, policy_from_bytes
from webhook.scheduler.model import Target

QOS = {"qos": "latency-sensitive"}
ALLOCATABLE = {"cpu": "2", "memory": "4Gi", "pods": "10"}


def tier_policy(scores: dict[str, int], unlisted: int = 10) -> Policy:
    table = {"key": "tier", "scores": [{"value": v, "score": s} for v, s in scores.items()], "unlistedScore": unlisted}
    rule = {"name": "tier", "podSelector": {"matchLabels": QOS}, "nodeScore": table}
    return compile_policy({"rules": [rule]}, "tier.yaml")


def labelled(name: str, **labels: str) -> dict[str, Any]:
    meta = {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {}, "status": {"allocatable": ALLOCATABLE}}


# One node of each kind, labelled with both keys at odds, so that which key is read shows.
NODES = [
    labelled("gold-1", tier="gold", net="low"),
    labelled("platinum-1", tier="platinum"),
    labelled("silver-1", tier="silver", net="high"),
    labelled("bronze-1", tier="bronze", net="high"),
    labelled("bare-1", net="high"),
]


def analyse(policy: Policy, nodes: list[dict[str, Any]]) -> status.Report:
    # a pod bound to each node, and one pending; 3 CPUs fit no node, so each names its reasons
    pods = [pod("shop", f"on-{n['metadata']['name']}", QOS, n["metadata"]["name"]) for n in nodes]
    pods.append(pod("shop", "pending-1", QOS))
    for p in pods:
        p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "3"}}
    view = dataclasses.replace(cluster_view(nodes, pods), policy=policy)
    return status.analyse(view)


@pytest.mark.parametrize(
    "policy, target, placement, off_target",
    [
        # the default policy: net=high; net=low is "low"
        (
            default_policy(),
            "net=high",
            {"high": 3, "other": 0, "unlabelled": 1, "low": 1, "pending": 1},
            {"on-gold-1": "low", "on-platinum-1": None},
        ),
        # tier gold=100, bronze=0: the same classes by the tier label
        (
            tier_policy({"gold": 100, "bronze": 0}),
            "tier=gold",
            {"high": 1, "other": 2, "unlabelled": 1, "low": 1, "pending": 1},
            {"on-bronze-1": "bronze", "on-bare-1": None, "on-silver-1": "silver"},
        ),
        # two top values: either is the target
        (
            tier_policy({"gold": 100, "platinum": 100, "silver": 50, "bronze": 0}),
            "tier in (gold,platinum)",
            {"high": 2, "other": 1, "unlabelled": 1, "low": 1, "pending": 1},
            {"on-silver-1": "silver", "on-bronze-1": "bronze"},
        ),
        # no listed value below the unlisted score: no node is "low"
        (
            tier_policy({"gold": 100, "bronze": 10}),
            "tier=gold",
            {"high": 1, "other": 3, "unlabelled": 1, "low": 0, "pending": 1},
            {"on-bronze-1": "bronze"},
        ),
    ],
)
def test_status_classes_nodes_by_the_policys_score_table(policy, target, placement, off_target):
    report = analyse(policy, NODES)
    out = to_json(report)
    assert {k: v for k, v in out["placement"].items() if k != "movable"} == placement
    assert out["high_nodes"] == placement["high"]
    off = {p["name"]: p for p in out["not_on_high"]}
    assert len(off) == sum(placement.values()) - placement["high"]
    for name, value in off_target.items():
        assert off[name]["net"] == value  # the node's value of the target's key, under the same JSON key
        assert off[name]["why"] == [f"{placement['high']}/{placement['high']} {target} node(s): Insufficient cpu"]
    table = render_table(report)
    assert f"NOT ON A {target} NODE" in table
    key = target.split("=")[0].split(" ")[0]
    for name, value in off_target.items():
        assert f"on {name.removeprefix('on-')} ({key}={value or '<none>'})" in table


@pytest.mark.parametrize(
    "policy, label",
    [
        (default_policy(), "net=high"),
        (tier_policy({"gold": 100, "bronze": 0}), "tier=gold"),
        (tier_policy({"platinum": 100, "gold": 100, "bronze": 0}), "tier in (gold,platinum)"),
    ],
)
def test_status_names_the_policys_target_when_no_node_carries_it(policy, label):
    report = analyse(policy, [labelled("plain-1")])
    first = label if "=" in label else "tier=gold"
    assert (
        f"no node is labelled {label}: selected pods cannot be placed on a fast network; "
        f"label the fast-network nodes (kubectl label node NAME {first})"
    ) in report.problems
    assert report.high_nodes == 0


BATCH = {"qos": "batch"}
TWO_TABLES = policy_from_bytes((FIXTURES / "policy-two-tables.yaml").read_bytes(), "policy-two-tables.yaml")


def test_each_rules_pods_are_placed_against_that_rules_own_best_class():
    """netqos scores net=high best, batch net=low: a batch pod on a net=low node is where its rule
    asks, one on a net=high node is on its rule's lowest class, and the reasons name net=low."""
    nodes = [labelled("fast-1", net="high"), labelled("low-1", net="low"), labelled("plain-1")]
    pods = [
        pod("shop", "web-on-fast", QOS, "fast-1"),
        pod("shop", "web-on-low", QOS, "low-1"),
        pod("shop", "batch-on-low", BATCH, "low-1"),
        pod("shop", "batch-on-fast", BATCH, "fast-1"),
        pod("shop", "batch-on-plain", BATCH, "plain-1"),
    ]
    report = status.analyse(dataclasses.replace(cluster_view(nodes, pods), policy=TWO_TABLES))
    out = to_json(report)
    assert {k: v for k, v in out["placement"].items() if k != "movable"} == {
        "high": 2,
        "other": 0,
        "unlabelled": 1,
        "low": 2,
        "pending": 0,
    }
    assert out["high_nodes"] == 2  # fast-1 for netqos, low-1 for batch
    assert [(p["name"], p["net"], p["target"], p["why"]) for p in out["not_on_high"]] == [
        ("web-on-low", "low", "net=high", [placement.feasible_now(Target("net", frozenset({"high"})))]),
        ("batch-on-fast", "high", "net=low", [placement.feasible_now(Target("net", frozenset({"low"})))]),
        ("batch-on-plain", None, "net=low", [placement.feasible_now(Target("net", frozenset({"low"})))]),
    ]
    table = render_table(report)
    assert "NOT ON A NODE OF THEIR RULE'S BEST CLASS" in table
    assert "  shop/batch-on-fast on fast-1 (net=high) (wants net=low): a net=low node is feasible now" in table
    assert "no node is labelled" not in table


def test_a_rule_whose_best_class_no_node_carries_is_named_alone():
    nodes = [labelled("fast-1", net="high")]
    report = status.analyse(
        dataclasses.replace(cluster_view(nodes, [pod("shop", "batch-1", BATCH, "fast-1")]), policy=TWO_TABLES)
    )
    labelled_problems = [p for p in report.problems if p.startswith("no node is labelled")]
    assert labelled_problems == [
        "no node is labelled net=low: selected pods cannot be placed on a fast network; label the fast-network "
        "nodes (kubectl label node NAME net=low)"
    ]
