"""`rebalance` places a replacement as the cluster's own kube-scheduler would: the version is the
API server's /version, and its default profile is that release's (webhook/scheduler/registry.py
VERSION_VARIANTS). Two fast nodes between which only NodeResourcesBalancedAllocation decides:
kube-scheduler 1.34 and 1.35 score the balance with the pod, 1.36 and 1.37 the change the pod
makes (plugins/noderesources/balanced_allocation.go at v1.35.4 and v1.36.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import kubeapi
from harness.kubeapi import Snapshot, node, pod
from tests.process.test_rebalance import app, plan_rows, rebalance, registration, workloads

# The replacement asks 1 CPU and 1Gi (the ReplicaSet's template).
# fast-a: 4 CPU, 8Gi, 2 CPU and 2Gi taken. fast-b: 8 CPU, 8Gi, 500m and 6Gi taken.
#   NodeResourcesFit (LeastAllocated): fast-a (25 + 62) / 2 = 43, fast-b (81 + 12) / 2 = 46
#   BalancedAllocation with the pod: fast-a shares 3/4, 3/8: (1 - 0.1875) x 100 = 81;
#     fast-b 1.5/8, 7/8: (1 - 0.34375) x 100 = 65
#   BalancedAllocation as the change: fast-a without the pod 2/4, 2/8 = 87: 50 + (50 + 81 - 87) / 2
#     = 72; fast-b without 0.5/8, 6/8 = 65: 50 + (50 + 65 - 65) / 2 = 75
#   Every other plugin scores both alike, so 43 + 81 > 46 + 65 on 1.34/1.35 (fast-a) and
#   43 + 72 < 46 + 75 on 1.36/1.37 (fast-b).
TARGET = {"1.34": "fast-a", "1.35": "fast-a", "1.36": "fast-b", "1.37": "fast-b"}
PATCHES = {"1.34": "v1.34.4", "1.35": "v1.35.4", "1.36": "v1.36.3", "1.37": "v1.37.2"}


def sized(obj: dict[str, Any], cpu: str, memory: str) -> dict[str, Any]:
    obj["status"] = {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}
    return obj


def taking(name: str, node_name: str, cpu: str, memory: str) -> dict[str, Any]:
    p = pod("shop", name, {"app": "batch"}, node_name)
    p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": memory}}
    return p


def cluster() -> list[dict[str, Any]]:
    return [
        *registration(),
        kubeapi.namespace("shop"),
        sized(node("fast-a", "high"), "4", "8Gi"),
        sized(node("fast-b", "high"), "8", "8Gi"),
        sized(node("slow-1", "low"), "16", "64Gi"),
        taking("batch-a", "fast-a", "2", "2Gi"),
        taking("batch-b", "fast-b", "500m", "6Gi"),
        *workloads("web-a"),
        app("web-a-slow", "slow-1", "web-a-rs", preferred=None),
        app("web-a-other", "slow-1", "web-a-rs", "2026-05-02T00:00:00Z", preferred=None),
    ]


@pytest.mark.parametrize("minor", list(TARGET))
def test_the_replacement_is_placed_as_the_clusters_kube_scheduler_version_would(tmp_path: Path, minor: str) -> None:
    major, minor_number = minor.split(".")
    served = Snapshot(version={"major": major, "minor": minor_number, "gitVersion": PATCHES[minor]})
    code, report, evictions, requests = rebalance(cluster(), tmp_path, snapshot=served)
    assert plan_rows(report)[0] == ("web-a-slow", "evict", TARGET[minor])
    assert "/version" in {r.split("?")[0].rstrip("/") for r in requests}
    assert evictions == []
