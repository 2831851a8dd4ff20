"""`netqos-webhook explain` as a user meets it: files in, a table or JSON out, one-line errors."""

from __future__ import annotations

import copy
import importlib
import io
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from harness import kubeapi
from tests.fixtures import REPO
from webhook import cli
from webhook.cluster import ClusterError
from webhook.commands import explain, typed
from webhook.explain import mutate
from webhook.policy_file import DEFAULT_DOCUMENT, default_policy

FIXTURES = REPO / "tests" / "fixtures" / "explain"
TEST_POD = str(REPO / "deploy/examples/test-pod.yaml")
EXPERIMENT_NODES = str(REPO / "deploy/examples/nodes.yaml")
FULL = REPO / "deploy/examples/full-cluster"
LIVE_VERSION = {"major": "1", "minor": "37", "gitVersion": "v1.37.2"}
# NodeResourcesBalancedAllocation on the feasible nodes of the full-cluster example, as 1.34/1.35
# (the balance with the pod) and 1.36+ (the change the pod makes) score it
FULL_BALANCED_WITH_POD = {"std-1": 93, "slow-1": 93}
FULL_BALANCED_CHANGE = {"std-1": 72, "slow-1": 72}


def explained(*argv: str, nodes: Iterable[dict] = (), pods: Iterable[dict] = (), version: dict = LIVE_VERSION) -> str:
    """explain's output for `netqos-webhook explain ARGV`, parsed by the CLI. Without --nodes
    (live mode), against the fake API server holding `nodes` and `pods` and answering /version
    with `version`, through its kubeconfig."""
    if "--nodes" in argv:
        return _explained(argv)
    snapshot = kubeapi.Snapshot(version=version).add_all([*nodes, *pods])
    with tempfile.TemporaryDirectory() as directory, kubeapi.serve(snapshot, Path(directory)) as api:
        return _explained((*argv, "--kubeconfig", str(api.kubeconfig)))


def _explained(argv: Iterable[str]) -> str:
    args = cli.build_parser().parse_args(["explain", *argv])
    out = io.StringIO()
    assert explain.run(typed(explain.ExplainArgs, args), out, default_policy()) == 0
    return out.getvalue()


@pytest.mark.parametrize(
    ("argv", "version", "note", "balanced"),
    [
        # a 1.35 cluster: BalancedAllocation scores the balance with the pod, and a note says so
        (
            (),
            {"gitVersion": "v1.35.4"},
            "scored as kube-scheduler 1.35 scores (the API server's /version (v1.35.4)).",
            1,
        ),
        # --kubernetes-version wins over the cluster's
        (
            ("--kubernetes-version", "1.36"),
            {"gitVersion": "v1.35.4"},
            "scored as kube-scheduler 1.36 scores (--kubernetes-version).",
            0,
        ),
        # the newest, whose scores every document shows: no note
        ((), LIVE_VERSION, None, 0),
        # a version the project does not know is scored as the nearest, saying so
        (
            (),
            {"major": "1", "minor": "39+"},
            "scored as kube-scheduler 1.37 scores (the API server's /version (?)); Kubernetes 1.39 is outside the "
            "versions netqos-webhook knows (1.34 to 1.37); computing as 1.37.",
            0,
        ),
    ],
)
def test_live_mode_scores_as_the_clusters_kubernetes_version(argv, version, note, balanced) -> None:
    nodes = yaml.safe_load(Path(FULL / "nodes.yaml").read_text())["items"]
    pods = yaml.safe_load(Path(FULL / "pods.yaml").read_text())["items"]
    report = json.loads(
        explained(*("--pod", str(FULL / "pod.yaml"), "-o", "json", *argv), nodes=nodes, pods=pods, version=version)
    )
    versions = [n for n in report["notes"] if n.startswith("scored as kube-scheduler")]
    assert versions == ([note] if note else [])
    # 1.36+ scores the change the pod makes (75 when it changes nothing, 50 to 100); before, the
    # balance with the pod, which an empty node with a small pod puts near 100
    with_pod = FULL_BALANCED_WITH_POD if balanced else FULL_BALANCED_CHANGE
    scores = {n["name"]: n["scores"]["NodeResourcesBalancedAllocation"] for n in report["nodes"] if n["scores"]}
    assert scores == with_pod


