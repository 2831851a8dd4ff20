"""`explain --scheduler-config FILE` against a second real kube-scheduler running FILE.

The file's one profile, `list-scheduler`, gives PodTopologySpread `defaultingType: List` with no
`defaultConstraints`: a pod without topologySpreadConstraints of its own is not spread at all
(podtopologyspread/plugin.go New, v1.36.3), where the default `System` spreads it from the pods
its Services select (hostname maxSkew 3, zone maxSkew 5).

node-a holds ten pods a Service selects; the pod, behind the same Service, prefers node-a
(preferred terms of weight 10 on pool=a and 5 on pool in (a, b): NodeAffinity 100 on node-a, 33
on node-b, at weight 2). Under the system defaults PodTopologySpread (weight 2) scores node-b 100
and node-a 12, enough to pull the pod to node-b; under the file's List nothing spreads it and
the scheduler binds node-a. `explain` must predict node-a from the file the scheduler runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import cli

LIST_SCHEDULER = "list-scheduler"
CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {
            "schedulerName": LIST_SCHEDULER,
            "pluginConfig": [
                {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": []}}
            ],
        }
    ],
}
SIBLINGS = 10
PREFERS_A = [
    {"weight": 10, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}},
    {"weight": 5, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "b"]}]}},
]


@pytest.fixture
def list_scheduler(cluster) -> Iterator[Path]:
    """A second kube-scheduler running CONFIG; the file it runs."""
    path = cluster.start_scheduler(LIST_SCHEDULER, CONFIG)
    yield path
    cluster.stop_scheduler(LIST_SCHEDULER)


def node(name: str, pool: str) -> dict[str, Any]:
    allocatable = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "pool": pool}},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def web_pod(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}], **spec},
    }


def service(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
    }


def test_explain_predicts_the_node_a_scheduler_running_the_file_binds_with_list_defaulting_and_no_constraints(
    cluster, namespace, nodes, list_scheduler, tmp_path
):
    for name, pool in (("node-a", "a"), ("node-b", "b")):
        cluster.create(node(name, pool))
    cluster.create(service(namespace), namespace)
    for i in range(SIBLINGS):
        cluster.create(web_pod(f"sibling-{i}", namespace, nodeName="node-a"), namespace)
    cluster.wait_scheduler_cache(2, SIBLINGS, scheduler=LIST_SCHEDULER)
    probe = web_pod(
        "probe",
        namespace,
        schedulerName=LIST_SCHEDULER,
        affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": PREFERS_A}},
    )
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(probe))

    result = cli(cluster, "explain", "--pod", str(path), "--scheduler-config", str(list_scheduler), "-o", "json")
    report = json.loads(result.stdout)
    cluster.create(probe, namespace)
    bound = cluster.wait_bound(namespace, "probe")

    scores = {n["name"]: n["scores"] for n in report["nodes"]}
    assert (bound, report["predicted"]) == ("node-a", ["node-a"]), scores
    assert "PodTopologySpread" not in scores["node-a"], scores  # PreScore skips: no default constraints
    assert any("defaultingType List and no defaultConstraints" in note for note in report["notes"]), report["notes"]
