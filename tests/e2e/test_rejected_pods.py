"""The pods review calls `invalid` are the pods the real API server refuses: each file of
tests/fixtures/rejected_pods, created by a server-side dry run (`dryRun=All`, nothing stored), is
rejected naming the same field, and review over the same files reports each `invalid`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.controlplane import Cluster
from tests.e2e.conftest import cli
from tests.fixtures.rejected_pods import HERE, REJECTED


def dry_run_create(cluster: Cluster, namespace: str, path: Path) -> tuple[int, Any]:
    """POST the file's pod as kubectl would send it (JSON), with dryRun=All."""
    pod = yaml.safe_load(path.read_text())
    return cluster.request("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)


@pytest.mark.parametrize(("name", "_", "refusal"), REJECTED, ids=[r[0] for r in REJECTED])
def test_the_api_server_rejects_each_pod_review_calls_invalid(cluster: Cluster, namespace: str, name, _, refusal):
    status, body = dry_run_create(cluster, namespace, HERE / name)
    assert status in (400, 422), body  # BadRequest: it cannot be decoded; Invalid: it fails validation
    assert refusal in body["message"], body["message"]

    records = json.loads(cli(cluster, "review", str(HERE / name), str(HERE / name), "-o", "json").stdout)
    assert [r["decision"] for r in records] == ["invalid", "invalid"]


def test_the_valid_pod_beside_them_is_accepted_by_the_same_dry_run(cluster: Cluster, namespace: str):
    """The refusals above are the fields', not the request's: the same pod made valid is accepted."""
    pod = yaml.safe_load((HERE / "weight-500.yaml").read_text())
    pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] = 50
    status, body = cluster.request("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)
    assert status == 201, body