def command(*argv: str, capsys) -> tuple[int, str, str]:
    """`netqos-webhook explain ARGV` in process: exit code, stdout, stderr."""
    code = cli.main(["explain", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


EXPERIMENT_TABLE = """\
Pod default/qos-demo-pod: mutated by netqos-webhook (rule netqos), preferred node affinity added:
  + weight 90  net In [high]
  + weight 10  net NotIn [low]
  + weight 100 net Exists
  + weight 100 net DoesNotExist

  NODE          NET    FEASIBLE   NETQOS   AFFINITY RAW   NORMALIZED   TAINT x3   AFFINITY x2   FIT x1   SPREAD x2   PODAFF x2   BALANCED x1   IMAGE x1   TOTAL   NETQOS TOTAL (x1)   REASON
  minikube      low    yes        0        100            50           300        100           97       -           -           -             0          497     397
* fake-node-1   high   yes        100      200            100          300        200           97       -           -           -             0          597     497

2/2 nodes are available.
NodeAffinity picks: fake-node-1   NetQoS plugin picked: fake-node-1   (same)
predicted: fake-node-1   NetQoS scheduler: fake-node-1   (agree; some plugins not evaluated)
"""  # noqa: E501 - the table as printed


def test_the_plugins_experiment_prints_both_scores_side_by_side(capsys):
    code, out, err = command("--pod", TEST_POD, "--nodes", EXPERIMENT_NODES, capsys=capsys)
    assert (code, err) == (0, "")
    assert out.startswith(EXPERIMENT_TABLE)
    assert "note: not evaluated: VolumeRestrictions, NodeVolumeLimits" in out


def test_the_plugins_experiment_as_json_has_the_documented_shape():
    document = json.loads(explained("--pod", TEST_POD, "--nodes", EXPERIMENT_NODES, "-o", "json"))
    contract = {k: document[k] for k in ("pod", "mutated", "nodes", "affinity_choice", "netqos_choice")}
    assert contract == {
        "pod": "qos-demo-pod",
        "mutated": True,
        "nodes": [
            {
                "name": "minikube",
                "net": "low",
                "feasible": True,
                "reasons": [],
                "netqos_score": 0,
                # the constant: net Exists (100) matches; 100 * 100 // 200 = 50, x2
                "affinity_raw": 100,
                "affinity_normalized": 50,
                "affinity_weighted": 100,
                # 4 CPUs and 8025056Ki free: (4000 - 100) * 100 // 4000 = 97 and
                # (8217657344 - 200Mi) * 100 // 8217657344 = 97; the best-effort pod skips BalancedAllocation
                "scores": {"TaintToleration": 100, "NodeAffinity": 50, "NodeResourcesFit": 97, "ImageLocality": 0},
                "total": 497,
                "netqos_total": 397,
                # two nodes: every cycle scores both, so the best node is certain
                "probability": 0.0,
                "netqos_probability": 0.0,
            },
            {
                "name": "fake-node-1",
                "net": "high",
                "feasible": True,
                "reasons": [],
                "netqos_score": 100,
                "affinity_raw": 200,
                "affinity_normalized": 100,
                "affinity_weighted": 200,
                # 4 CPUs and 8Gi: 97 and (8589934592 - 209715200) * 100 // 8589934592 = 97
                "scores": {"TaintToleration": 100, "NodeAffinity": 100, "NodeResourcesFit": 97, "ImageLocality": 0},
                "total": 597,
                "netqos_total": 497,
                "probability": 1.0,
                "netqos_probability": 1.0,
            },
        ],
        "affinity_choice": ["fake-node-1"],
        "netqos_choice": ["fake-node-1"],
    }
    assert document["choices_match"] is True and document["scoring_skipped"] is False
    assert [t["weight"] for t in document["injected_terms"]] == [90, 10, 100, 100]
    assert document["weights"] == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
    }
    assert (document["predicted"], document["netqos_predicted"]) == (["fake-node-1"], ["fake-node-1"])
    assert document["sampling"] == {
        "nodes": 2,
        "scored_per_cycle": 2,
        "feasible": 2,
        "sampled": False,
        "target": "net=high",
        "target_probability": 1.0,
        "netqos_target_probability": 1.0,
    }
    # evaluated now (no constraints, no Service, no pod with affinity terms: both skip this pod)
    assert "PodTopologySpread" not in document["not_evaluated"] and "InterPodAffinity" not in document["not_evaluated"]


def test_the_experiments_first_attempt_finds_one_feasible_node_and_no_scoring():
    pod = str(FIXTURES / "qos-demo-pod-no-tolerations.yaml")
    document = json.loads(explained("--pod", pod, "--nodes", EXPERIMENT_NODES, "-o", "json"))
    fake = document["nodes"][1]
    assert (fake["feasible"], fake["reasons"]) == (
        False,
        ["node(s) had untolerated taint {node.kubernetes.io/unreachable: }"],
    )
    assert (fake["affinity_normalized"], fake["affinity_weighted"]) == (None, None)
    assert document["scoring_skipped"] is True
    assert document["affinity_choice"] == document["netqos_choice"] == ["minikube"]
    assert (
        document["filter_message"]
        == "1/2 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }."
    )
    table = explained("--pod", pod, "--nodes", EXPERIMENT_NODES)
    assert "only minikube is feasible: kube-scheduler binds the pod there without scoring" in table


def test_an_opted_out_pod_is_not_mutated_and_the_choices_part_ways():
    out = explained("--pod", str(FIXTURES / "qos-demo-pod-opted-out.yaml"), "--nodes", EXPERIMENT_NODES)
    assert "Pod default/qos-demo-pod: not mutated: it opts out with the annotation netqos.io/inject=false" in out
    assert "NodeAffinity picks: minikube, fake-node-1   NetQoS plugin picked: fake-node-1   (DIFFERENT)" in out


@pytest.mark.parametrize(
    "nodes_file", [EXPERIMENT_NODES, str(FIXTURES / "nodes-documents.yaml"), str(FIXTURES / "nodes.json")]
)
def test_a_list_separate_documents_and_json_read_the_same_nodes(nodes_file):
    out = explained("--pod", TEST_POD, "--nodes", nodes_file, "-o", "json")
    assert [(n["name"], n["net"], n["affinity_weighted"]) for n in json.loads(out)["nodes"]] == [
        ("minikube", "low", 100),
        ("fake-node-1", "high", 200),
    ]


ERRORS = [
    # (arguments, the one-line message on stderr)
    (
        ["--pod", "no/such/pod.yaml", "--nodes", EXPERIMENT_NODES],
        "netqos-webhook explain: pod file no/such/pod.yaml: cannot read it (No such file or directory); check the path",
    ),
    (
        ["--pod", str(FIXTURES / "deployment.yaml"), "--nodes", EXPERIMENT_NODES],
        'kind is "Deployment"; explain takes a Pod',
    ),
    (
        ["--pod", str(FIXTURES / "two-pods.yaml"), "--nodes", EXPERIMENT_NODES],
        "holds 2 YAML documents; put exactly one Pod in it",
    ),
    (
        ["--pod", TEST_POD, "--nodes", str(FIXTURES / "nodes-bad-taint.yaml")],
        "nodes-bad-taint.yaml: items[0].spec.taints[0].effect must be a string, got a list; fix the field",
    ),
    (
        ["--pod", TEST_POD, "--nodes", str(FIXTURES / "nodes-numeric-label.yaml")],
        "metadata.labels['generation'] must be a string (quote numbers and booleans in YAML), got a number; "
        "fix the field.",
    ),
    (
        ["--pod", TEST_POD, "--nodes", str(FIXTURES / "nodes-duplicate.yaml")],
        "document 2: metadata.name 'n1' appears twice",
    ),
    (
        ["--pod", TEST_POD, "--nodes", str(FIXTURES / "nodes-with-a-pod.yaml")],
        'items[1].kind is "Pod"; only Node objects belong here',
    ),
    (
        ["--pod", TEST_POD, "--nodes", str(FIXTURES / "two-pods.yaml")],
        'document 1: kind is "Pod"; only Node objects belong here',
    ),
    (
        ["--pod", TEST_POD, "--nodes", str(FIXTURES / "nodes-strings.yaml")],
        "nodes-strings.yaml: items[0] is a string, not a Node object; give Node objects.",
    ),
    (
        ["--pod", str(FIXTURES / "pod-bad-tolerations.yaml"), "--nodes", EXPERIMENT_NODES],
        "pod-bad-tolerations.yaml: spec.tolerations must be a list, got a string; fix the field",
    ),
    (
        ["--pod", str(FIXTURES / "pod-no-apiversion.yaml"), "--nodes", EXPERIMENT_NODES],
        'pod-no-apiversion.yaml: apiVersion is null and kind "Pod": the API server only takes a Pod as '
        "apiVersion: v1, kind: Pod",
    ),
    (
        ["--pod", str(FIXTURES / "pod-duplicate-key.yaml"), "--nodes", EXPERIMENT_NODES],
        "pod-duplicate-key.yaml: not valid YAML or JSON: line 7, column 3: "
        'mapping key "labels" already defined at line 6',
    ),
    (
        ["--pod", str(FIXTURES / "pod-negative-cpu.yaml"), "--nodes", EXPERIMENT_NODES],
        "pod-negative-cpu.yaml: spec.containers[0].resources.requests['cpu'] must be greater than or equal to 0",
    ),
    (
        ["--pod", TEST_POD, "--nodes", str(FIXTURES / "nodes-negative-allocatable.yaml")],
        "nodes-negative-allocatable.yaml: status.allocatable['memory'] must be greater than or equal to 0",
    ),
    (
        ["--pod", TEST_POD, "--nodes", str(FIXTURES / "nodes-quantity-without-digits.yaml")],
        "nodes-quantity-without-digits.yaml: status.allocatable['memory'] must be a quantity",
    ),
    (
        ["--pod", TEST_POD, "--nodes", EXPERIMENT_NODES, "--config", "no/such/policy.yaml"],
        "netqos-webhook explain: policy file no/such/policy.yaml: cannot read it",
    ),
    (
        ["--pod", TEST_POD, "--nodes", EXPERIMENT_NODES, "--context", "minikube"],
        "the nodes come from --nodes or from a cluster (--kubeconfig, --context): give one",
    ),
    (
        ["--pod", TEST_POD, "--kubeconfig", "no/such/kubeconfig"],
        "kubeconfig no/such/kubeconfig",
    ),
    (
        ["--pod", str(FIXTURES / "pod-list.yaml"), "--nodes", EXPERIMENT_NODES],
        "pod-list.yaml: the document is a list, not a Pod object.",
    ),
    (
        ["--pod", TEST_POD, "--nodes", EXPERIMENT_NODES, "--webhook-namespace", "Not_A_Namespace"],
        "namespace 'Not_A_Namespace' is not a valid namespace name",
    ),
]


@pytest.mark.parametrize("argv, message", ERRORS)
def test_unusable_input_exits_2_with_one_line_naming_the_file_and_field(argv, message, capsys):
    code, out, err = command(*argv, capsys=capsys)
    assert (code, out) == (2, "")
    assert message in err
    assert err.startswith("netqos-webhook explain: ") and err.count("\n") == 1
    assert err.endswith(".\n") and not err.endswith("..\n"), "explain ends its sentences"


def test_an_empty_nodes_file_says_what_to_give(tmp_path, capsys):
    empty = tmp_path / "nodes.yaml"
    empty.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    code, _, err = command("--pod", TEST_POD, "--nodes", str(empty), capsys=capsys)
    assert code == 2 and "holds no Node objects; give at least one (kubectl get nodes -o yaml)" in err


# --- live mode: the same functions, nodes from the cluster seam -------------------------------


def experiment_nodes() -> list[dict]:
    return yaml.safe_load(Path(EXPERIMENT_NODES).read_text())["items"]


def test_live_mode_reads_the_nodes_and_pods_of_the_cluster_and_explains_them_as_the_file_mode_does(tmp_path):
    pods = yaml.safe_load(Path(FULL / "pods.yaml").read_text())["items"]
    snapshot = kubeapi.Snapshot().add_all([*experiment_nodes(), *pods])
    with kubeapi.serve(snapshot, tmp_path) as api:
        live = _explained(("--pod", TEST_POD, "--kubeconfig", str(api.kubeconfig), "--context", "fake", "-o", "json"))
    from_file = explained(
        "--pod", TEST_POD, "--nodes", EXPERIMENT_NODES, "--pods", str(FULL / "pods.yaml"), "-o", "json"
    )
    lists = [path.split("?")[0] for path in api.requests if "?" in path]
    assert lists == ["/api/v1/nodes", "/api/v1/pods", "/api/v1/namespaces/default/services"]
    assert by_node_name(live) == by_node_name(from_file)


def by_node_name(output: str) -> dict:
    """explain's JSON with its nodes in name order: the API server lists them so, a file as written."""
    document = json.loads(output)
    return {**document, "nodes": sorted(document["nodes"], key=lambda n: n["name"])}


def explain_connections(argv: Iterable[str], snapshot: kubeapi.Snapshot, tmp_path: Path) -> tuple[int, list[str]]:
    """The TCP connections one `netqos-webhook explain ARGV` run opens to the fake API server, and
    the requests it sends."""
    with kubeapi.serve(snapshot, tmp_path) as api:
        _explained((*argv, "--kubeconfig", str(api.kubeconfig), "-o", "json"))
        return api.connections, api.requests


@pytest.mark.parametrize("named", [True, False], ids=["pod/NAME-of-the-cluster", "a-pod-file-against-the-cluster"])
def test_one_explain_run_reads_the_cluster_through_one_connection(named, tmp_path):
    """The pod, the nodes, every bound pod, the Services and the controller that spread it, the
    namespaces a namespaceSelector reads and /version: each read through one kept-alive connection."""
    pod = scheduled(admitted(WRITTEN))
    pod["spec"]["affinity"] = yaml.safe_load(Path(NS_POD).read_text())["spec"]["affinity"]  # a namespaceSelector
    pod["metadata"]["ownerReferences"] = [kubeapi.owner_ref("ReplicaSet", "order-router-7d9f")]
    replica_set = kubeapi.workload("ReplicaSet", "trading", "order-router-7d9f", template={"spec": WRITTEN["spec"]})
    pod_file = tmp_path / "pod.json"
    pod_file.write_text(json.dumps(pod))
    argv = ("pod/order-router", "-n", "trading") if named else ("--pod", str(pod_file))
    connections, requests = explain_connections(argv, live_cluster(pod, replica_set), tmp_path)
    asked = [path.split("?")[0] for path in requests]
    read = ["/api/v1/nodes", "/api/v1/pods", "/apis/apps/v1/namespaces/trading/replicasets/order-router-7d9f"]
    assert {"/version/", "/api/v1/namespaces", *read} <= set(asked), asked
    assert ("/api/v1/namespaces/trading/pods/order-router" in asked) == named
    assert connections == 1, asked


def test_live_mode_reads_the_pods_of_one_template_once_and_ranks_as_with_every_pod_read(monkeypatch, tmp_path):
    """A live cluster's pods are folded into each node's usage as they arrive: the pods of one
    template are read once (not every pod's whole scheduling view), and the ranking is the file
    mode's, which reads every pod."""
    nodes = experiment_nodes()
    template = yaml.safe_load(Path(FULL / "pods.yaml").read_text())["items"][0]
    pods = []
    for i in range(2000):
        p = copy.deepcopy(template)
        p["metadata"]["name"] = f"filler-{i}"
        p["spec"]["nodeName"] = nodes[i % len(nodes)]["metadata"]["name"]
        p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1m", "memory": "1Mi"}}
        pods.append(p)
    reads = []
    for module, name in (("webhook.commands.explain", "pod_info"), ("webhook.scheduler.read", "usage_info")):
        real = getattr(importlib.import_module(module), name)
        monkeypatch.setattr(f"{module}.{name}", lambda *a, real=real, **k: reads.append(1) or real(*a, **k))
    live = explained("--pod", TEST_POD, "-o", "json", nodes=nodes, pods=pods)
    assert len(reads) <= 2
    monkeypatch.undo()
    pods_file = tmp_path / "pods.json"
    pods_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    from_file = explained("--pod", TEST_POD, "--nodes", EXPERIMENT_NODES, "--pods", str(pods_file), "-o", "json")
    assert by_node_name(live) == by_node_name(from_file)


@pytest.mark.parametrize(
    "cluster_flags",
    [
        pytest.param([], id="neither-flag-kubeconfig-from-env"),
        pytest.param(["--context", "fake"], id="context-with-kubeconfig-from-env"),
        pytest.param(["--kubeconfig", "{kubeconfig}"], id="kubeconfig"),
        pytest.param(["--kubeconfig", "{kubeconfig}", "--context", "fake"], id="kubeconfig-and-context"),
    ],
)
def test_without_nodes_the_cluster_is_read_finding_the_kubeconfig_as_status_does(
    cluster_flags, tmp_path, monkeypatch, capsys
):
    snapshot = kubeapi.Snapshot()
    for item in experiment_nodes():
        snapshot.add(item)
    with kubeapi.serve(snapshot, tmp_path) as api:
        monkeypatch.setenv("KUBECONFIG", str(api.kubeconfig))
        flags = [flag.format(kubeconfig=api.kubeconfig) for flag in cluster_flags]
        code, live, err = command("--pod", TEST_POD, *flags, "-o", "json", capsys=capsys)
    assert (code, err) == (0, "")
    from_file = explained("--pod", TEST_POD, "--nodes", EXPERIMENT_NODES, "-o", "json")
    by_name = lambda output: sorted(json.loads(output)["nodes"], key=lambda n: n["name"])  # noqa: E731
    assert by_name(live) == by_name(from_file)
    assert any(path.startswith("/api/v1/nodes") for path in api.requests)


def test_a_cluster_that_does_not_answer_is_a_cluster_error_naming_it(tmp_path):
    config = kubeapi.write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")  # the discard port: refused
    with pytest.raises(ClusterError, match=r"^cannot reach the Kubernetes API server at http://127.0.0.1:9 "):
        _explained(("--pod", TEST_POD, "--kubeconfig", str(config)))


def test_nodes_from_the_cluster_are_checked_like_a_files():
    with pytest.raises(
        explain.ExplainError,
        match=r"^cluster of kubeconfig \S+: items\[0\]\.metadata\.name must be a non-empty string",
    ):
        explained("--pod", TEST_POD, nodes=[{"kind": "Node", "metadata": {"name": ""}}])


def test_a_large_cluster_notes_that_the_scheduler_samples_nodes_and_gives_each_nodes_probability():
    """500 nodes, one of them net=high: 46% of them are scored per cycle (230), so the fast node
    is in 230 of the 500 samples a cycle can start with, and wins each."""
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    items = [
        {
            "kind": "Node",
            "metadata": {"name": f"n{i:03}", "labels": {"net": "high" if i == 7 else "low"}},
            "status": {"allocatable": allocatable},
        }
        for i in range(500)
    ]
    document = json.loads(explained("--pod", TEST_POD, "-o", "json", nodes=items))
    assert any(
        n.startswith("500 nodes: kube-scheduler stops filtering once it has found 230 of the 500 feasible nodes")
        and "lands on a net=high node with probability 0.46 (under the NetQoS scheduler plugin's profile, 0.46)" in n
        for n in document["notes"]
    ), document["notes"]
    assert document["sampling"]["target_probability"] == 0.46 and document["sampling"]["sampled"] is True
    assert {n["name"]: n["probability"] for n in document["nodes"]}["n007"] == 0.46
    assert sum(n["probability"] for n in document["nodes"]) == pytest.approx(1.0)
    table = explained("--pod", TEST_POD, nodes=items)
    header, fast = table.splitlines()[6], next(line for line in table.splitlines() if " n007 " in line)
    assert header.split()[-2:] == ["P", "REASON"] and fast.split()[-1] == "0.46", (header, fast)


# --- the program and its edges ----------------------------------------------------------------


def run_module(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "webhook", "explain", *argv], capture_output=True, text=True, cwd=REPO, timeout=60
    )


