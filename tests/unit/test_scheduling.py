"""kube-scheduler semantics, one table per behaviour: selector operators, matchFields, required
affinity, taints and tolerations, the filter order, PreFilter, normalisation, the FitError text."""

from __future__ import annotations

import pytest

from harness.pods import pod
from webhook.affinity import (
    NodeSelectorTerm,
    PreferredTerm,
    Requirement,
    node_selector_matches,
    preferred_score,
)
from webhook.scheduler.cycle import Sampling, nodes_scored_at_most, rank
from webhook.scheduler.framework import default_normalize
from webhook.scheduler.model import Node, Taint, Toleration
from webhook.scheduler.plugins.netqos import netqos_score
from webhook.scheduler.plugins.nodeaffinity import REASON_NODE_AFFINITY, REASON_NOT_IN_PREFILTER, REASON_TERMS_CONFLICT
from webhook.scheduler.plugins.nodeunschedulable import REASON_UNSCHEDULABLE
from webhook.scheduler.plugins.tainttoleration import first_untolerated_taint
from webhook.scheduler.read import node_info, pod_info


def req(key: str, op: str, *values: str) -> Requirement:
    return Requirement(key, op, values)


# --- NodeSelectorRequirement operators -------------------------------------------------------

OPERATORS = [
    # (requirement, node labels, matches)
    (req("net", "In", "high"), {"net": "high"}, True),
    (req("net", "In", "high", "mid"), {"net": "mid"}, True),
    (req("net", "In", "high"), {"net": "low"}, False),
    (req("net", "In", "high"), {}, False),
    (req("net", "NotIn", "low"), {"net": "low"}, False),
    (req("net", "NotIn", "low"), {"net": "high"}, True),
    (req("net", "NotIn", "low"), {}, True),  # NotIn matches a node without the key
    (req("net", "Exists"), {"net": ""}, True),
    (req("net", "Exists"), {}, False),
    (req("net", "DoesNotExist"), {}, True),  # DoesNotExist matches a node without the key
    (req("net", "DoesNotExist"), {"net": "low"}, False),
    (req("gen", "Gt", "3"), {"gen": "5"}, True),
    (req("gen", "Gt", "3"), {"gen": "3"}, False),
    (req("gen", "Gt", "3"), {}, False),
    (req("gen", "Gt", "3"), {"gen": "five"}, False),
    (req("gen", "Gt", "3"), {"gen": "+5"}, True),  # strconv.ParseInt takes a sign
    (req("gen", "Gt", "3"), {"gen": " 5"}, False),  # ... but no spaces (Python's int() does)
    (req("gen", "Gt", "3"), {"gen": "1_0"}, False),  # ... nor underscores
    (req("gen", "Gt", "3"), {"gen": "9223372036854775808"}, False),  # ... nor beyond int64
    (req("gen", "Lt", "0"), {"gen": "-2"}, True),
    (req("gen", "Lt", "0"), {"gen": "0"}, False),
    # Requirements the API server rejects fail to parse in the scheduler: they match nothing.
    (req("net", "In"), {}, False),
    (req("net", "NotIn"), {}, False),
    (req("net", "Exists", "x"), {"net": "x"}, False),
    (req("net", "DoesNotExist", "x"), {}, False),
    (req("gen", "Gt", "1", "2"), {"gen": "5"}, False),
    (req("gen", "Gt", "one"), {"gen": "5"}, False),
    (req("net", "Equals", "high"), {"net": "high"}, False),
]


@pytest.mark.parametrize(
    "requirement, labels, expected", OPERATORS, ids=lambda x: repr(x) if isinstance(x, Requirement) else None
)
def test_a_requirement_matches_node_labels_as_kube_scheduler_does(requirement, labels, expected):
    assert NodeSelectorTerm((requirement,)).matches(labels, "node") is expected
    # A preferred term (what mutation injects, what the scheduler scores) matches the same nodes.
    assert PreferredTerm.of(1, requirement).matches(labels, "node") is expected


def test_the_requirements_of_one_term_are_anded():
    term = NodeSelectorTerm((req("net", "In", "high"), req("zone", "In", "a")))
    assert term.matches({"net": "high", "zone": "a"})
    assert not term.matches({"net": "high", "zone": "b"})


