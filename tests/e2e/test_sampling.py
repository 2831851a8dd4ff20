"""Sampling on the real kube-scheduler: with 300 nodes it scores 144 per cycle (48%), walking the
node list from where the cycle before stopped, so a single net=high node among them is in the
sample of some cycles only. explain's probability that a latency-sensitive pod lands on it is
checked against the share of real bindings over a run of probes, within binomial noise, for
both profiles (default-scheduler, and netqos-scheduler with the NetQoS scheduler plugin); and
rebalance plans no move below --min-probability.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import cli
from tests.e2e.test_status import deployment, node, pods_of, run_all

NODES = 300
FAST = "n007"  # the only net=high node
PROBES = 40
LABELS = {"qos": "latency-sensitive", "app": "probe"}


def probe(name: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": LABELS},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }


def wait_cache_nodes(cluster, count: int, timeout: float = 60) -> None:
    """Until the scheduler's cache holds `count` nodes (its informer lags behind the API server)."""
    deadline = time.monotonic() + timeout
    while cluster.scheduler_cache().get("nodes") != count:
        assert time.monotonic() < deadline, f"the scheduler's cache holds {cluster.scheduler_cache()}"
        time.sleep(0.2)


@pytest.fixture
def wide(cluster, nodes) -> None:
    """300 nodes created one after another (the scheduler's node tree lists them in that order),
    n007 net=high, the others net=low, all with room."""
    for i in range(NODES):
        cluster.create(node(f"n{i:03}", "high" if f"n{i:03}" == FAST else "low"))
    wait_cache_nodes(cluster, NODES)


@pytest.mark.parametrize("scheduler", ["default-scheduler", "netqos-scheduler"])
def test_explains_probability_of_landing_on_the_fast_node_matches_the_real_bindings(
    cluster, registered, namespace: str, wide, scheduler: str, tmp_path: Path
) -> None:
    path = tmp_path / "probe.yaml"
    written = probe("probe", "default-scheduler")
    written["metadata"]["namespace"] = namespace
    path.write_text(yaml.safe_dump(written))
    report = json.loads(cli(cluster, "explain", "--pod", str(path), "-o", "json").stdout)
    sampling = report["sampling"]
    assert (sampling["nodes"], sampling["scored_per_cycle"], sampling["sampled"]) == (NODES, 144, True)
    key = "target_probability" if scheduler == "default-scheduler" else "netqos_target_probability"
    predicted = sampling[key]
    assert predicted == pytest.approx(144 / NODES)

    on_fast = 0
    for i in range(PROBES):
        cluster.create(probe(f"probe-{i}", scheduler), namespace)
        on_fast += cluster.wait_bound(namespace, f"probe-{i}") == FAST
        cluster.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/probe-{i}", {"gracePeriodSeconds": 0})
    observed = on_fast / PROBES
    noise = 3 * math.sqrt(predicted * (1 - predicted) / PROBES)
    assert abs(observed - predicted) <= noise, (observed, predicted, noise)


def label_net(cluster, name: str, net: str) -> None:
    code, body = cluster.request(
        "PATCH", f"/api/v1/nodes/{name}", {"metadata": {"labels": {"net": net}}}, "application/merge-patch+json"
    )
    assert code == 200, body


def test_rebalance_plans_no_move_whose_replacement_lands_on_the_fast_node_too_rarely(
    cluster, registered, namespace: str, wide
) -> None:
    label_net(cluster, FAST, "low")  # the pod lands on a slow node, then n007 becomes the fast one
    cluster.create(deployment("web", 1), namespace)
    [stranded] = pods_of(cluster, namespace, 1, "app%3Dweb")
    run_all(cluster, [stranded])
    label_net(cluster, FAST, "high")
    plan = ("rebalance", "--min-age", "0", "--min-replicas", "1", "-o", "json")

    [row] = [
        c for c in json.loads(cli(cluster, *plan, check=False).stdout)["candidates"] if c["namespace"] == namespace
    ]
    assert (row["action"], row["constraint"]) == ("skip", "probability"), row
    assert row["probability"] == pytest.approx(144 / NODES, abs=0.01)
    assert row["reason"].endswith("below --min-probability 0.9"), row["reason"]

    lenient = json.loads(cli(cluster, *plan, "--min-probability", "0.4", check=False).stdout)
    [row] = [c for c in lenient["candidates"] if c["namespace"] == namespace]
    assert (row["action"], row["target"]) == ("evict", FAST), row


def test_the_sampling_benchmark_measures_both_profiles_and_records_the_run(
    cluster, registered, nodes, tmp_path: Path
) -> None:
    """A smoke of `python -m benchmarks.sampling` (docs/scheduling.md's figures): 120 nodes, 3 pods
    per profile; the record has its header and one row per profile."""
    from benchmarks import sampling as bench

    rows = bench.run(cluster, [120], 1, 3, tmp_path)
    assert [(r.nodes, r.profile, r.pods) for r in rows] == [
        (120, "adaptive-scheduler", 3),
        (120, "full-scheduler", 3),
    ]
    assert rows[1].predicted == 1.0 and rows[1].landed == 3  # every node scored: always the fast one
    assert 0 < rows[0].predicted < 1 and all(r.pods_per_second > 0 and r.attempt_ms > 0 for r in rows)
    path = bench.record(rows, "python -m benchmarks.sampling --nodes 120 --pods 3", (1.0, 2.0), 12.0, tmp_path)
    text = path.read_text()
    assert text.startswith("# Sampling on the real kube-scheduler, ")
    assert "- command: `python -m benchmarks.sampling --nodes 120 --pods 3`" in text
    assert text.count("| 120 | 1 |") == 2
