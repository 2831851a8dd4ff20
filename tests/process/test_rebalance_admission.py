"""`netqos-webhook rebalance` predicts each replacement as the API server would admit it, against
the fake API server (harness/kubeapi.py) through the real `kubernetes` client: where its
credentials may create pods, the API server's dry-run create is the answer; where RBAC says no (a
SelfSubjectAccessReview), the model admits it from the LimitRanges and RuntimeClasses it lists;
the JSON and the notes say which."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from harness import kubeapi
from harness.kubeapi import Snapshot, node, pod, workload
from tests.process.test_rebalance import rebalance, registration, sized

QOS = {"qos": "latency-sensitive", "app": "web"}
DRY_RUN = "POST /api/v1/namespaces/shop/pods?dryRun=All"
REVIEW = "POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
LIMIT_RANGE = {
    "apiVersion": "v1",
    "kind": "LimitRange",
    "metadata": {"name": "defaults", "namespace": "shop"},
    "spec": {"limits": [{"type": "Container", "default": {"cpu": "2"}, "defaultRequest": {"cpu": "2"}}]},
}


def stranded() -> list[dict[str, Any]]:
    """fast-1 (net=high) has 1 CPU free, slow-1 room; web's pod runs on slow-1, and its template
    requests nothing (a LimitRange is to give it its requests)."""
    template = {"metadata": {"labels": QOS}, "spec": {"containers": [{"name": "app", "image": "app:1"}]}}
    web = pod("shop", "web-1-abcde", QOS, "slow-1", ("ReplicaSet", "web-1"), "2026-05-01T00:00:00Z")
    db = pod("shop", "db-1-abcde", {"app": "db"}, "fast-1", ("ReplicaSet", "db-1"), "2026-05-01T00:00:00Z")
    db["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    return [
        *registration(),
        kubeapi.namespace("shop"),
        sized(node("fast-1", "high"), "2"),
        sized(node("slow-1", "low"), "16"),
        workload("Deployment", "shop", "web"),
        workload("ReplicaSet", "shop", "web-1", owner=("Deployment", "web"), template=template),
        web,
        db,
    ]


def limit_ranger(pod: dict[str, Any]) -> dict[str, Any]:
    """What the API server's LimitRanger does to the pod for LIMIT_RANGE, as a dry run returns it."""
    admitted = copy.deepcopy(pod)
    for container in admitted["spec"]["containers"]:
        container["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}
    return admitted


def plan(objs: list[dict[str, Any]], snapshot: Snapshot, tmp_path: Path) -> tuple[dict[str, Any], list[str]]:
    """The one candidate's row of `rebalance -o json --min-replicas 0`, and the requests sent."""
    code, report, _, requests = rebalance(objs, tmp_path, "min_replicas", "0", snapshot=snapshot)
    assert code in (0, 3)
    return report["candidates"][0], requests


@pytest.mark.parametrize(
    ("case", "objects", "snapshot", "action", "admission", "dry_runs"),
    [
        (
            "may create pods: the dry run's pod (LimitRanger's 2 CPUs) does not fit fast-1",
            [],
            lambda: Snapshot(admit=limit_ranger),
            "skip",
            "dry-run",
            1,
        ),
        (
            "may not create pods: the model reads the LimitRange, and its 2 CPUs do not fit fast-1",
            [LIMIT_RANGE],
            lambda: Snapshot(),
            "skip",
            "model",
            0,
        ),
        (
            "may not create pods and no LimitRange: the replacement requests nothing and fits",
            [],
            lambda: Snapshot(admit=limit_ranger, forbidden={"pods/create"}),
            "evict",
            "model",
            0,
        ),
    ],
)
def test_the_replacement_is_the_dry_runs_where_rbac_allows_it_else_the_models(
    case: str,
    objects: list[dict[str, Any]],
    snapshot: Any,
    action: str,
    admission: str,
    dry_runs: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    row, requests = plan([*stranded(), *objects], snapshot(), tmp_path)
    assert (row["name"], row["action"], row["admission"]) == ("web-1-abcde", action, admission), case
    assert requests.count(REVIEW) == 1  # one access review per namespace of candidates
    assert requests.count(DRY_RUN) == dry_runs
    notes = capsys.readouterr().err
    if admission == "dry-run":
        assert "replacements are predicted as the API server admits them: a dry-run create (dryRun=All)" in notes
    else:
        assert (
            "replacements are predicted as admitted by the model (all: defaults, LimitRanger's default requests and "
            "limits, " in notes
        )
        assert "RBAC does not let these credentials create pods in namespace shop (a dry run is one)" in notes


def test_limit_ranges_rbac_hides_are_not_modelled_and_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    row, _ = plan([*stranded(), LIMIT_RANGE], Snapshot(forbidden={"limitranges"}), tmp_path)
    assert (row["action"], row["admission"]) == ("evict", "model")
    assert (
        "cannot list LimitRanges (forbidden by RBAC): replacements are predicted without LimitRanger's defaults"
        in capsys.readouterr().err
    )
