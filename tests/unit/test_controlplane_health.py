"""`scripts/cluster up` reuses a cluster only when it is really up: an `up` killed part way leaves
processes that answer while its nodes may not exist yet, so such a cluster is not healthy and the
next `up` starts over (tests/e2e/realnodes/test_cluster_lifecycle.py does it for real)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import controlplane

# no process recorded, so nothing is probed: these ports are never dialled
PORTS = dict.fromkeys(("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "netqos-scheduler"), 1)


@pytest.mark.parametrize(
    ("start_seconds", "expected"),
    [
        (0.0, {"start": "unfinished: the 'up' that started it did not finish"}),
        (12.5, {"start": "ok"}),
    ],
    ids=["an-up-that-never-finished-is-not-healthy", "a-finished-up-is-healthy"],
)
def test_a_cluster_is_healthy_only_when_the_up_that_started_it_finished(tmp_path: Path, start_seconds, expected):
    cluster = controlplane.Cluster(tmp_path, tmp_path / "bin", ports=PORTS, pids={}, start_seconds=start_seconds)
    assert cluster.healthy() == expected


def test_a_cluster_without_real_nodes_asks_nothing_about_nodes(tmp_path: Path):
    cluster = controlplane.Cluster(tmp_path, tmp_path / "bin", ports=PORTS, pids={}, start_seconds=1.0)
    assert cluster.node_readiness() == {}
