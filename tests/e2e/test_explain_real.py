"""`explain` against the real kube-scheduler, on random clusters (benchmarks/explain_real.py; the
full run is `scripts/fidelity-real`, its results in docs/scheduling.md). For every cluster: the
node the default profile binds the pod the webhook mutated is in explain's predicted set, and the
node the `netqos-scheduler` profile binds the pod as written is in explain's NetQoS prediction;
every other pod has preferred node affinity of its own (the table scaled to it), and the clusters
rotate through a bare pod, a pod behind a Service with siblings on the nodes (PodTopologySpread's
default spreading) and pods with anti-affinity. Every miss is printed with explain's ranking."""

from __future__ import annotations

import io
import os

from benchmarks import explain_real

CLUSTERS = int(os.environ.get("NETQOS_E2E_EXPLAIN_CLUSTERS", "4"))


def test_explain_predicts_the_node_the_real_scheduler_binds_on_random_clusters(cluster, registered, nodes, tmp_path):
    misses = io.StringIO()
    try:
        results = explain_real.run(cluster, CLUSTERS, seed=20261203, max_nodes=60, workdir=tmp_path, out=misses)
    finally:
        cluster.delete_namespace(explain_real.NAMESPACE)
    assert len(results) == CLUSTERS
    assert max(r.nodes for r in results) > 10, "the seed draws small and large clusters"
    assert any(r.latency_sensitive and r.own_preferences for r in results), "a pod with preferences of its own"
    assert {r.kind for r in results} == {"bare", "behind a Service", "anti-affinity"}
    assert all(r.agrees and r.netqos_agrees for r in results), misses.getvalue()