def test_the_command_runs_the_plugins_experiment():
    done = run_module("--pod", "deploy/examples/test-pod.yaml", "--nodes", "deploy/examples/nodes.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(EXPERIMENT_TABLE)


def test_help_shows_an_example():
    done = run_module("--help")
    assert done.returncode == 0
    assert (
        "netqos-webhook explain --pod deploy/examples/test-pod.yaml --nodes deploy/examples/nodes.yaml" in done.stdout
    )


def test_a_bad_kubeconfig_is_one_line_without_traceback_and_exit_2(tmp_path):
    done = run_module("--pod", "deploy/examples/test-pod.yaml", "--kubeconfig", str(tmp_path / "missing.conf"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"netqos-webhook explain: cannot read kubeconfig {tmp_path / 'missing.conf'}: ")
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def test_the_example_fake_node_is_the_fake_node_of_the_example_nodes():
    fake = yaml.safe_load((REPO / "deploy/examples/fake-node.yaml").read_text())
    listed = next(n for n in experiment_nodes() if n["metadata"]["name"] == "fake-node-1")

    def strip(taints: list[dict]) -> list[dict]:
        return [{k: t[k] for k in ("key", "effect")} for t in taints]  # timeAdded is the controller's

    assert fake["metadata"]["labels"] == listed["metadata"]["labels"]
    assert strip(fake["spec"]["taints"]) == strip(listed["spec"]["taints"])


def test_a_rule_skipped_beside_an_applied_one_is_shown_as_a_warning(capsys):
    code, out, _ = command(
        "--pod",
        str(FIXTURES / "pod-own-net-preference.yaml"),
        "--nodes",
        EXPERIMENT_NODES,
        "--config",
        str(FIXTURES / "policy-two-rules.yaml"),
        capsys=capsys,
    )
    assert code == 0
    assert out.startswith(
        "Pod default/own-net: mutated by netqos-webhook (rule zone-a), preferred node affinity added:\n"
        "  + weight 20  topology.kubernetes.io/zone In [a]\n"
        'warning: netqos-webhook: rule "netqos" not applied: '
        "the pod's own node affinity already uses node label 'net'.\n"
    )
    # The author's own net=low preference wins where the plugin would have picked net=high.
    assert "NodeAffinity picks: minikube   NetQoS plugin picked: fake-node-1   (DIFFERENT)" in out


# --- the pods on the nodes, the full fast node, the NetQoS scheduler's prediction ---------------

FULL_ARGS = ("--pod", str(FULL / "pod.yaml"), "--nodes", str(FULL / "nodes.yaml"))


def test_when_the_only_fast_node_is_full_both_schedulers_place_the_pod_elsewhere():
    document = json.loads(explained(*FULL_ARGS, "--pods", str(FULL / "pods.yaml"), "-o", "json"))
    fast = document["nodes"][0]
    assert (fast["name"], fast["feasible"], fast["reasons"], fast["scores"], fast["total"]) == (
        "fast-1",
        False,
        ["Insufficient cpu"],  # 3920m allocatable, 3500m requested, the pod asks for 1000m
        {},
        None,
    )
    assert document["predicted"] == document["netqos_predicted"] == ["std-1"]
    assert document["predictions_match"] is True
    assert document["filter_message"] == "2/3 nodes are available: 1 Insufficient cpu."


def test_with_room_on_the_fast_node_it_wins_for_both_schedulers():
    document = json.loads(explained(*FULL_ARGS, "--pods", str(FULL / "pods-fast-node-free.yaml"), "-o", "json"))
    assert document["predicted"] == document["netqos_predicted"] == ["fast-1"]
    totals = {n["name"]: (n["total"], n["netqos_total"]) for n in document["nodes"]}
    # the affinity leads by 200 - 110, the plugin by (100 - 10) x 1: the same lead, as the totals
    # differ by the constant 100 on every node; resources favour the emptier nodes
    assert totals["fast-1"][0] - totals["std-1"][0] == totals["fast-1"][1] - totals["std-1"][1] > 0
    assert {total - netqos for total, netqos in totals.values()} == {100}


def test_finished_pods_and_the_explained_pod_itself_are_not_counted(tmp_path):
    pods = yaml.safe_load((FULL / "pods.yaml").read_text())
    running = [p for p in pods["items"] if p["status"]["phase"] == "Running"]
    itself = yaml.safe_load((FULL / "pod.yaml").read_text())
    itself["spec"]["nodeName"] = "std-1"
    (tmp_path / "pods.yaml").write_text(yaml.safe_dump({"kind": "List", "items": [*running, itself]}))
    with_finished = explained(*FULL_ARGS, "--pods", str(FULL / "pods.yaml"), "-o", "json")
    without = explained(*FULL_ARGS, "--pods", str(tmp_path / "pods.yaml"), "-o", "json")
    assert json.loads(with_finished)["nodes"] == json.loads(without)["nodes"]


def test_run_takes_typed_options():
    out = io.StringIO()
    options = explain.ExplainArgs(pod=TEST_POD, nodes=EXPERIMENT_NODES, netqos_weight=2, output="json")
    assert explain.run(options, out, default_policy()) == 0
    document = json.loads(out.getvalue())
    assert document["netqos_weight"] == 2
    # at weight 2 the plugin leads by 200, the compiled terms (for weight 1) by 100
    assert [n["netqos_total"] - n["total"] for n in document["nodes"]] == [0 - 100, 200 - 200]
    assert any("compiled for 1 (schedulerWeights.netqos)" in note for note in document["notes"])


POD_AND_CONFIG_ERRORS = [
    (["--pods", EXPERIMENT_NODES], 'items[0].kind is "Node"; only Pod objects belong here'),
    (
        ["--pods", str(FIXTURES / "pods-bad-quantity.yaml")],
        "items[0].spec.containers[0].resources.requests['cpu'] must be a quantity",
    ),
    (
        ["--scheduler-config", str(FIXTURES / "scheduler-config-bad.yaml")],
        "scoringStrategy.type is 'Packed'; use one of",
    ),
    (
        ["--scheduler-config", TEST_POD],
        "give a KubeSchedulerConfiguration of apiVersion kubescheduler.config.k8s.io/v1",
    ),
]


@pytest.mark.parametrize("argv, message", POD_AND_CONFIG_ERRORS)
def test_unusable_pods_and_scheduler_configuration_exit_2_with_one_line(argv, message, capsys):
    code, out, err = command("--pod", TEST_POD, "--nodes", EXPERIMENT_NODES, *argv, capsys=capsys)
    assert (code, out) == (2, "")
    assert message in err and err.count("\n") == 1


def test_a_scheduler_configuration_changes_the_weights_and_the_prediction():
    document = json.loads(
        explained(
            *FULL_ARGS,
            "--pods",
            str(FULL / "pods-fast-node-free.yaml"),
            "--scheduler-config",
            str(FIXTURES / "scheduler-config-bin-packing.yaml"),
            "-o",
            "json",
        )
    )
    assert document["weights"] == {"NodeAffinity": 2, "NodeResourcesFit": 5}
    # bin packing at weight 5 outweighs the affinity's 200: the fullest node wins
    assert document["predicted"] == ["fast-1"]
    assert document["nodes"][0]["scores"]["NodeResourcesFit"] > document["nodes"][1]["scores"]["NodeResourcesFit"]


@pytest.mark.parametrize("weight", ["0", "101", "one"])
def test_a_netqos_weight_outside_1_to_100_is_a_usage_error(weight, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["explain", "--pod", TEST_POD, "--nodes", EXPERIMENT_NODES, "--netqos-weight", weight])
    assert exit_.value.code == 2 and "argument --netqos-weight:" in capsys.readouterr().err


def test_the_not_evaluated_note_names_what_this_pod_would_meet(tmp_path):
    pod = yaml.safe_load(Path(TEST_POD).read_text())
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "uid": "u"}
    ]
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    pod["spec"]["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(pod))
    notes = json.loads(explained("--pod", str(path), "--nodes", EXPERIMENT_NODES, "-o", "json"))["notes"]
    (note,) = [n for n in notes if n.startswith("not evaluated")]
    # the ReplicaSet was not given: its default spreading cannot be evaluated, and explain says so
    assert any(n.startswith("the pod belongs to a ReplicaSet that was not read") for n in notes)
    assert "its volumes are not evaluated" in note and "pod (anti-)affinity" not in note


@pytest.mark.parametrize("name", ["pod.yaml", "pods.yaml", "pods-fast-node-free.yaml"])
def test_the_full_cluster_pods_are_valid_kubernetes_objects(name):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    document = yaml.safe_load((FULL / name).read_text())
    for item in document["items"] if document["kind"] == "List" else [document]:
        kubernetes_validate.validate(item, "1.28", strict=True)


def test_quantities_with_huge_exponents_are_counted_at_once_not_expanded():
    # "1e3000000" took over a second and "1e60000000" minutes when expanded into exact fractions.
    start = time.process_time()
    document = json.loads(
        explained(
            "--pod",
            TEST_POD,
            "--nodes",
            EXPERIMENT_NODES,
            "--pods",
            str(FIXTURES / "pods-huge-exponent.yaml"),
            "-o",
            "json",
        )
    )
    assert time.process_time() - start < 5
    assert document["predicted"] == ["fake-node-1"]  # minikube counts a pod of 1e3000000 bytes


def _scheduler_config(tmp_path, node_affinity_weight: int) -> str:
    path = tmp_path / "scheduler.yaml"
    score = {"enabled": [{"name": "NodeAffinity", "weight": node_affinity_weight}]}
    profile = {"schedulerName": "default-scheduler", "plugins": {"score": score}}
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [profile],
    }
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_a_scheduler_weighing_node_affinity_otherwise_than_the_policy_is_named_and_a_matching_policy_is_exact(
    tmp_path, capsys
):
    args = ("--pod", TEST_POD, "--nodes", EXPERIMENT_NODES, "--scheduler-config", _scheduler_config(tmp_path, 5))
    code, out, _ = command(*args, "-o", "json", capsys=capsys)
    notes = json.loads(out)["notes"]
    assert code == 0
    assert "the scheduler weighs NodeAffinity 5, the policy's terms were compiled for 2" in " ".join(notes)
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({**DEFAULT_DOCUMENT, "schedulerWeights": {"nodeAffinity": 5, "netqos": 1}}))
    code, out, _ = command(*args, "--config", str(policy), "-o", "json", capsys=capsys)
    document = json.loads(out)
    assert code == 0 and [t["weight"] for t in document["injected_terms"]] == [18, 2, 80, 80]
    assert not any("weighs NodeAffinity" in n for n in document["notes"])
    assert (
        "TOTAL - NETQOS TOTAL is 400 on every feasible node: the two schedulers rank them alike." in document["notes"]
    )