def test_a_term_with_no_expressions_and_no_fields_matches_nothing():
    assert not NodeSelectorTerm().matches({"net": "high"}, "node")
    assert not PreferredTerm.of(50).matches({"net": "high"})
    assert preferred_score([PreferredTerm(50, NodeSelectorTerm())], {"net": "high"}, "node") == 0


# --- matchFields ------------------------------------------------------------------------------

FIELDS = [
    # (term, node name, matches)
    (NodeSelectorTerm(fields=(req("metadata.name", "In", "n1"),)), "n1", True),
    (NodeSelectorTerm(fields=(req("metadata.name", "In", "n1"),)), "n2", False),
    (NodeSelectorTerm(fields=(req("metadata.name", "NotIn", "n1"),)), "n2", True),
    (NodeSelectorTerm(fields=(req("metadata.name", "NotIn", "n1"),)), "n1", False),
    # expressions AND fields
    (NodeSelectorTerm((req("net", "In", "high"),), (req("metadata.name", "In", "n1"),)), "n1", True),
    (NodeSelectorTerm((req("net", "In", "low"),), (req("metadata.name", "In", "n1"),)), "n1", False),
    # matchFields take In/NotIn with exactly one value; anything else fails to parse
    (NodeSelectorTerm(fields=(req("metadata.name", "In", "n1", "n2"),)), "n1", False),
    (NodeSelectorTerm(fields=(req("metadata.name", "Exists"),)), "n1", False),
    # a node without a name has no fields, and the scheduler then does not check matchFields
    (NodeSelectorTerm(fields=(req("metadata.name", "In", "n1"),)), "", True),
]


@pytest.mark.parametrize("term, name, expected", FIELDS)
def test_match_fields_compare_the_node_name(term, name, expected):
    assert term.matches({"net": "high"}, name) is expected


def test_required_terms_are_ored_and_empty_terms_are_skipped():
    high = NodeSelectorTerm((req("net", "In", "high"),))
    low = NodeSelectorTerm((req("net", "In", "low"),))
    assert node_selector_matches([high, low], {"net": "low"})
    assert not node_selector_matches([high], {"net": "low"})
    assert not node_selector_matches([NodeSelectorTerm()], {"net": "low"})
    assert not node_selector_matches([], {"net": "low"})  # no terms: nothing matches


def test_the_raw_score_sums_the_weights_of_matching_terms():
    terms = [
        PreferredTerm(90, NodeSelectorTerm((req("net", "In", "high"),))),
        PreferredTerm(10, NodeSelectorTerm((req("net", "NotIn", "low"),))),
        PreferredTerm(7, NodeSelectorTerm(fields=(req("metadata.name", "In", "n1"),))),
    ]
    assert preferred_score(terms, {"net": "high"}, "n1") == 107
    assert preferred_score(terms, {"net": "high"}, "n2") == 100
    assert preferred_score(terms, {}, "n2") == 10
    assert preferred_score(terms, {"net": "low"}, "n2") == 0


# --- taints and tolerations -------------------------------------------------------------------

UNREACHABLE_NS = Taint("node.kubernetes.io/unreachable", "", "NoSchedule")
DEDICATED = Taint("dedicated", "gpu", "NoSchedule")

TOLERATIONS = [
    # (toleration, taint, tolerated)
    (Toleration("dedicated", "Equal", "gpu", "NoSchedule"), DEDICATED, True),
    (Toleration("dedicated", "Equal", "cpu", "NoSchedule"), DEDICATED, False),
    (Toleration("dedicated", "", "gpu", "NoSchedule"), DEDICATED, True),  # empty operator is Equal
    (Toleration("dedicated", "Equal", "", "NoSchedule"), DEDICATED, False),
    (Toleration("dedicated", "Exists", "", "NoSchedule"), DEDICATED, True),  # any value
    (Toleration("dedicated", "Exists"), DEDICATED, True),  # empty effect: every effect
    (Toleration("dedicated", "Exists", "", "NoExecute"), DEDICATED, False),
    (Toleration("other", "Exists"), DEDICATED, False),
    (Toleration("", "Exists"), DEDICATED, True),  # empty key with Exists: every taint
    (Toleration("", "Exists", "", "NoExecute"), DEDICATED, False),
    (Toleration("node.kubernetes.io/unreachable", "Exists"), UNREACHABLE_NS, True),
    (Toleration("node.kubernetes.io/not-ready", "Exists"), UNREACHABLE_NS, False),
    (Toleration("dedicated", "Gt", "1"), DEDICATED, False),  # alpha operator, gate off by default
]


