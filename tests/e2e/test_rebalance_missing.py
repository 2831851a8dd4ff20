"""`netqos-webhook rebalance --missing` on the real control plane: pods created while the webhook was
down (its registration pointing at a closed port: the real API server fails open, as
`failurePolicy: Ignore` says) are recreated with the preference. The real Eviction API evicts them,
the real ReplicaSet controller re-creates them through the real API server, which calls the
session's webhook again, and the real scheduler binds the replacements. A real
PodDisruptionBudget (its disruptionsAllowed kept by the real disruption controller) and a
system-critical priority (the real Priority admission plugin's) keep their pods, reported;
pods that carry the preference and pods no rule selects are never candidates.
"""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.conftest import WEBHOOK_CONFIGURATION, cli, node_affinity, register
from tests.e2e.test_rebalance import budget, wait_disruptions_allowed
from tests.e2e.test_rebalance_safety import mine, replacement_of, still_running
from tests.e2e.test_status import deployment, node, pods_of, run_all
from webhook.names import INJECTED_ANNOTATION

CLOSED_PORT = "https://127.0.0.1:1/mutate"  # nothing listens: every call is refused, and fails open
RECREATE = ("rebalance", "--missing", "--apply", "--min-age", "0", "--max-evictions", "2", "-o", "json")


def webhook_down(cluster) -> None:
    """Every entry of the registration calls a closed port, until registered again."""
    config = cluster.get(WEBHOOK_CONFIGURATION)
    for entry in config["webhooks"]:
        entry["clientConfig"] = {**entry["clientConfig"], "url": CLOSED_PORT}
    code, body = cluster.request("PUT", WEBHOOK_CONFIGURATION, config)
    assert code == 200, body
    cluster.wait_webhook(active=False)


def created(cluster, namespace: str, workload: dict[str, Any]) -> list[dict[str, Any]]:
    """The workload's two pods, bound and Running."""
    name = workload["metadata"]["name"]
    cluster.create(workload, namespace)
    pods = pods_of(cluster, namespace, 2, f"app%3D{name}")
    run_all(cluster, pods)
    return pods


def has_preference(pod: dict[str, Any]) -> bool:
    return node_affinity(pod) != [] and INJECTED_ANNOTATION in (pod["metadata"].get("annotations") or {})


def test_pods_created_while_the_webhook_was_down_are_recreated_with_the_preference_and_budgets_and_priority_hold(
    cluster, registered, namespace: str, nodes
) -> None:
    cluster.create(node("fast-1", "high"))  # the only node while they are created: they all run on net=high
    webhook_down(cluster)
    try:
        late = {name: created(cluster, namespace, deployment(name, 2)) for name in ("late-a", "late-b", "late-c")}
        guarded = created(cluster, namespace, deployment("guarded", 2))
        critical_workload = deployment("critical", 2)
        critical_workload["spec"]["template"]["spec"]["priorityClassName"] = "system-cluster-critical"
        critical = created(cluster, namespace, critical_workload)
        unselected_workload = deployment("batch", 2)
        unselected_workload["spec"]["template"]["metadata"]["labels"] = {"app": "batch"}
        unselected = created(cluster, namespace, unselected_workload)
    finally:
        register(cluster, registered)  # the webhook is back
    covered = created(cluster, namespace, deployment("covered", 2))
    cluster.create(node("slow-1", "low"))
    down = [p for pods in (*late.values(), guarded, critical) for p in pods]
    assert not any(has_preference(p) for p in [*down, *unselected]), "the webhook failed open"
    assert all(has_preference(p) for p in covered)
    cluster.create(budget("guarded", 2), namespace)
    wait_disruptions_allowed(cluster, namespace, "guarded", 0)

    # moving stranded pods never sees them: they run on a net=high node
    stranded = json.loads(cli(cluster, "rebalance", "--min-age", "0", "-o", "json", check=False).stdout)
    assert mine(stranded, namespace)[0] == []

    result = cli(cluster, *RECREATE, check=False)
    report = json.loads(result.stdout)
    assert report["mode"] == "missing"
    rows, evictions = mine(report, namespace)
    by_owner: dict[str, list[tuple[str, str]]] = {}
    for row in rows:
        by_owner.setdefault(row["owner"]["name"], []).append((row["action"], row["constraint"]))
    # every pod created while the webhook was down, and none other; each kept one says why
    assert {r["name"] for r in rows} == {p["metadata"]["name"] for p in down}, rows
    assert by_owner["guarded"] == [("skip", "pdb")] * 2
    assert by_owner["critical"] == [("skip", "priority")] * 2
    assert all(sorted(by_owner[name]) == [("evict", ""), ("skip", "one-per-owner")] for name in late), by_owner
    guarded_row = next(r for r in rows if r["owner"]["name"] == "guarded")
    assert guarded_row["reason"] == "blocked: PodDisruptionBudget guarded allows no disruption now (0 allowed)"
    # --max-evictions 2: the first two planned are evicted, the third owner's pod is the next run's
    planned = [r for r in rows if r["action"] == "evict"]
    assert [(e["name"], e["result"]) for e in evictions] == [(r["name"], "evicted") for r in planned[:2]], evictions
    assert result.returncode == 3, result.stderr  # a recreation left for the next run

    # each evicted pod's replacement is created through the webhook, with the preference
    for row in planned[:2]:
        owner = row["owner"]["name"]
        replacement = replacement_of(cluster, namespace, owner, {p["metadata"]["name"] for p in late[owner]})
        assert has_preference(replacement), replacement["spec"].get("affinity")
        assert replacement["spec"]["nodeName"] == row["target"], (row["reason"], replacement["spec"]["nodeName"])
    # the protected, the covered, the unselected and the not yet evicted pods are untouched
    evicted = {e["name"] for e in evictions}
    assert still_running(cluster, namespace, [p for p in down if p["metadata"]["name"] not in evicted])
    assert still_running(cluster, namespace, [*covered, *unselected])
