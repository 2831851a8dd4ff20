"""The project's claim: the stock scheduler, fed the affinity the webhook injects, ranks nodes as the
NetQoS plugin did. Every pod goes through `admission.review` and its patch (`explain.explain`), so
these tests hold for what /mutate sends to the API server, not for the policy in the abstract."""

from __future__ import annotations

import itertools

import pytest

from harness.pods import PAUSE
from harness.pods import pod as pod_of
from tests.fixtures import REPO
from webhook.explain import explain
from webhook.policy_file import default_policy, load_policy
from webhook.scheduler.model import Node, Taint
from webhook.scheduler.registry import NODE_AFFINITY

NET_VALUES = ("high", "low", None, "medium")  # None: the node has no `net` label
UNTOLERATED = Taint("dedicated", "db", "NoSchedule")


def node(name: str, net: str | None, feasible: bool) -> Node:
    labels = {"kubernetes.io/hostname": name} | ({} if net is None else {"net": net})
    return Node(name, labels, () if feasible else (UNTOLERATED,))


def node_sets() -> list[tuple[Node, ...]]:
    """Every multiset of one to three nodes over (net value x feasible or tainted)."""
    kinds = list(itertools.product(NET_VALUES, (True, False)))
    sets = []
    for size in (1, 2, 3):
        for combo in itertools.combinations_with_replacement(kinds, size):
            sets.append(tuple(node(f"n{i}", net, ok) for i, (net, ok) in enumerate(combo)))
    return sets


def set_id(nodes: tuple[Node, ...]) -> str:
    return ",".join(f"{n.labels.get('net', 'unlabelled')}{'' if not n.taints else '(tainted)'}" for n in nodes)


def pod(labels: dict, annotations: dict | None = None, preferred: list | None = None) -> dict:
    return pod_of(labels, annotations or {}, containers=[PAUSE], preferred=preferred or None)


LATENCY_SENSITIVE = {"qos": "latency-sensitive"}
POLICY = default_policy()
CLASSIC = load_policy(REPO / "deploy/examples/policies/classic.yaml")
NODE_SETS = node_sets()


def order(scores: dict[str, int]) -> set[tuple[str, str, int]]:
    """The ranking as pairwise comparisons: equal rankings have equal comparison sets."""

    def cmp(a: int, b: int) -> int:
        return (a > b) - (a < b)

    return {(a, b, cmp(scores[a], scores[b])) for a in scores for b in scores}


@pytest.mark.parametrize(
    "labels", [LATENCY_SENSITIVE, {"qos": "batch"}, {}], ids=["latency-sensitive", "qos=batch", "unlabelled"]
)
@pytest.mark.parametrize("nodes", NODE_SETS, ids=set_id)
def test_normalised_node_affinity_ranks_feasible_nodes_as_the_plugin_does(labels, nodes):
    report = explain(POLICY, pod(labels), nodes)
    feasible = [n for n in report.ranking.nodes if n.feasible]
    affinity = {n.name: n.affinity_normalized for n in feasible}
    plugin = {n.name: n.netqos_score for n in feasible}
    assert order(affinity) == order(plugin)
    assert report.ranking.affinity_choice == report.ranking.netqos_choice


@pytest.mark.parametrize("nodes", NODE_SETS, ids=set_id)
def test_weighted_node_affinity_differs_between_nodes_exactly_as_the_plugin_when_a_net_high_node_is_feasible(nodes):
    report = explain(POLICY, pod(LATENCY_SENSITIVE), nodes)
    feasible = [n for n in report.ranking.nodes if n.feasible]
    weight = report.ranking.weights[NODE_AFFINITY]
    # The stock scheduler's NodeAffinity (weight 2) minus the plugin's score (weight 1): one
    # constant over the feasible nodes means the same differences, so the same totals' order.
    offsets = {n.affinity_normalized * weight - n.netqos_score for n in feasible}
    if any(n.net == "high" for n in feasible) or all(n.net == "low" for n in feasible):
        assert len(offsets) <= 1
    else:
        # Without a net=high node the best feasible node (unlabelled or another value) is
        # normalised against itself: 110 / 100 -> 100 / 90, a lead of 20 over net=low after the
        # weight, where the plugin's is 10. Same order, a different difference.
        assert {n.affinity_normalized for n in feasible if n.net != "low"} == {100}
        assert {n.affinity_normalized for n in feasible if n.net == "low"} <= {90}


@pytest.mark.parametrize("nodes", NODE_SETS, ids=set_id)
def test_the_classic_policy_gives_the_plugins_100_10_0_exactly_when_a_net_high_node_is_feasible(nodes):
    report = explain(CLASSIC, pod(LATENCY_SENSITIVE), nodes)
    feasible = [n for n in report.ranking.nodes if n.feasible]
    normalised = [n.affinity_normalized for n in feasible]
    plugin = [n.netqos_score for n in feasible]
    if any(n.net == "high" for n in feasible):
        assert normalised == plugin
    elif any(n.net != "low" for n in feasible):
        # Without a net=high node the best feasible node (unlabelled or another value) is
        # normalised to 100 where the plugin gives 10: same order, different numbers.
        assert normalised != plugin
        assert max(normalised) == 100 and max(plugin) == 10
    else:  # only net=low nodes (or none) are feasible: 0 everywhere on both sides
        assert normalised == plugin == [0] * len(feasible)