def test_the_netqos_weight_defaults_to_the_policys(tmp_path, capsys):
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({**DEFAULT_DOCUMENT, "schedulerWeights": {"nodeAffinity": 2, "netqos": 2}}))
    code, out, _ = command(
        "--pod", TEST_POD, "--nodes", EXPERIMENT_NODES, "--config", str(policy), "-o", "json", capsys=capsys
    )
    document = json.loads(out)
    assert code == 0 and document["netqos_weight"] == 2
    assert [t["weight"] for t in document["injected_terms"]] == [90, 10]  # equal weights: no constant


def test_a_pod_in_an_excluded_namespace_is_explained_as_written_because_the_webhook_is_not_called(tmp_path):
    pod = yaml.safe_load(Path(TEST_POD).read_text())
    pod["metadata"]["namespace"] = "kube-system"
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(pod))
    document = json.loads(explained("--pod", str(path), "--nodes", EXPERIMENT_NODES, "-o", "json"))
    assert (document["decision"], document["mutated"], document["injected_terms"]) == ("not_called", False, [])
    table = explained("--pod", str(path), "--nodes", EXPERIMENT_NODES)
    assert "not mutated: the webhook is not called: namespace kube-system is excluded" in table.splitlines()[0]


# --- pod affinity's namespaceSelector: the namespaces' labels ---------------------------------------
# checkout (net=high preferred, and required beside app=db of a namespace labelled team=payments)
# can only join db on slow-1; with the namespaces' labels unknown, no pod matches and it stays Pending.