@pytest.mark.parametrize("toleration, taint, expected", TOLERATIONS)
def test_a_toleration_tolerates_a_taint_as_v1_toleration_does(toleration, taint, expected):
    assert toleration.tolerates(taint) is expected


def test_only_no_schedule_and_no_execute_taints_filter_and_the_first_untolerated_is_reported():
    prefer = Taint("spot", "", "PreferNoSchedule")
    execute = Taint("maintenance", "soon", "NoExecute")
    assert first_untolerated_taint([], [prefer]) is None
    assert first_untolerated_taint([], [prefer, DEDICATED, execute]) == DEDICATED
    assert first_untolerated_taint([Toleration("dedicated", "Exists")], [DEDICATED, execute]) == execute


# --- filtering --------------------------------------------------------------------------------


def required(*terms: dict) -> dict:
    return {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
        }
    }


def expr(key: str, op: str, *values: str) -> dict:
    return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}


PLAIN = Node("n1", {"net": "high", "zone": "a"})
TAINTED = Node("n1", {"net": "high"}, (DEDICATED,))
CORDONED = Node("n1", {"net": "high"}, (), True)
CORDONED_AND_TAINTED = Node("n1", {"net": "high"}, (DEDICATED,), True)
TOLERATE_UNSCHEDULABLE = {
    "tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
}
TAINT_REASON = "node(s) had untolerated taint {dedicated: gpu}"

FILTERS = [
    # (pod spec, node, reason or None)
    ({}, PLAIN, None),
    ({"nodeSelector": {"zone": "a"}}, PLAIN, None),
    ({"nodeSelector": {"zone": "b"}}, PLAIN, REASON_NODE_AFFINITY),
    ({"nodeSelector": {"zone": "a", "net": "low"}}, PLAIN, REASON_NODE_AFFINITY),  # every pair must match
    ({"nodeSelector": {"disk": ""}}, PLAIN, REASON_NODE_AFFINITY),  # "" still needs the key
    (required(expr("zone", "In", "a")), PLAIN, None),
    (required(expr("zone", "In", "b")), PLAIN, REASON_NODE_AFFINITY),
    (required(expr("zone", "In", "b"), expr("net", "In", "high")), PLAIN, None),  # terms ORed
    (required(), PLAIN, REASON_NODE_AFFINITY),  # no terms: nothing matches
    (required({}), PLAIN, REASON_NODE_AFFINITY),  # an empty term matches nothing
    ({**required(expr("zone", "In", "a")), "nodeSelector": {"zone": "b"}}, PLAIN, REASON_NODE_AFFINITY),  # both apply
    (
        required({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}),
        PLAIN,
        REASON_NODE_AFFINITY,
    ),
    ({}, TAINTED, TAINT_REASON),
    ({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu"}]}, TAINTED, None),
    ({}, CORDONED, REASON_UNSCHEDULABLE),
    (TOLERATE_UNSCHEDULABLE, CORDONED, None),
    ({"tolerations": [{"operator": "Exists"}]}, CORDONED, None),  # tolerates everything
    # The first rejecting plugin is the only reason: NodeUnschedulable, TaintToleration, NodeAffinity
    # (NodeName, whose place and PreFilter differ per release: tests/unit/test_scheduler_versions.py).
    ({}, CORDONED_AND_TAINTED, REASON_UNSCHEDULABLE),
    (TOLERATE_UNSCHEDULABLE, CORDONED_AND_TAINTED, TAINT_REASON),
    ({"nodeSelector": {"zone": "b"}}, TAINTED, TAINT_REASON),
    ({"nodeName": "n1"}, PLAIN, None),
]


@pytest.mark.parametrize("spec, node, expected", FILTERS)
def test_a_node_is_filtered_with_the_first_rejecting_plugins_reason(spec, node, expected):
    (result,) = rank(pod_info(pod(**spec)), [node]).nodes
    assert result.reason == expected
    assert result.feasible is (expected is None)


def test_required_terms_naming_nodes_leave_the_others_to_prefilter():
    spec = required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]})
    ranking = rank(pod_info(pod(**spec)), [Node("n1", {}), Node("n2", {}), Node("n3", {}, (DEDICATED,))])
    assert [n.reason for n in ranking.nodes] == [REASON_NOT_IN_PREFILTER, None, REASON_NOT_IN_PREFILTER]
    assert ranking.filter_message() == "1/3 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."


