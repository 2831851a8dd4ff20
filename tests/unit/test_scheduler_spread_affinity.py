"""PodTopologySpread and InterPodAffinity, case by case as kube-scheduler v1.36.3's own tests state
them (pkg/scheduler/framework/plugins/podtopologyspread/scoring_test.go TestPodTopologySpreadScore,
filtering_test.go, interpodaffinity/{filtering_test.go,scoring_test.go}): the same pods, nodes and
expected scores or reasons, run through `webhook.scheduler.plugins.podtopologyspread`,
`interpodaffinity` and the cycle."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from webhook.scheduler import cycle
from webhook.scheduler.model import (
    AffinityTerm,
    Node,
    PodAffinity,
    PodInfo,
    Snapshot,
    SpreadConstraint,
    Taint,
    UsageTally,
    WeightedAffinityTerm,
)
from webhook.scheduler.plugins import interpodaffinity, podtopologyspread
from webhook.scheduler.plugins.podtopologyspread import NORMALIZE as SPREAD_NORMALIZE
from webhook.scheduler.read import Selectors, pod_info, selectors_from_api
from webhook.selector import LabelSelector

HOST = "kubernetes.io/hostname"


def selector(*keys: str) -> LabelSelector:
    """A selector of `key Exists` for each key (the Go tests' fooSelector, barSelector)."""
    from webhook.affinity import Requirement

    return LabelSelector(match_expressions=tuple(Requirement(k, "Exists", ()) for k in keys))


def incoming(labels: dict[str, str], *spreads: SpreadConstraint, **extra: Any) -> PodInfo:
    return PodInfo("p", labels, {}, None, (), (), spread=spreads, **extra)


def existing(node: str, labels: dict[str, str], namespace: str = "default", **extra: Any) -> PodInfo:
    return PodInfo(f"e-{node}", labels, {}, None, (), (), node_name=node, namespace=namespace, **extra)


def node(name: str, **labels: str) -> Node:
    return Node(name, labels)


def snapshot(feasible: list[Node], failed: list[Node], pods: list[PodInfo]) -> Snapshot:
    tallies = {n.name: UsageTally() for n in (*feasible, *failed)}
    for p in pods:
        if p.node_name in tallies:
            tallies[p.node_name].add(p)
    return Snapshot([*feasible, *failed], {k: t.usage() for k, t in tallies.items()}, feasible)


def spread_scores(pod: PodInfo, snap: Snapshot) -> dict[str, int]:
    state = podtopologyspread.prescore(pod, snap)
    assert state is not None
    raw = [podtopologyspread.score(state, n, snap.usage_of(n)) for n in snap.feasible]
    return dict(zip((n.name for n in snap.feasible), SPREAD_NORMALIZE(raw), strict=True))


def pods_on(counts: dict[str, int], labels: dict[str, str] | None = None) -> list[PodInfo]:
    return [existing(n, labels or {"foo": ""}) for n, c in counts.items() for _ in range(c)]


HOSTS = [node(n, **{HOST: n}) for n in ("node-a", "node-b", "node-c", "node-d")]

SCORE_CASES = [
    # (Go test name, pod's constraint(s), feasible nodes, failed nodes, existing pods, want)
    (
        "one constraint on node, all 4 nodes are candidates, maxSkew=2",
        [SpreadConstraint(2, HOST, "ScheduleAnyway", selector("foo"))],
        HOSTS,
        [],
        pods_on({"node-a": 2, "node-b": 1, "node-d": 3}),
        {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16},
    ),
    (
        "one constraint on node, all 4 nodes are candidates, maxSkew=3",
        [SpreadConstraint(3, HOST, "ScheduleAnyway", selector("foo"))],
        HOSTS,
        [],
        pods_on({"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}),
        {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
    ),
    (
        "one constraint on node, 3 out of 4 nodes are candidates",
        [SpreadConstraint(1, HOST, "ScheduleAnyway", selector("foo"))],
        [node(n, **{HOST: n}) for n in ("node-a", "node-b", "node-x")],
        [node("node-y", **{HOST: "node-y"})],
        pods_on({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}),
        {"node-a": 33, "node-b": 83, "node-x": 100},
    ),
    (
        "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
        [SpreadConstraint(1, HOST, "ScheduleAnyway", selector("foo"))],
        [node("node-a", **{HOST: "node-a"}), node("node-b", n="node-b"), node("node-x", **{HOST: "node-x"})],
        [node("node-y", **{HOST: "node-y"})],
        pods_on({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}),
        {"node-a": 16, "node-b": 0, "node-x": 100},
    ),
    (
        "one constraint on zone, 3 out of 4 nodes are candidates",
        [SpreadConstraint(1, "zone", "ScheduleAnyway", selector("foo"))],
        [node("node-a", zone="zone1"), node("node-b", zone="zone1"), node("node-x", zone="zone2")],
        [node("node-y", zone="zone2")],
        pods_on({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}),
        {"node-a": 75, "node-b": 75, "node-x": 100},
    ),
    (
        "two Constraints on zone and node, 2 out of 4 nodes are candidates",
        [
            SpreadConstraint(1, "zone", "ScheduleAnyway", selector("foo")),
            SpreadConstraint(1, HOST, "ScheduleAnyway", selector("foo")),
        ],
        [node("node-a", zone="zone1", **{HOST: "node-a"}), node("node-x", zone="zone2", **{HOST: "node-x"})],
        [node("node-b", zone="zone1", **{HOST: "node-b"}), node("node-y", zone="zone2", **{HOST: "node-y"})],
        pods_on({"node-a": 2, "node-b": 1, "node-x": 2, "node-y": 4}),
        {"node-a": 100, "node-x": 63},
    ),
]


@pytest.mark.parametrize("name, spreads, feasible, failed, pods, want", SCORE_CASES, ids=[c[0] for c in SCORE_CASES])
def test_spread_scores_as_the_go_tests_want(name, spreads, feasible, failed, pods, want) -> None:
    assert spread_scores(incoming({"foo": ""}, *spreads), snapshot(feasible, failed, pods)) == want


def test_system_defaulting_spreads_the_pods_a_service_selects_by_hostname_when_nodes_have_no_zone() -> None:
    """Go: "system defaulting, nodes don't have zone, pods match service": the same scores as one
    hostname constraint; the Service's selector is the pod's default spread selector."""
    raw = {"metadata": {"name": "p", "labels": {"foo": ""}}, "spec": {"containers": [{"name": "c"}]}}
    selectors = selectors_from_api([{"metadata": {"namespace": "default"}, "spec": {"selector": {"foo": ""}}}])
    pod = pod_info(raw, selectors)
    assert pod.default_spread is not None
    snap = snapshot(HOSTS, [], pods_on({"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}))
    assert spread_scores(pod, snap) == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}


def test_a_pod_no_service_or_controller_selects_has_no_default_constraints() -> None:
    raw = {"metadata": {"name": "p", "labels": {"foo": ""}}, "spec": {"containers": [{"name": "c"}]}}
    other = selectors_from_api([{"metadata": {"namespace": "default"}, "spec": {"selector": {"bar": ""}}}])
    assert pod_info(raw, other).default_spread is None
    assert podtopologyspread.prescore(pod_info(raw, Selectors()), snapshot(HOSTS, [], [])) is None


def test_a_replicasets_selector_is_added_to_the_services() -> None:
    """helper.DefaultSelector: the Service's labels and the ReplicaSet's selector, ANDed."""
    raw = {
        "metadata": {
            "name": "p",
            "namespace": "shop",
            "labels": {"app": "web", "pod-template-hash": "h1"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-h1", "controller": True}],
        },
        "spec": {"containers": [{"name": "c"}]},
    }
    rs = {
        "kind": "ReplicaSet",
        "metadata": {"namespace": "shop", "name": "web-h1"},
        "spec": {"selector": {"matchLabels": {"app": "web", "pod-template-hash": "h1"}}},
    }
    svc = {"metadata": {"namespace": "shop"}, "spec": {"selector": {"app": "web"}}}
    found = pod_info(raw, selectors_from_api([svc], [rs])).default_spread
    assert found is not None
    assert found.matches({"app": "web", "pod-template-hash": "h1"})
    assert not found.matches({"app": "web", "pod-template-hash": "h2"})  # an older ReplicaSet's pods


# --- PodTopologySpread's Filter (filtering_test.go TestSingleConstraint) --------------------------


ZONES = [
    node("node-a", zone="zone1", **{HOST: "node-a"}),
    node("node-b", zone="zone1", **{HOST: "node-b"}),
    node("node-x", zone="zone2", **{HOST: "node-x"}),
    node("node-y", zone="zone2", **{HOST: "node-y"}),
]

FILTER_CASES = [
    # (Go test name, constraint, existing pods, nodes that pass)
    (
        "no existing pods",
        SpreadConstraint(1, "zone", "DoNotSchedule", selector("foo")),
        [],
        {"node-a", "node-b", "node-x", "node-y"},
    ),
    (
        "pods spread across zones as 3/3, all nodes fit",
        SpreadConstraint(1, "zone", "DoNotSchedule", selector("foo")),
        pods_on({"node-a": 1, "node-b": 2, "node-x": 2, "node-y": 1}),
        {"node-a", "node-b", "node-x", "node-y"},
    ),
    (
        "pods spread across zones as 3/1, only zone2 fits",
        SpreadConstraint(1, "zone", "DoNotSchedule", selector("foo")),
        pods_on({"node-a": 1, "node-b": 2, "node-x": 1}),
        {"node-x", "node-y"},
    ),
    (
        "pods spread across nodes as 2/1/0/3, only the empty node fits (1 + 1 - 0 > maxSkew 1 elsewhere)",
        SpreadConstraint(1, HOST, "DoNotSchedule", selector("foo")),
        pods_on({"node-a": 2, "node-b": 1, "node-y": 3}),
        {"node-x"},
    ),
    (
        "minDomains 3 with 2 zones: the global minimum counts as 0",
        SpreadConstraint(1, "zone", "DoNotSchedule", selector("foo"), min_domains=3),
        pods_on({"node-a": 1, "node-x": 1}),
        set(),
    ),
]


@pytest.mark.parametrize("name, constraint, pods, fits", FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
def test_spread_filters_as_the_go_tests_want(name, constraint, pods, fits) -> None:
    check = podtopologyspread.prefilter(incoming({"foo": ""}, constraint), snapshot(ZONES, [], pods))
    assert check is not None
    assert {n.name for n in ZONES if not check(n)} == fits
    rejected = {check(n) for n in ZONES if check(n)}
    assert rejected <= {(podtopologyspread.REASON_CONSTRAINTS,)}


def test_a_node_without_the_topology_key_fails_with_the_missing_label_reason() -> None:
    check = podtopologyspread.prefilter(
        incoming({"foo": ""}, SpreadConstraint(1, "zone", "DoNotSchedule", selector("foo"))),
        snapshot([*ZONES, node("bare")], [], []),
    )
    assert check is not None and check(node("bare")) == (podtopologyspread.REASON_MISSING_LABEL,)


def test_node_taints_policy_honor_leaves_tainted_nodes_out_of_the_domains() -> None:
    """A zone whose only node the pod does not tolerate is no domain: its 0 is not the minimum."""
    tainted = Node("node-t", {"zone": "zone3"}, (Taint("k", "v", "NoSchedule"),))
    honor = SpreadConstraint(1, "zone", "DoNotSchedule", selector("foo"), node_taints_policy="Honor")
    ignore = dataclasses.replace(honor, node_taints_policy="Ignore")
    pods = pods_on({"node-a": 1, "node-x": 1})
    nodes = [*ZONES, tainted]
    honored = podtopologyspread.prefilter(incoming({"foo": ""}, honor), snapshot(nodes, [], pods))
    ignored = podtopologyspread.prefilter(incoming({"foo": ""}, ignore), snapshot(nodes, [], pods))
    assert honored is not None and ignored is not None
    assert not honored(ZONES[0])  # zones 1 and 2 hold one pod each: the minimum is 1
    assert ignored(ZONES[0]) == (podtopologyspread.REASON_CONSTRAINTS,)  # zone3 counts, with 0


# --- InterPodAffinity -------------------------------------------------------------------------------


def term(key: str, *labels: str, namespaces: frozenset[str] = frozenset({"default"})) -> AffinityTerm:
    return AffinityTerm(LabelSelector(tuple((k, v) for k, v in (x.split("=") for x in labels))), key, namespaces)


REGIONS = [node("node1", region="China"), node("node2", region="India"), node("node3", az="az1")]


def test_preferred_affinity_scores_the_region_with_a_matching_pod_highest() -> None:
    """Go: "Affinity: pod that matches topology key & pods in nodes will get high score comparing to
    others which doesn't match either pods in nodes or in topology key"."""
    stay = PodAffinity(preferred=(WeightedAffinityTerm(5, term("region", "security=S1")),))
    pod = PodInfo("p", {"security": "S1"}, {}, None, (), (), pod_affinity=stay)
    pods = [
        existing("node1", {"security": "S1"}),
        existing("node2", {"security": "S2"}),
        existing("node3", {"security": "S1"}),
    ]
    ranking = cycle.rank(pod, REGIONS, snapshot(REGIONS, [], pods).usage)
    assert {n.name: n.scores["InterPodAffinity"] for n in ranking.nodes} == {"node1": 100, "node2": 0, "node3": 0}


def test_an_existing_pods_required_anti_affinity_keeps_a_matching_pod_off_its_domain() -> None:
    anti = PodAffinity(required_anti=(term("region", "app=web"),))
    pods = [existing("node1", {"app": "db"}, pod_affinity=anti)]
    pod = PodInfo("p", {"app": "web"}, {}, None, (), ())
    ranking = cycle.rank(pod, REGIONS, snapshot(REGIONS, [], pods).usage)
    assert {n.name: n.reasons for n in ranking.nodes} == {
        "node1": (interpodaffinity.REASON_EXISTING_ANTI_AFFINITY,),
        "node2": (),
        "node3": (),
    }


def test_required_anti_affinity_keeps_the_pod_off_hosts_with_a_sibling() -> None:
    hosts = [node(n, **{HOST: n}) for n in ("h1", "h2", "h3")]
    anti = PodAffinity(required_anti=(term(HOST, "app=web"),))
    pod = PodInfo("p", {"app": "web"}, {}, None, (), (), pod_affinity=anti)
    ranking = cycle.rank(pod, hosts, snapshot(hosts, [], [existing("h2", {"app": "web"})]).usage)
    assert [n.name for n in ranking.feasible] == ["h1", "h3"]
    assert ranking.nodes[1].reasons == (interpodaffinity.REASON_ANTI_AFFINITY,)


def test_required_affinity_with_no_match_anywhere_lets_the_first_pod_of_its_group_in() -> None:
    """satisfyPodAffinity: no pod matches the term anywhere and the pod matches it itself."""
    hosts = [node(n, **{HOST: n}) for n in ("h1", "h2")]
    with_self = PodInfo(
        "p", {"app": "web"}, {}, None, (), (), pod_affinity=PodAffinity(required=(term(HOST, "app=web"),))
    )
    other = dataclasses.replace(with_self, labels={"app": "other"})
    assert len(cycle.rank(with_self, hosts).feasible) == 2
    assert {n.reasons for n in cycle.rank(other, hosts).nodes} == {(interpodaffinity.REASON_AFFINITY,)}


def test_the_hard_affinity_of_an_existing_pod_scores_the_incoming_pod_at_weight_1() -> None:
    """The existing pod's required affinity, weighed hardPodAffinityWeight 1: its region scores."""
    pods = [existing("node1", {"app": "db"}, pod_affinity=PodAffinity(required=(term("region", "app=web"),)))]
    pod = PodInfo("p", {"app": "web"}, {}, None, (), ())
    ranking = cycle.rank(pod, REGIONS, snapshot(REGIONS, [], pods).usage)
    assert {n.name: n.scores["InterPodAffinity"] for n in ranking.nodes} == {"node1": 100, "node2": 0, "node3": 0}


def test_terms_in_another_namespace_do_not_match() -> None:
    pods = [existing("node1", {"app": "db"}, pod_affinity=PodAffinity(required_anti=(term("region", "app=web"),)))]
    pod = PodInfo("p", {"app": "web"}, {}, None, (), (), namespace="other")
    assert len(cycle.rank(pod, REGIONS, snapshot(REGIONS, [], pods).usage).feasible) == 3


# Terminating pods (deletionTimestamp set): InterPodAffinity counts them, as NodeInfo.Pods holds them
# until they are deleted and neither filtering.go nor scoring.go (v1.36.3) skips one; PodTopologySpread
# leaves them out (podtopologyspread/common.go countPodsMatchSelector).
H1_H2 = [node(n, **{HOST: n}) for n in ("h1", "h2")]
WEB_ANTI = PodAffinity(required_anti=(term(HOST, "app=web"),))
WEB_AFFINITY = PodAffinity(required=(term(HOST, "app=web"),))
WEB_PREFERRED = PodAffinity(preferred=(WeightedAffinityTerm(10, term(HOST, "app=web")),))
TERMINATING_CASES = [
    # (case, the incoming pod's labels and terms, feasible nodes, InterPodAffinity scores)
    ("its required anti-affinity keeps it off a terminating sibling's host", ({"app": "web"}, WEB_ANTI), ["h2"], None),
    ("its required affinity is met by a terminating pod's host only", ({"app": "db"}, WEB_AFFINITY), ["h1"], None),
    ("its preferred affinity scores a terminating pod's host", ({"app": "db"}, WEB_PREFERRED), ["h1", "h2"], [100, 0]),
]


@pytest.mark.parametrize(
    ("case", "pod", "feasible", "scores"), TERMINATING_CASES, ids=[c[0] for c in TERMINATING_CASES]
)
def test_inter_pod_affinity_counts_a_terminating_pod_as_kube_scheduler_does(case, pod, feasible, scores) -> None:
    labels, affinity = pod
    gone = existing("h1", {"app": "web"}, terminating=True)
    ranking = cycle.rank(
        PodInfo("p", labels, {}, None, (), (), pod_affinity=affinity), H1_H2, snapshot(H1_H2, [], [gone]).usage
    )
    assert [n.name for n in ranking.feasible] == feasible
    if scores is not None:
        assert [n.scores["InterPodAffinity"] for n in ranking.nodes] == scores


def test_pod_topology_spread_leaves_a_terminating_pod_out_while_inter_pod_affinity_counts_it() -> None:
    gone = existing("h1", {"foo": ""}, terminating=True)
    usage = snapshot(H1_H2, [], [gone]).usage
    assert usage["h1"].count("default", selector("foo")) == 0
    assert dict(usage["h1"].terminating) == {("default", frozenset({("foo", "")})): 1}