NS_POD = str(FIXTURES / "namespace-selector-pod.yaml")
NS_NODES = FIXTURES / "namespace-selector-nodes.yaml"
NS_PODS = FIXTURES / "namespace-selector-pods.yaml"
NO_POD_AFFINITY = "node(s) didn't match pod affinity rules"


def _objects_of(path: Path, *kinds: str) -> list[dict]:
    return [o for o in yaml.safe_load(path.read_text())["items"] if o["kind"] in kinds]


def _namespace_notes(document: dict) -> list[str]:
    return [n for n in document["notes"] if "namespaceSelector" in n]


@pytest.mark.parametrize(
    "kinds, predicted, notes",
    [
        pytest.param(("Pod", "Namespace"), ["slow-1"], [], id="namespaces-given"),
        pytest.param(("Pod",), [], [explain.sentence(explain.NAMESPACES_MISSING)], id="no-namespaces"),
    ],
)
def test_a_namespace_selector_matches_the_labels_of_the_pods_files_namespaces(kinds, predicted, notes, tmp_path):
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": _objects_of(NS_PODS, *kinds)}))
    document = json.loads(explained("--pod", NS_POD, "--nodes", str(NS_NODES), "--pods", str(pods), "-o", "json"))
    assert (document["predicted"], document["netqos_predicted"]) == (predicted, predicted)
    assert {n["name"]: n["reasons"] for n in document["nodes"]}["fast-1"] == [NO_POD_AFFINITY]
    assert _namespace_notes(document) == notes