def test_required_terms_naming_disjoint_nodes_conflict_in_prefilter():
    def name_in(name):
        return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}

    both = {"matchFields": name_in("n1")["matchFields"] + name_in("n2")["matchFields"]}  # one term: ANDed
    ranking = rank(pod_info(pod(**required(both))), [Node("n1", {}), Node("n2", {})])
    assert [n.reason for n in ranking.nodes] == [REASON_TERMS_CONFLICT] * 2
    assert ranking.filter_message() == "0/2 nodes are available: pod affinity terms conflict."


def test_the_fit_error_groups_reasons_with_counts_sorted_as_strings():
    nodes = [
        Node("a", {"zone": "b"}),
        Node("b", {"zone": "c"}),
        Node("c", {"zone": "a"}, (Taint("k", "v", "NoSchedule"),)),
    ]
    ranking = rank(pod_info(pod(nodeSelector={"zone": "a"})), nodes)
    assert ranking.filter_message() == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
    assert ranking.affinity_choice == () and ranking.netqos_choice == ()


def test_the_fit_error_sorts_counts_as_text_like_go_does():
    nodes = [Node(f"n{i}", {}, (DEDICATED,)) for i in range(10)] + [Node("x", {}), Node("y", {})]
    ranking = rank(pod_info(pod(nodeSelector={"zone": "a"})), nodes)
    assert ranking.filter_message() == (
        "0/12 nodes are available: 10 node(s) had untolerated taint {dedicated: gpu}, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )


# --- scoring ----------------------------------------------------------------------------------

NORMALIZE = [
    # (raw scores of the feasible nodes, normalised)
    ([], []),
    ([0], [0]),
    ([0, 0, 0], [0, 0, 0]),  # max 0: all 0
    ([7], [100]),  # one node: itself is the max
    ([100, 10, 0], [100, 10, 0]),
    ([10, 0], [100, 0]),  # relative to the best feasible node, not to 100
    ([1, 3], [33, 100]),  # integer division truncates
    ([2, 3], [66, 100]),
    ([99, 100], [99, 100]),
    ([1, 300], [0, 100]),
]


@pytest.mark.parametrize("raw, expected", NORMALIZE)
def test_normalisation_is_default_normalize_score(raw, expected):
    assert default_normalize(raw) == expected


NETQOS = [
    # (pod labels, node labels, plugin score)
    ({"qos": "latency-sensitive"}, {"net": "high"}, 100),
    ({"qos": "latency-sensitive"}, {"net": "low"}, 0),
    ({"qos": "latency-sensitive"}, {}, 10),
    ({"qos": "latency-sensitive"}, {"net": "medium"}, 10),
    ({"qos": "latency-sensitive"}, {"net": ""}, 10),
    ({"qos": "batch"}, {"net": "low"}, 0),
    ({}, {}, 0),
    # The NetQoS scheduler plugin's code falls through to `if nodeNet == "high" { score = 100 }` for every pod; its
    # table (and its comment: "we don't care where it goes") says 0. We reproduce the table.
    ({}, {"net": "high"}, 0),
]


@pytest.mark.parametrize("pod_labels, node_labels, expected", NETQOS)
def test_the_netqos_plugin_score_table(pod_labels, node_labels, expected):
    assert netqos_score(pod_labels, node_labels) == expected


def test_infeasible_nodes_are_not_normalised_and_do_not_set_the_max():
    spec = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 90, "preference": expr("net", "In", "high")},
                    {"weight": 10, "preference": expr("net", "NotIn", "low")},
                ]
            }
        }
    }
    nodes = [Node("high", {"net": "high"}, (DEDICATED,)), Node("plain", {}), Node("low", {"net": "low"})]
    ranking = rank(pod_info(pod({"qos": "latency-sensitive"}, **spec)), nodes)
    assert [(n.affinity_raw, n.affinity_normalized, n.affinity_weighted) for n in ranking.nodes] == [
        (100, None, None),
        (10, 100, 200),  # the best feasible node sets the max
        (0, 0, 0),
    ]
    assert ranking.affinity_choice == ranking.netqos_choice == ("plain",)


