"""explain's messages are whole sentences: every note (the table's `note:` lines and JSON's
`notes`) and every prose line of the table ends with a full stop, as kube-scheduler's own
"K/N nodes are available: ..." printed beside them does (`webhook.explain.sentence`).

One row per kind of note explain writes, each with the situation that makes it: a note added
later joins the table, and the check below covers it."""

from __future__ import annotations

from typing import Any

import pytest

from harness.pods import PAUSE
from harness.pods import pod as pod_of
from tests.fixtures import REPO
from webhook.commands.explain import load_nodes, load_pod, load_pods, render_table
from webhook.explain import Explanation, explain, sentence
from webhook.policy_file import default_policy, load_policy
from webhook.scheduler.model import Node
from webhook.scheduler.registry import DEFAULT_PROFILE, NODE_AFFINITY

EXAMPLES = REPO / "deploy" / "examples"
FIXTURES = REPO / "tests" / "fixtures" / "explain"
EXPERIMENT = load_nodes(str(EXAMPLES / "nodes.yaml"))
TEST_POD = load_pod(str(EXAMPLES / "test-pod.yaml"))
LATENCY = {"qos": "latency-sensitive"}
RESOURCES = {"cpu": 4000, "memory": 16 * 2**30, "pods": 110}
TWO = (Node("fast", {"net": "high"}, allocatable=RESOURCES), Node("slow", {"net": "low"}, allocatable=RESOURCES))


def pod(**fields: Any) -> dict[str, Any]:
    return pod_of(LATENCY, namespace="default", containers=[PAUSE], **fields)


def term(key: str, operator: str, *values: str, weight: int = 5) -> dict[str, Any]:
    requirement: dict[str, Any] = {"key": key, "operator": operator, **({"values": list(values)} if values else {})}
    return {"weight": weight, "preference": {"matchExpressions": [requirement]}}


def full_cluster() -> Explanation:
    full = EXAMPLES / "full-cluster"
    pods = load_pods(str(full / "pods.yaml"))
    return explain(default_policy(), load_pod(str(full / "pod.yaml")), load_nodes(str(full / "nodes.yaml")), pods=pods)


SITUATIONS = [
    # (the note, how to make it)
    ("rule netqos states the NetQoS plugin's table", lambda: explain(default_policy(), TEST_POD, EXPERIMENT)),
    ("TOTAL - NETQOS TOTAL is 100 on every feasible node", lambda: explain(default_policy(), TEST_POD, EXPERIMENT)),
    ("TOTAL - NETQOS TOTAL ranges from", full_cluster),
    (
        "only minikube is feasible",
        lambda: explain(default_policy(), load_pod(str(FIXTURES / "qos-demo-pod-no-tolerations.yaml")), EXPERIMENT),
    ),
    (
        "the best totals tie",
        lambda: explain(default_policy(), load_pod(str(FIXTURES / "qos-demo-pod-opted-out.yaml")), EXPERIMENT),
    ),
    ("no --pods", lambda: explain(default_policy(), pod(), TWO, pods_given=False)),
    ("the pod requests no cpu or memory", lambda: explain(default_policy(), pod(), TWO)),
    ("not evaluated: ", lambda: explain(default_policy(), pod(), TWO)),
    ("spec.nodeName is 'fast'", lambda: explain(default_policy(), pod(nodeName="fast"), TWO)),
    (
        "kube-scheduler cannot parse the required term",
        lambda: explain(
            default_policy(),
            pod(required=[{"matchExpressions": [{"key": "net", "operator": "In", "values": ["not valid!"]}]}]),
            TWO,
        ),
    ),
    (
        "no node is feasible",
        lambda: explain(
            default_policy(),
            pod(required=[{"matchExpressions": [{"key": "net", "operator": "In", "values": ["none"]}]}]),
            TWO,
        ),
    ),
    (
        "kube-scheduler cannot parse the preferred term",
        lambda: explain(default_policy(), pod(preferred=[term("zone", "In", "not valid!")]), TWO),
    ),
    (
        "150 nodes: kube-scheduler stops filtering",
        lambda: explain(
            default_policy(), pod(), [Node(f"n{i}", {"net": "high"}, allocatable=RESOURCES) for i in range(150)]
        ),
    ),
    ("spec.schedulerName is 'other'", lambda: explain(default_policy(), pod(schedulerName="other"), TWO)),
    (
        "no status.allocatable on bare",
        lambda: explain(default_policy(), pod(), (*TWO, Node("bare", {}, allocatable={}))),
    ),
    (
        "the pod belongs to a ReplicaSet that was not read",
        lambda: explain(
            default_policy(),
            pod(meta={"ownerReferences": [{"kind": "ReplicaSet", "name": "r", "controller": True, "uid": "u"}]}),
            TWO,
        ),
    ),
    (
        "the scheduler weighs NodeAffinity 5",
        lambda: explain(default_policy(), pod(), TWO, profile=DEFAULT_PROFILE.with_plugin(NODE_AFFINITY, 5)),
    ),
    ("the NetQoS plugin is weighed 2 here", lambda: explain(default_policy(), pod(), TWO, netqos_weight=2)),
    (
        "rule netqos states the NetQoS plugin's table (net: high 100, low 0, any other value or none 10), compiled "
        "for NodeAffinity weight 2 and NetQoS weight 1; beside the pod's own preferred terms",
        lambda: explain(default_policy(), pod(preferred=[term("zone", "In", "a", weight=50)]), TWO),
    ),
    (
        "scored as kube-scheduler 1.35 scores",
        lambda: explain(
            default_policy(), pod(), TWO, notes=("scored as kube-scheduler 1.35 scores (--kubernetes-version)",)
        ),
    ),
]


PROSE = ("note: ", "warning: ", "* the predicted node(s)")


@pytest.mark.parametrize("note, situation", SITUATIONS, ids=[s[0][:48] for s in SITUATIONS])
def test_every_note_is_a_sentence_ended_with_a_full_stop(note, situation):
    report = situation()
    assert any(n.startswith(note) for n in report.notes), f"no note {note!r} in {report.notes}"
    for n in report.notes:
        assert n.endswith(".") and not n.endswith(".."), n
    # and so does every line of prose in the table: the notes, the warnings, the legend
    prose = [line for line in render_table(report).splitlines() if line.startswith(PROSE)]
    assert prose and all(line.endswith(".") for line in prose), prose


def test_a_pod_left_alone_and_a_rule_skipped_are_said_in_sentences():
    opted_out = explain(default_policy(), load_pod(str(FIXTURES / "qos-demo-pod-opted-out.yaml")), EXPERIMENT)
    assert render_table(opted_out).splitlines()[0] == (
        "Pod default/qos-demo-pod: not mutated: it opts out with the annotation netqos.io/inject=false."
    )
    report = explain(
        load_policy(str(FIXTURES / "policy-two-rules.yaml")),
        load_pod(str(FIXTURES / "pod-own-net-preference.yaml")),
        EXPERIMENT,
    )
    warnings = [line for line in render_table(report).splitlines() if line.startswith("warning: ")]
    assert warnings and all(w.endswith(".") for w in warnings)


@pytest.mark.parametrize(
    "text, ended",
    [
        ("no node is feasible", "no node is feasible."),
        ("2/3 nodes are available: 1 Insufficient cpu.", "2/3 nodes are available: 1 Insufficient cpu."),
        ("trailing space ", "trailing space."),
        ("a question?", "a question?"),
    ],
)
def test_sentence_adds_one_full_stop_only_where_none_ends_it(text, ended):
    assert sentence(text) == ended