@pytest.mark.parametrize(
    "pod, forbidden, predicted, notes, listed",
    [
        pytest.param(NS_POD, set(), ["slow-1"], [], True, id="listed"),
        pytest.param(
            NS_POD, {"namespaces"}, [], [explain.sentence(explain.NAMESPACES_FORBIDDEN)], True, id="forbidden"
        ),
        # no term has a namespaceSelector: the namespaces are not read
        pytest.param(TEST_POD, set(), ["fast-1"], [], False, id="not-needed"),
    ],
)
def test_live_mode_lists_the_namespaces_only_when_a_namespace_selector_reads_them(
    pod, forbidden, predicted, notes, listed, tmp_path, monkeypatch, capsys
):
    objects = [*_objects_of(NS_NODES, "Node"), *_objects_of(NS_PODS, "Pod", "Namespace")]
    snapshot = kubeapi.Snapshot(forbidden=forbidden).add_all(objects)
    with kubeapi.serve(snapshot, tmp_path) as api:
        monkeypatch.setenv("KUBECONFIG", str(api.kubeconfig))
        code, out, err = command("--pod", pod, "-o", "json", capsys=capsys)
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert document["predicted"] == predicted
    assert _namespace_notes(document) == notes
    assert any(p.split("?")[0] == "/api/v1/namespaces" for p in api.requests) == listed