def test_one_feasible_node_means_the_scheduler_skips_scoring():
    ranking = rank(pod_info(pod()), [Node("a", {}), Node("b", {}, (DEDICATED,))])
    assert ranking.scoring_skipped
    assert ranking.affinity_choice == ranking.netqos_choice == ("a",)
    assert not rank(pod_info(pod()), [Node("a", {}), Node("b", {})]).scoring_skipped


def test_ties_keep_every_top_node():
    ranking = rank(pod_info(pod()), [Node("a", {}), Node("b", {})])
    assert ranking.affinity_choice == ranking.netqos_choice == ("a", "b")


SAMPLING = [
    # (nodes in the cluster, feasible nodes the scheduler looks for)
    (1, 1),
    (99, 99),
    (100, 100),  # 49% of 100 is below the floor of 100
    (500, 230),  # (50 - 500/125)% = 46%
    (5000, 500),  # 10%
    (6000, 300),  # 50 - 48 = 2%, raised to the 5% floor
]


@pytest.mark.parametrize("nodes, expected", SAMPLING)
def test_large_clusters_are_sampled_as_num_feasible_nodes_to_find(nodes, expected):
    assert nodes_scored_at_most(nodes) == expected


@pytest.mark.parametrize(
    "nodes, percentage, expected",
    # a set percentage has no 5% floor, only the 100-node one; below 100 nodes every node counts
    [(500, 100, 500), (500, 30, 150), (500, 10, 100), (99, 10, 99), (6000, 1, 100), (20000, 1, 200)],
)
def test_a_set_percentage_of_nodes_to_score_replaces_the_adaptive_one(nodes, percentage, expected):
    assert nodes_scored_at_most(nodes, percentage) == expected


def _cluster(count: int, infeasible_every: int = 0) -> list[Node]:
    tainted = (Taint("dedicated", "x", "NoSchedule"),)
    return [
        Node(
            f"n{i:03}",
            {"net": "high" if i % 7 == 0 else "low"},
            tainted if infeasible_every and i % infeasible_every == 0 else (),
        )
        for i in range(count)
    ]


def test_a_sampled_cycle_walks_from_its_start_round_the_list_until_it_has_found_enough_feasible_nodes():
    nodes = _cluster(200, infeasible_every=4)  # every 4th node tainted
    view = pod_info(pod())
    ranking = rank(view, nodes, sampling=Sampling(start=190))  # 200 nodes: 49% -> 98, raised to 100
    walked = [n.name for n in ranking.nodes]
    assert walked[:3] == ["n190", "n191", "n192"] and walked[10] == "n000"  # round the end of the list
    assert len(ranking.feasible) == 100 and ranking.processed == len(walked) == 133
    full = rank(view, nodes, sampling=Sampling(start=190, percentage=100))
    assert len(full.feasible) == 150 and full.processed == 200
    assert rank(view, nodes).processed == 200


def test_a_sample_is_normalised_by_its_own_best_node():
    nodes = _cluster(300)  # net=high every 7th node
    term = {"weight": 100, "preference": expr("net", "In", "high")}
    view = pod_info(pod(preferred=[term]))
    sampled = rank(view, nodes, sampling=Sampling(start=0))  # 48% of 300 = 144 nodes
    assert {n.affinity_normalized for n in sampled.feasible if n.net == "high"} == {100}
    assert {n.name for n in sampled.nodes} == {f"n{i:03}" for i in range(144)}


# --- reading API data -------------------------------------------------------------------------


def test_a_node_is_read_from_api_data():
    node = node_info(
        {
            "metadata": {"name": "n1", "labels": {"net": "high"}},
            "spec": {
                "unschedulable": True,
                "taints": [{"key": "k", "effect": "NoExecute", "timeAdded": "2025-12-02T09:41:07Z"}],
            },
        }
    )
    # no status.allocatable: nothing allocatable, as kube-scheduler's NodeInfo reads it
    assert node == Node("n1", {"net": "high"}, (Taint("k", "", "NoExecute"),), True, allocatable={})


def test_preferred_weights_outside_1_to_100_are_refused_with_the_field():
    spec = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": expr("a", "Exists")}]
            }
        }
    }
    with pytest.raises(
        ValueError,
        match=r"preferredDuringSchedulingIgnoredDuringExecution\[0\]\.weight must be an integer from 1 to 100",
    ):
        pod_info(pod(**spec))