OWN_TERMS = [
    {"weight": 50, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
    {"weight": 30, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}},
]
NODES_WITH_OTHER_LABELS = [
    Node(
        f"{net or 'unlabelled'}-{zone}-{disk}",
        ({} if net is None else {"net": net}) | {"zone": zone} | ({"disk": "ssd"} if disk else {}),
    )
    for net in NET_VALUES
    for zone in ("a", "b")
    for disk in (True, False)
]
# Beside own terms of which one node gets at most 80: the table without the constant, scaled by
# 80 / 200 (36 on net In [high], 4 on net NotIn [low]).
ADDED = {"high": 40, "low": 0, None: 4, "medium": 4}


def raw_scores(report) -> dict[str, int]:
    return {n.name: n.affinity_raw for n in report.ranking.nodes}


def test_the_injected_terms_add_the_table_scaled_to_a_pods_preferences_on_other_keys():
    own = explain(POLICY, pod({}, preferred=OWN_TERMS), NODES_WITH_OTHER_LABELS)  # not selected: own terms only
    mutated = explain(POLICY, pod(LATENCY_SENSITIVE, preferred=OWN_TERMS), NODES_WITH_OTHER_LABELS)
    assert mutated.mutation.injected == ("netqos",)
    before, after = raw_scores(own), raw_scores(mutated)
    for n in NODES_WITH_OTHER_LABELS:
        assert after[n.name] - before[n.name] == ADDED[n.labels.get("net")], n.name
    assert mutated.ranking.affinity_choice == ("high-a-True",)


def test_a_pods_own_preferences_can_outweigh_the_plugins_choice_and_explain_says_so():
    zone_a = [{"weight": 100, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}]
    nodes = [Node("high-b", {"net": "high", "zone": "b"}), Node("medium-a", {"net": "medium", "zone": "a"})]
    report = explain(POLICY, pod(LATENCY_SENSITIVE, preferred=zone_a), nodes)
    assert raw_scores(report) == {"high-b": 50, "medium-a": 105}  # 45 + 5, 100 + 5
    assert report.ranking.affinity_choice == ("medium-a",)
    assert report.ranking.netqos_choice == ("high-b",)
    assert not report.choices_match()


def test_an_opted_out_pod_gets_nothing_added():
    opted_out = {"netqos.io/inject": "false"}
    plain = explain(POLICY, pod({}, preferred=OWN_TERMS), NODES_WITH_OTHER_LABELS)
    report = explain(POLICY, pod(LATENCY_SENSITIVE, opted_out, preferred=OWN_TERMS), NODES_WITH_OTHER_LABELS)
    assert report.mutation.patch == () and report.added_terms == ()
    assert raw_scores(report) == raw_scores(plain)
    bare = explain(POLICY, pod(LATENCY_SENSITIVE, opted_out), NODES_WITH_OTHER_LABELS)
    assert all(n.affinity_raw == 0 for n in bare.ranking.nodes)
    # The plugin knew nothing of the annotation: explain shows the two choices part ways.
    assert not bare.choices_match()


@pytest.mark.parametrize("nodes", NODE_SETS, ids=set_id)
def test_with_equal_resources_the_netqos_scheduler_ranks_by_the_plugins_table(nodes):
    """The counterfactual's totals differ between nodes only by the plugin's raw score when every
    other plugin scores the nodes alike; and then the stock scheduler's total follows NodeAffinity."""
    report = explain(POLICY, pod(LATENCY_SENSITIVE), nodes)
    feasible = [n.name for n in report.ranking.nodes if n.feasible]
    netqos = {n.name: n.total for n in report.netqos.nodes if n.name in feasible}
    plugin = {n.name: n.netqos_score for n in report.ranking.nodes if n.name in feasible}
    if feasible:
        base_total, base_score = min(netqos.values()), min(plugin.values())
        assert {k: v - base_total for k, v in netqos.items()} == {k: v - base_score for k, v in plugin.items()}
    assert report.netqos.predicted == report.ranking.netqos_choice
    assert report.ranking.predicted == report.ranking.affinity_choice
    assert report.predictions_match()


def test_for_a_pod_with_own_terms_explain_gives_the_scale_and_how_far_the_totals_are_from_the_plugins():
    report = explain(POLICY, pod(LATENCY_SENSITIVE, preferred=OWN_TERMS), NODES_WITH_OTHER_LABELS)
    notes = "\n".join(report.notes)
    assert "beside the pod's own preferred terms, which give one node at most 80 points" in notes
    assert "scaled to 80 x 1 / (100 x 2) per point of the table" in notes
    offsets = {
        n.total - netqos.total for n, netqos in zip(report.ranking.feasible, report.netqos.feasible, strict=True)
    }
    assert f"TOTAL - NETQOS TOTAL ranges from {min(offsets)} to {max(offsets)}" in notes
