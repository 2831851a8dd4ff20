"""What kube-scheduler does differently per release, on that release's real control plane, and
`explain --kubeconfig` predicting it from the cluster's /version.

NodeDeclaredFeatures (on from 1.36) keeps a pod that needs a node feature off nodes whose
status.declaredFeatures lack it. A container restart rule with the RestartAllContainers action
needs RestartAllContainersOnContainerExits. Before 1.36 the API server does not take the rule:
1.34 (ContainerRestartRules alpha, off) drops the container's restart policy and rules and stores
the pod (measured); 1.35 (the action alpha, off) refuses it, 422 (pkg/api/pod/util.go and
validation.go validateContainerRestartPolicy at v1.35.4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.controlplane import Cluster
from tests.e2e.conftest import cli

FEATURE = "RestartAllContainersOnContainerExits"
UNDECLARED = "node(s) didn't match Pod's required features"
# Per release: whether the API server stores the pod with its restart rules, drops them or refuses
# the pod; where the real scheduler binds it; and explain's reasons for the node without the feature.
KEPT, DROPPED, REFUSED = "kept", "dropped", "refused"
EXPECTED: dict[str, tuple[str, str | None, list[str]]] = {
    "1.34": (DROPPED, "silent", []),  # nothing filters: the emptier node wins
    "1.35": (REFUSED, None, []),
    "1.36": (KEPT, "declares", [UNDECLARED]),
    "1.37": (KEPT, "declares", [UNDECLARED]),
}


def node(name: str, cpu: str, declared: list[str]) -> dict[str, Any]:
    status: dict[str, Any] = {
        "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
        "capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }
    if declared:
        status["declaredFeatures"] = declared
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}


RESTARTING = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "restarting"},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                "restartPolicy": "Never",
                "restartPolicyRules": [
                    {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
                ],
            }
        ],
    },
}


def test_a_pod_needing_a_node_feature_goes_where_it_is_declared_as_each_release_filters(
    cluster: Cluster, namespace: str, nodes: None, tmp_path: Path
) -> None:
    # Without NodeDeclaredFeatures the emptier `silent` node would win on resources.
    cluster.create(node("declares", "2", [FEATURE]))
    cluster.create(node("silent", "32", []))
    stored, bound, silent = EXPECTED[cluster.minor]
    status, created = cluster.request("POST", f"/api/v1/namespaces/{namespace}/pods", {**RESTARTING})
    if stored == REFUSED:
        assert status == 422 and "restartPolicyRules[0].action" in json.dumps(created), (status, created)
        return
    assert status == 201, (status, created)
    rules = created["spec"]["containers"][0].get("restartPolicyRules")
    assert rules == (RESTARTING["spec"]["containers"][0]["restartPolicyRules"] if stored == KEPT else None)
    assert cluster.wait_bound(namespace, "restarting") == bound

    # explain of the pod as written, scored as the cluster's /version says
    path = tmp_path / "pod.json"
    path.write_text(json.dumps({**RESTARTING, "metadata": {"name": "restarting", "namespace": namespace}}))
    report = json.loads(cli(cluster, "explain", "--pod", str(path), "-o", "json").stdout)
    assert report["predicted"] == [bound]
    assert {n["name"]: n["reasons"] for n in report["nodes"]} == {"declares": [], "silent": silent}