# --- a pod taken from the cluster ----------------------------------------------------------------

WRITTEN = yaml.safe_load((FULL / "pod.yaml").read_text())  # order-router, as its author wrote it
OWN_TERM = {"weight": 20, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}


def with_own_term(pod: dict) -> dict:
    pod = copy.deepcopy(pod)
    pod["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [OWN_TERM]}}
    return pod


def admitted(pod: dict) -> dict:
    """The pod as the API server stores it once the webhook mutated it (its terms, its annotation)."""
    return copy.deepcopy(mutate(default_policy(), pod).pod)


def scheduled(pod: dict, node_name: str = "std-1") -> dict:
    """The pod as `kubectl get pod -o yaml` prints it once it is stored and bound."""
    pod = copy.deepcopy(pod)
    pod["metadata"].update(uid="0b5c6a52-3d5f-4f3e-9d0a-7c1e1d2f4b11", resourceVersion="48213")
    pod["metadata"]["managedFields"] = [{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1"}]
    pod["spec"]["nodeName"] = node_name
    pod["status"] = {"phase": "Running", "hostIP": "10.0.0.12", "podIP": "10.244.1.7"}
    return pod


EXPORTED = [
    # (the pod as its author wrote it, the pod as explain is given it, what the note says was taken away)
    pytest.param(
        WRITTEN,
        scheduled(admitted(WRITTEN)),
        "metadata.uid, metadata.resourceVersion, metadata.managedFields, spec.nodeName, status, the 4 preferred "
        "term(s) rule netqos injected and the annotation netqos.io/injected",
        id="bound-admitted-and-stored",
    ),
    pytest.param(
        WRITTEN,
        admitted(WRITTEN),
        "the 4 preferred term(s) rule netqos injected and the annotation netqos.io/injected",
        id="a-manifest-copied-from-a-mutated-pod",
    ),
    pytest.param(
        WRITTEN,
        scheduled(WRITTEN),
        "metadata.uid, metadata.resourceVersion, metadata.managedFields, spec.nodeName and status",
        id="bound-while-the-webhook-was-down",
    ),
    # the pod's own term stays; the table scaled beside it goes
    pytest.param(
        with_own_term(WRITTEN),
        scheduled(admitted(with_own_term(WRITTEN))),
        "metadata.uid, metadata.resourceVersion, metadata.managedFields, spec.nodeName, status, the 2 preferred "
        "term(s) rule netqos injected and the annotation netqos.io/injected",
        id="with-a-preferred-term-of-its-own",
    ),
]


FULL_FILES = ("--nodes", str(FULL / "nodes.yaml"), "--pods", str(FULL / "pods.yaml"), "-o", "json")


@pytest.mark.parametrize(("written", "given", "taken_away"), EXPORTED)
def test_a_pod_from_the_cluster_is_explained_as_it_was_written(written, given, taken_away, tmp_path):
    (tmp_path / "written.yaml").write_text(yaml.safe_dump(written))
    (tmp_path / "given.yaml").write_text(yaml.safe_dump(given))
    expected = json.loads(explained("--pod", str(tmp_path / "written.yaml"), *FULL_FILES))
    report = json.loads(explained("--pod", str(tmp_path / "given.yaml"), *FULL_FILES))
    same = ("nodes", "predicted", "netqos_predicted", "predictions_match", "injected_terms", "decision")
    assert {k: report[k] for k in same} == {k: expected[k] for k in same}
    assert report["predictions_match"] and sum(n["feasible"] for n in report["nodes"]) > 1  # NodeName is gone
    assert report["notes"][0] == f"explained as the pod was before admission and scheduling, without {taken_away}."
    assert report["notes"][1:] == expected["notes"]


def test_a_pod_annotated_by_a_rule_the_policy_no_longer_has_keeps_its_terms_and_says_so(tmp_path):
    pod = admitted(WRITTEN)
    pod["metadata"]["annotations"]["netqos.io/injected"] = "netqos-v1"
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod))
    report = json.loads(explained("--pod", str(tmp_path / "pod.yaml"), *FULL_FILES))
    assert report["notes"][:2] == [
        "explained as the pod was before admission and scheduling, without the annotation netqos.io/injected.",
        "netqos.io/injected names netqos-v1, which the policy has no rule of: the terms such a rule injected cannot "
        "be told from the pod's own and are kept.",
    ]
    assert report["decision"] == "unchanged"  # they are the current policy's terms: already there


def live_cluster(*extra: dict) -> kubeapi.Snapshot:
    """The full-cluster example as a cluster: its nodes and pods, the Namespace, and `extra`."""
    nodes = yaml.safe_load((FULL / "nodes.yaml").read_text())["items"]
    pods = yaml.safe_load((FULL / "pods.yaml").read_text())["items"]
    return kubeapi.Snapshot().add_all([*nodes, *pods, kubeapi.namespace("trading"), *extra])


ORDER_ROUTER = kubeapi.workload(
    "Deployment", "trading", "order-router", template={"metadata": WRITTEN["metadata"], "spec": WRITTEN["spec"]}
)


@pytest.mark.parametrize(
    ("argv", "in_cluster", "read", "pod_name"),
    [
        (("pod/order-router", "-n", "trading"), scheduled(admitted(WRITTEN)), "pods", "order-router"),
        (("po/order-router", "--namespace", "trading"), scheduled(admitted(WRITTEN)), "pods", "order-router"),
        (("pods/order-router", "-n", "trading"), scheduled(admitted(WRITTEN)), "pods", "order-router"),
        # a name alone is a pod's, as kubectl describe pod NAME and kubectl logs NAME take it
        (("order-router", "-n", "trading"), scheduled(admitted(WRITTEN)), "pods", "order-router"),
        # the pod the Deployment's ReplicaSet creates next, from the template
        (("deployment/order-router", "-n", "trading"), ORDER_ROUTER, "deployments", "order-router-"),
        (("deploy/order-router", "-n", "trading"), ORDER_ROUTER, "deployments", "order-router-"),
    ],
)
def test_a_pod_or_workload_named_in_the_cluster_is_read_and_explained_as_written(
    argv, in_cluster, read, pod_name, tmp_path, capsys
):
    with kubeapi.serve(live_cluster(in_cluster), tmp_path) as api:
        code, out, err = command(*argv, "--kubeconfig", str(api.kubeconfig), "-o", "json", capsys=capsys)
    assert (code, err) == (0, "")
    report = json.loads(out)
    expected = json.loads(explained("--pod", str(FULL / "pod.yaml"), *FULL_FILES))
    assert (report["pod"], report["namespace"]) == (pod_name, "trading")
    for key in ("predicted", "netqos_predicted", "predictions_match", "injected_terms"):
        assert report[key] == expected[key], key
    totals = lambda r: {n["name"]: (n["feasible"], n["total"], n["netqos_total"]) for n in r["nodes"]}  # noqa: E731
    assert totals(report) == totals(expected)
    assert any(path.endswith(f"/namespaces/trading/{read}/order-router") for path in api.requests)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("pod/order-router", "-n", "shop"),
            "pod order-router not found in namespace shop (cluster of kubeconfig {kubeconfig}); list them: "
            "kubectl -n shop get pods.",
        ),
        (
            ("deployment/api", "-n", "trading"),
            "deployment api not found in namespace trading (cluster of kubeconfig {kubeconfig}); list them: "
            "kubectl -n trading get deployments.",
        ),
        (
            ("daemonset/agent",),
            "'daemonset/agent' is not TYPE/NAME of a kind explain reads: pod/NAME, deployment/NAME, "
            "statefulset/NAME, replicaset/NAME, replicationcontroller/NAME, job/NAME, cronjob/NAME.",
        ),
        # without -n, the namespace of the kubeconfig's context (the fake API server's: default), as kubectl
        (
            ("order-router",),
            "pod order-router not found in namespace default (cluster of kubeconfig {kubeconfig}); list them: "
            "kubectl -n default get pods.",
        ),
        (
            ("pod/order-router", "--pod", TEST_POD),
            "give the pod to explain: TYPE/NAME of the cluster (pod/NAME, deployment/NAME, ...) or --pod FILE, one.",
        ),
        (
            ("pod/order-router", "-n", "trading", "--nodes", EXPERIMENT_NODES),
            "pod/order-router is read from the cluster, and explained against its nodes and pods: drop --nodes, or "
            "save the pod (kubectl get pod NAME -o yaml) and give it with --pod.",
        ),
        (
            ("--pod", TEST_POD, "-n", "trading", "--nodes", EXPERIMENT_NODES),
            f"-n names the namespace of TYPE/NAME; pod file {TEST_POD} says its own (metadata.namespace).",
        ),
        (("pod/order-router", "-n", "Trading"), "namespace 'Trading' is not a valid namespace name"),
    ],
)
def test_a_pod_that_cannot_be_read_from_the_cluster_is_one_line_and_exit_code_2(argv, message, tmp_path, capsys):
    with kubeapi.serve(live_cluster(scheduled(admitted(WRITTEN))), tmp_path) as api:
        flags = () if "--nodes" in argv else ("--kubeconfig", str(api.kubeconfig))  # the two exclude each other
        code, out, err = command(*argv, *flags, capsys=capsys)
    assert (code, out) == (2, "")
    assert err.startswith(f"netqos-webhook explain: {message.format(kubeconfig=api.kubeconfig)}"), err
    assert err.count("\n") == 1


def test_without_a_pod_explain_says_what_to_give(capsys):
    code, out, err = command("--nodes", EXPERIMENT_NODES, capsys=capsys)
    assert (code, out) == (2, "")
    assert err == (
        "netqos-webhook explain: give the pod to explain: TYPE/NAME of the cluster (pod/NAME, deployment/NAME, ...) "
        "or --pod FILE, one.\n"
    )
