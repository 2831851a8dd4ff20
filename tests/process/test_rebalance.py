"""`netqos-webhook rebalance` against a fake Kubernetes API server on loopback (harness/kubeapi.py)
speaking the real REST paths, through the real `kubernetes` client and a kubeconfig: the plan names
the right pods and targets, `--apply` sends exactly the evictions it reports (none without it),
PodDisruptionBudgets answer 429, gone pods 404, RBAC 403, and the JSON and exit codes are exact.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import kubeapi
from harness.kubeapi import Snapshot, node, pod, workload
from tests.fixtures import CLASSIC_TERMS, FIXTURES, REPO
from webhook import cluster, evictions
from webhook.cli import main
from webhook.commands.rebalance import RebalanceArgs, run
from webhook.evictions import Record
from webhook.manifests import webhook_configuration
from webhook.owners import Owner
from webhook.policy import Decision, Policy, evaluate
from webhook.policy_file import load_policy, policy_from_bytes

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
NS = "netqos-system"
QOS = {"qos": "latency-sensitive", "app": "web"}
CPU1 = {"requests": {"cpu": "1", "memory": "1Gi"}}
EVICT = "POST /api/v1/namespaces/{ns}/pods/{name}/eviction"
# The classic terms: their net=high lead of 180 keeps a replacement on the fast node that its
# last free CPU makes least attractive by resources (under the default's exact lead of 90, as
# under the NetQoS plugin, the resources would win there and the plan would be a different one).
POLICY = str(REPO / "deploy/examples/policies/classic.yaml")


def sized(obj: dict[str, Any], cpu: str) -> dict[str, Any]:
    obj["status"] = {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}
    return obj


def app(name: str, node_name: str, rs: str, created: str = "2026-05-01T00:00:00Z", **extra: Any) -> dict[str, Any]:
    p = pod("shop", name, extra.pop("labels", QOS), node_name, ("ReplicaSet", rs), created, **extra)
    p["spec"]["containers"][0]["resources"] = CPU1
    return p


def template(labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The pod template `app` pods are made from (the webhook mutates pods, not templates)."""
    container = {"name": "app", "image": "registry.example/app:1", "resources": CPU1}
    return {"metadata": {"labels": labels or QOS}, "spec": {"containers": [container]}}


def workloads(*deployments: str) -> list[dict[str, Any]]:
    out = []
    for d in deployments:
        out += [
            workload("Deployment", "shop", d),
            workload("ReplicaSet", "shop", f"{d}-rs", owner=("Deployment", d), template=template()),
        ]
    return out


def registration(ready: int = 2, policy: Policy | None = None, **changes: Any) -> list[dict[str, Any]]:
    """The webhook registered for the policy (what `register` applies: a caBundle) and its Service's
    EndpointSlice with `ready` ready endpoints; `changes` replace fields of every entry."""
    policy = policy or load_policy(POLICY)
    config = webhook_configuration(policy, namespace=NS, ca_bundle=b"-----BEGIN CERTIFICATE-----")
    for entry in config["webhooks"]:
        entry.update(changes)
    endpoints = [{"addresses": [f"10.0.0.{i + 1}"], "conditions": {"ready": True}} for i in range(ready)]
    slice_ = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "netqos-webhook-abcde",
            "namespace": NS,
            "labels": {"kubernetes.io/service-name": "netqos-webhook"},
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
    }
    return [config, slice_, kubeapi.namespace(NS), kubeapi.namespace("kube-system")]


def base_cluster(registered: bool = True) -> list[dict[str, Any]]:
    """fast-1 (net=high) has room for two 1-CPU pods, fast-2 (net=high) for none; web-a, web-b and
    web-c each run a pod on a slow node (oldest first) and a second, ready, on fast-2; the webhook
    registered and serving."""
    objs = [
        *(registration() if registered else []),
        kubeapi.namespace("shop"),
        sized(node("fast-1", "high"), "2"),
        sized(node("fast-2", "high"), "3"),
        sized(node("slow-1", "low"), "16"),
        sized(node("plain-1"), "16"),
        *workloads("web-a", "web-b", "web-c"),
    ]
    for i, d in enumerate(("web-a", "web-b", "web-c")):
        where = "slow-1" if i != 1 else "plain-1"
        objs.append(app(f"{d}-slow", where, f"{d}-rs", f"2026-05-0{i + 1}T00:00:00Z", preferred=CLASSIC_TERMS))
        objs.append(app(f"{d}-fast", "fast-2", f"{d}-rs", preferred=CLASSIC_TERMS))
    return objs


def rebalance(
    objs: list[dict[str, Any]], tmp_path: Path, *argv: str, snapshot: Snapshot | None = None
) -> tuple[int, dict[str, Any], list[tuple[str, str, int]], list[str]]:
    """Run `rebalance -o json` against the objects; (exit code, report, evictions the server got, requests)."""
    snapshot = snapshot or Snapshot()
    snapshot.add_all(objs)
    with kubeapi.serve(snapshot, tmp_path) as api:
        out = io.StringIO()
        args = RebalanceArgs(kubeconfig=str(api.kubeconfig), output="json", config=POLICY)
        for flag, value in zip(argv[::2], argv[1::2], strict=True):
            args = _with(args, flag, value)
        code = run(args, out, now=NOW)
        return code, json.loads(out.getvalue()), api.evictions, api.requests


def _with(args: RebalanceArgs, flag: str, value: Any) -> RebalanceArgs:
    import dataclasses

    converted: Any = {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value
    if flag in ("max_evictions", "min_replicas", "movable_exit_code"):
        converted = int(value)
    return dataclasses.replace(args, **{flag: converted})


NOTHING_DONE = dict.fromkeys(("evicted", "blocked", "gone", "throttled", "blocked_in_plan"), 0)


def writes(requests: list[str]) -> list[str]:
    """The requests that could change the cluster: every POST but an access review (it asks) and a
    dry-run create (nothing is stored)."""
    asks = ("selfsubjectaccessreviews", "dryRun=All")
    return [r for r in requests if r.startswith("POST") and not any(a in r for a in asks)]


def plan_rows(report: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(c["name"], c["action"], c["target"]) for c in report["candidates"]]


# --- the plan -----------------------------------------------------------------------------------


def on_scheduler(objs: list[dict[str, Any]], replica_set: str, scheduler: str) -> list[dict[str, Any]]:
    """`objs` with the ReplicaSet's template (and so its replacements) scheduled by `scheduler`."""
    for obj in objs:
        if obj.get("kind") == "ReplicaSet" and obj["metadata"]["name"] == replica_set:
            obj["spec"]["template"]["spec"]["schedulerName"] = scheduler
    return objs


SCHEDULERS = str(FIXTURES / "scheduler-config-netqos.yaml")


def test_a_replacement_of_another_scheduler_is_predicted_with_that_profile_when_its_configuration_is_given(
    tmp_path: Path,
) -> None:
    cluster = on_scheduler(base_cluster(), "web-a-rs", "netqos-scheduler")
    _, unknown, _, _ = rebalance(cluster, tmp_path)
    assert plan_rows(unknown)[0] == ("web-a-slow", "skip", None)
    assert unknown["candidates"][0]["constraint"] == "scheduler"
    assert unknown["candidates"][0]["reason"] == (
        "its replacement is scheduled by netqos-scheduler, whose profile is not known: where it would land cannot be "
        "predicted; give that scheduler's KubeSchedulerConfiguration with --scheduler-config FILE"
    )
    _, known, _, _ = rebalance(cluster, tmp_path, "scheduler_config", (SCHEDULERS,))
    assert plan_rows(known)[:2] == [("web-a-slow", "evict", "fast-1"), ("web-b-slow", "evict", "fast-1")]
    assert "(netqos-scheduler's profile)" in known["candidates"][0]["reason"]
    elsewhere = on_scheduler(base_cluster(), "web-a-rs", "gpu-scheduler")
    _, other, _, _ = rebalance(elsewhere, tmp_path, "scheduler_config", (SCHEDULERS,))
    assert other["candidates"][0]["reason"].endswith(
        f"--scheduler-config {SCHEDULERS} has no profile of that name (only default-scheduler, netqos-scheduler, "
        "network-aware); give that scheduler's KubeSchedulerConfiguration with another --scheduler-config FILE"
    )


def test_the_plan_names_the_pods_and_targets_reserving_room_and_evicts_nothing(tmp_path: Path) -> None:
    code, report, evictions, requests = rebalance(base_cluster(), tmp_path)
    assert plan_rows(report) == [
        ("web-a-slow", "evict", "fast-1"),
        ("web-b-slow", "evict", "fast-1"),
        ("web-c-slow", "skip", None),  # fast-1 is full with the two planned before it
    ]
    first = report["candidates"][0]
    assert first == {
        "namespace": "shop",
        "name": "web-a-slow",
        "node": "slow-1",
        "net": "low",
        "owner": {"kind": "Deployment", "name": "web-a"},
        "action": "evict",
        "target": "fast-1",
        "reason": first["reason"],
        "constraint": "",
        "probability": 1.0,  # below 100 nodes every cycle scores every node
        "admission": "model",  # the fake API server lets nobody create pods, even in dry run
        "target_net": "high",
    }
    assert first["reason"].startswith("kube-scheduler would place the replacement on fast-1 (net=high): total ")
    assert report["candidates"][1]["net"] is None  # plain-1 has no net label
    assert report["candidates"][2]["reason"] == (
        "no net=high node fits the replacement: 2/2 net=high node(s): Insufficient cpu"
    )
    assert report["evicted"] == []
    assert report["summary"] == {**NOTHING_DONE, "candidates": 3, "movable": 2, "skipped": 1}
    assert code == 3
    assert evictions == [] and writes(requests) == []


def test_nothing_movable_is_exit_0(tmp_path: Path) -> None:
    objs = [o for o in base_cluster() if o["metadata"]["name"] != "fast-1"]
    code, report, _, _ = rebalance(objs, tmp_path)
    assert [c["action"] for c in report["candidates"]] == ["skip", "skip", "skip"]
    assert code == 0


def test_pods_and_nodes_are_read_with_one_paginated_list_each_and_owners_by_get(tmp_path: Path) -> None:
    _, _, _, requests = rebalance(base_cluster(), tmp_path)
    lists = sorted(r.split("?")[0] for r in requests if "?" in r)
    registration = [
        "/api/v1/namespaces",
        f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices",
        "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies",
        "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings",
        "/apis/policy/v1/poddisruptionbudgets",
    ]
    # the pods: those bound to a node, then the unbound (Pending) ones, counted off the net=high nodes;
    # the Services of the candidates' one namespace, for PodTopologySpread's default spreading; and
    # what admission reads, for the replacements as the API server would admit them
    services = "/api/v1/namespaces/shop/services"
    admission = ["/api/v1/limitranges", "/apis/node.k8s.io/v1/runtimeclasses"]
    assert lists == sorted(["/api/v1/nodes", "/api/v1/pods", "/api/v1/pods", services, *registration, *admission])
    pods = next(r for r in requests if r.startswith("/api/v1/pods?"))
    assert "fieldSelector=spec.nodeName%21%3D%2Cstatus.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed" in pods
    assert "limit=500" in pods
    slices = next(r for r in requests if "endpointslices?" in r)
    assert "labelSelector=kubernetes.io/service-name%3Dnetqos-webhook" in slices
    gets = sorted(r for r in requests if "?" not in r and not r.startswith("POST"))
    assert gets == [
        f"/api/v1/namespaces/{NS}/configmaps/netqos-rebalance-history",  # the evictions made before
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/netqos-webhook",
        *(f"/apis/apps/v1/namespaces/shop/replicasets/{d}-rs" for d in ("web-a", "web-b", "web-c")),
        "/version/",  # which Kubernetes version to score the replacements as
    ]


def many_workloads(n: int) -> list[dict[str, Any]]:
    """The base cluster with `n` more Deployments, each with a pod on a slow node: `n` more
    candidates, each with its ReplicaSet to read."""
    names = [f"many-{i:02}" for i in range(n)]
    objs = [*base_cluster(), *workloads(*names)]
    objs += [app(f"{d}-slow", "plain-1", f"{d}-rs", preferred=CLASSIC_TERMS) for d in names]
    return objs


def test_many_controllers_of_a_kind_are_read_with_one_list_and_plan_as_with_a_get_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    more = cluster.GETS_BEFORE_LIST + 10
    objs = many_workloads(more)
    _, listed, _, requests = rebalance(objs, tmp_path)
    replica_sets = [r for r in requests if "replicasets" in r]
    assert [r.split("?")[0] for r in replica_sets] == ["/apis/apps/v1/replicasets"]
    monkeypatch.setattr(cluster, "GETS_BEFORE_LIST", 1000)
    _, got, _, requests = rebalance(objs, tmp_path)
    assert len([r for r in requests if "replicasets/" in r]) == more + 3
    assert listed == got


def test_a_list_long_beside_the_controllers_wanted_stops_after_its_first_page_for_gets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster, "GETS_BEFORE_LIST", 2)
    objs = many_workloads(3)  # 6 ReplicaSets wanted
    # 1,106 ReplicaSets: 3 pages of 500, more than the one page 6 gets are worth
    objs += [workload("ReplicaSet", "shop", f"idle-{i:04}", template=template()) for i in range(1100)]
    _, _, _, requests = rebalance(objs, tmp_path)
    replica_sets = [r.split("?")[0] for r in requests if "replicasets" in r]
    assert replica_sets[0] == "/apis/apps/v1/replicasets" and replica_sets.count("/apis/apps/v1/replicasets") == 1
    assert len(replica_sets) == 1 + 6


def test_the_services_of_many_namespaces_are_read_with_one_list_and_plan_as_with_a_list_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objs, teams = base_cluster(), cluster.GETS_BEFORE_LIST + 1
    for i in range(teams):
        ns, name = f"team-{i:02}", f"app-{i:02}"
        objs += [kubeapi.namespace(ns), workload("ReplicaSet", ns, f"{name}-rs", template=template())]
        objs.append(pod(ns, f"{name}-slow", QOS, "plain-1", ("ReplicaSet", f"{name}-rs"), preferred=CLASSIC_TERMS))
        objs[-1]["spec"]["containers"][0]["resources"] = CPU1
    _, listed, _, requests = rebalance(objs, tmp_path)
    assert sorted(r.split("?")[0] for r in requests if "services" in r) == ["/api/v1/services"]
    monkeypatch.setattr(cluster, "GETS_BEFORE_LIST", 1000)
    _, got, _, requests = rebalance(objs, tmp_path)
    assert len([r for r in requests if "services" in r]) == 1 + teams  # shop's and each team's
    assert listed == got


# --- --apply ------------------------------------------------------------------------------------


def test_apply_evicts_the_first_planned_pod_only_by_default(tmp_path: Path) -> None:
    code, report, evictions, _ = rebalance(base_cluster(), tmp_path, "apply", "true")
    assert evictions == [("shop", "web-a-slow", 201)]
    assert report["evicted"] == [
        {"namespace": "shop", "name": "web-a-slow", "result": "evicted", "message": "evicted from slow-1 for fast-1"}
    ]
    assert report["summary"] == {**NOTHING_DONE, "candidates": 3, "movable": 2, "evicted": 1, "skipped": 1}
    assert code == 3  # web-b-slow is still movable


def test_apply_evicts_everything_planned_within_max_evictions_and_exits_0(tmp_path: Path) -> None:
    code, report, evictions, _ = rebalance(base_cluster(), tmp_path, "apply", "true", "max_evictions", "5")
    assert evictions == [("shop", "web-a-slow", 201), ("shop", "web-b-slow", 201)]
    assert [e["result"] for e in report["evicted"]] == ["evicted", "evicted"]
    assert code == 0


def test_the_eviction_names_the_pods_uid_as_a_precondition(tmp_path: Path) -> None:
    seen: list[Any] = []

    def answer(request: kubeapi.Request) -> tuple[int, Any]:
        if request.method == "POST":
            seen.append((request.path, request.json()))
            return 201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}
        return 404, kubeapi.status_body(404, "NotFound", "not here")

    with kubeapi.ScriptedAPI(answer) as api:
        from webhook import cluster

        with cluster.Evictor(cluster.connect(str(api.kubeconfig(tmp_path)))) as evictor:
            evictor.evict("shop", "web-a-slow", "uid-shop-web-a-slow")
    assert seen == [
        (
            "/api/v1/namespaces/shop/pods/web-a-slow/eviction",
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": "web-a-slow", "namespace": "shop"},
                "deleteOptions": {"preconditions": {"uid": "uid-shop-web-a-slow"}},
            },
        )
    ]


def budget(name: str, app_label: str, allowed: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": app_label}}},
        "status": {"disruptionsAllowed": allowed},
    }


def test_a_budget_read_when_planning_blocks_its_pod_in_the_plan_and_the_next_pod_takes_the_room(
    tmp_path: Path,
) -> None:
    objs = base_cluster()
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"].startswith("web-a"):
            o["metadata"]["labels"] = {**QOS, "app": "web-a"}
    objs.append(budget("web-a", "web-a", 0))
    code, report, evictions, _ = rebalance(objs, tmp_path, "apply", "true", "max_evictions", "5")
    assert plan_rows(report) == [
        ("web-a-slow", "skip", None),
        ("web-b-slow", "evict", "fast-1"),
        ("web-c-slow", "evict", "fast-1"),  # the room web-a-slow would have taken
    ]
    assert report["candidates"][0]["constraint"] == "pdb"
    assert (
        report["candidates"][0]["reason"] == "blocked: PodDisruptionBudget web-a allows no disruption now (0 allowed)"
    )
    assert evictions == [("shop", "web-b-slow", 201), ("shop", "web-c-slow", 201)]
    assert report["summary"]["blocked_in_plan"] == 1
    assert code == 0


def test_a_429_naming_the_disruption_budget_is_blocked_and_not_retried(tmp_path: Path) -> None:
    """Without the right to read budgets, the Eviction API's 429 is the word on them: its Status
    names the DisruptionBudget cause."""
    objs = base_cluster()
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"].startswith("web-a"):
            o["metadata"]["labels"] = {**QOS, "app": "web-a"}
    objs.append(budget("web-a", "web-a", 0))
    snapshot = Snapshot(forbidden={"poddisruptionbudgets"})
    code, report, evictions, _ = rebalance(objs, tmp_path, "apply", "true", snapshot=snapshot)
    assert evictions == [("shop", "web-a-slow", 429), ("shop", "web-b-slow", 201)]
    blocked, evicted = report["evicted"]
    assert (blocked["name"], blocked["result"]) == ("web-a-slow", "blocked")
    assert blocked["message"] == (
        "blocked by a PodDisruptionBudget (HTTP 429 Too Many Requests: "
        "Cannot evict pod as it would violate the pod's disruption budget)"
    )
    assert (evicted["name"], evicted["result"]) == ("web-b-slow", "evicted")
    assert report["summary"]["blocked"] == 1 and report["summary"]["evicted"] == 1
    assert code == 3  # web-a-slow could not move


def test_a_429_without_the_budget_cause_is_throttling_retried_after_retry_after_then_throttled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """API Priority and Fairness answers 429 too, with Retry-After and no DisruptionBudget cause."""
    from webhook.commands import rebalance as command

    waits: list[float] = []
    monkeypatch.setattr(command.time, "sleep", waits.append)
    snapshot = Snapshot(eviction_answers={"shop/web-a-slow": 429})
    code, report, evictions, _ = rebalance(base_cluster(), tmp_path, "apply", "true", snapshot=snapshot)
    assert evictions == [("shop", "web-a-slow", 429)] * (command.THROTTLE_RETRIES + 1)
    assert waits == [1.0] * command.THROTTLE_RETRIES  # the server's Retry-After: 1
    [throttled] = report["evicted"]
    assert (throttled["result"], throttled["message"]) == (
        "throttled",
        "throttled by the API server after 4 tries (HTTP 429 Too Many Requests: scripted answer 429 for pod "
        "shop/web-a-slow)",
    )
    assert report["summary"]["throttled"] == 1 and report["summary"]["blocked"] == 0
    assert code == 3  # the run stopped asking: web-b-slow is left for the next one


def test_a_budget_that_blocks_everything_leaves_every_pod_in_place_without_asking(tmp_path: Path) -> None:
    objs = [*base_cluster(), budget("all", "web", 0)]
    code, report, evictions, _ = rebalance(objs, tmp_path, "apply", "true", "max_evictions", "5")
    assert evictions == []
    assert {c["constraint"] for c in report["candidates"]} == {"pdb"}
    assert code == 0  # nothing movable now: the next run asks again


def test_a_pod_already_gone_is_gone_not_evicted_and_does_not_use_the_budget(tmp_path: Path) -> None:
    snapshot = Snapshot(eviction_answers={"shop/web-a-slow": 404})
    code, report, evictions, _ = rebalance(base_cluster(), tmp_path, "apply", "true", snapshot=snapshot)
    assert evictions == [("shop", "web-a-slow", 404), ("shop", "web-b-slow", 201)]
    gone = report["evicted"][0]
    assert (gone["result"], gone["message"]) == (
        "gone",
        "already gone (HTTP 404 Not Found: scripted answer 404 for pod shop/web-a-slow)",
    )
    assert (report["summary"]["gone"], report["summary"]["evicted"]) == (1, 1)
    assert code == 0


def test_forbidden_evictions_are_reported_per_pod_and_exit_1(tmp_path: Path) -> None:
    snapshot = Snapshot(forbidden={"pods/eviction"})
    code, report, evictions, _ = rebalance(base_cluster(), tmp_path, "apply", "true", snapshot=snapshot)
    assert [e[2] for e in evictions] == [403, 403]
    assert [e["result"] for e in report["evicted"]] == ["error", "error"]
    assert "HTTP 403 Forbidden" in report["evicted"][0]["message"]
    assert "kubectl auth can-i create pods/eviction -n shop" in report["evicted"][0]["message"]
    assert code == 1


def test_any_other_api_error_is_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    snapshot = Snapshot(eviction_answers={"shop/web-a-slow": 500})
    code, report, evictions, _ = rebalance(base_cluster(), tmp_path, "apply", "true", snapshot=snapshot)
    assert evictions == [("shop", "web-a-slow", 500), ("shop", "web-b-slow", 201)]
    assert [e["result"] for e in report["evicted"]] == ["error", "evicted"]
    assert code == 1


def test_one_pod_per_owner_even_when_several_are_movable(tmp_path: Path) -> None:
    objs = [o for o in base_cluster() if o["metadata"]["name"] not in ("web-b-slow", "web-c-slow")]
    objs.append(app("web-a-slow-2", "slow-1", "web-a-rs", "2026-05-02T00:00:00Z", preferred=CLASSIC_TERMS))
    code, report, evictions, _ = rebalance(objs, tmp_path, "apply", "true", "max_evictions", "5")
    assert plan_rows(report) == [("web-a-slow", "evict", "fast-1"), ("web-a-slow-2", "skip", None)]
    assert report["candidates"][1]["reason"] == (
        "another pod of Deployment/web-a is moved in this run (one pod per owner)"
    )
    assert evictions == [("shop", "web-a-slow", 201)]
    assert code == 0


def test_a_second_run_sees_the_evicted_pod_gone(tmp_path: Path) -> None:
    snapshot = Snapshot().add_all(base_cluster())
    with kubeapi.serve(snapshot, tmp_path) as api:
        config = POLICY
        base = ["rebalance", "--kubeconfig", str(api.kubeconfig), "--config", config, "--min-age", "0"]
        assert main([*base, "--apply"]) == 3
        # the fake server runs no controller: no replacement takes fast-1, so the next pod moves
        assert main([*base, "--apply"]) == 3
        assert [name for _, name, _ in api.evictions] == ["web-a-slow", "web-b-slow"]


# --- the command line -------------------------------------------------------------------------------


def test_without_config_the_policy_is_the_one_the_webhook_serves(tmp_path: Path) -> None:
    """A policy whose rule selects tier=gold (not qos=latency-sensitive), served from the webhook's ConfigMap."""
    deployment = yaml.safe_load((REPO / "deploy/base/deployment.yaml").read_text())
    deployment["spec"]["template"]["spec"]["volumes"][1]["configMap"]["name"] = "netqos-webhook-policy"
    policy = """rules:
- name: gold
  podSelector: {matchLabels: {tier: gold}}
  preferences:
  - weight: 80
    matchExpressions: [{key: net, operator: In, values: [high]}]
"""
    objs = [o for o in base_cluster(registered=False) if o["kind"] != "Namespace"]
    objs += kubeapi.installation(None, deployment, policy, None, NS)
    objs += registration(policy=policy_from_bytes(policy.encode(), "gold"))[:2]
    objs.append(workload("ReplicaSet", "shop", "gold-rs", template=template({"tier": "gold"})))
    objs.append(app("gold-1", "slow-1", "gold-rs", labels={"tier": "gold"}))
    objs.append(app("gold-2", "fast-2", "gold-rs", labels={"tier": "gold"}))
    with kubeapi.serve(Snapshot().add_all(objs), tmp_path) as api:
        out = io.StringIO()
        assert run(RebalanceArgs(kubeconfig=str(api.kubeconfig), output="json"), out, now=NOW) == 3
    assert plan_rows(json.loads(out.getvalue())) == [("gold-1", "evict", "fast-1")]


def test_table_says_the_same_for_people(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with kubeapi.serve(Snapshot().add_all(base_cluster()), tmp_path) as api:
        argv = ["rebalance", "--kubeconfig", str(api.kubeconfig), "--config", POLICY]
        assert main([*argv, "--min-age", "0"]) == 3
    out = capsys.readouterr().out
    assert (
        "PLAN    3 selected pod(s) off the net=high nodes, as status counts them (0 pending: the scheduler still "
        "places those); 3 running candidate(s): 2 movable, 1 skipped"
    ) in out
    assert "shop/web-a-slow   slow-1    low      Deployment/web-a   evict    fast-1" in out
    assert "plan only: nothing evicted (--apply evicts up to --max-evictions 1)" in out
    assert out.rstrip().endswith("RESULT 0 evicted, 0 blocked, 0 gone, 0 throttled, 2 movable left: exit 3")


def test_the_movable_exit_code_can_be_chosen(tmp_path: Path) -> None:
    with kubeapi.serve(Snapshot().add_all(base_cluster()), tmp_path) as api:
        config = POLICY
        argv = ["rebalance", "--kubeconfig", str(api.kubeconfig), "--config", config, "-o", "json"]
        assert main([*argv, "--movable-exit-code", "0"]) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--min-age", "ten minutes"], "argument --min-age: 'ten minutes' is not a duration (e.g. 10m, 1h30m, 90s)"),
        (["--max-evictions", "0"], "argument --max-evictions: must be from 1 to 1000, got 0"),
        (["-o", "yaml"], "argument -o/--output: invalid choice: 'yaml'"),
        (["--config", "/nonexistent/policy.yaml"], "/nonexistent/policy.yaml"),
        (
            ["--scheduler-config", str(FIXTURES / "explain/scheduler-config-bad.yaml")],
            "scheduler-config-bad.yaml: profiles[0].pluginConfig[0].args.scoringStrategy.type is 'Packed'",
        ),
        (
            ["--scheduler-config", POLICY],
            "give a KubeSchedulerConfiguration of apiVersion kubescheduler.config.k8s.io/v1",
        ),
        (
            ["--scheduler-config", SCHEDULERS, "--scheduler-config", SCHEDULERS],
            "both have a profile of schedulerName 'default-scheduler': give each scheduler's configuration once",
        ),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = kubeapi.write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    try:
        code = main(["rebalance", "--kubeconfig", str(kubeconfig), *argv])
    except SystemExit as exit:  # argparse's usage errors
        code = int(str(exit.code))
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_an_unreachable_cluster_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = kubeapi.write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    assert main(["rebalance", "--kubeconfig", str(kubeconfig), "--config", POLICY]) == 1
    err = capsys.readouterr().err
    assert err.startswith("netqos-webhook rebalance: cannot reach the Kubernetes API server at http://127.0.0.1:9")
    assert len(err.strip().splitlines()) == 1


def test_forbidden_pods_are_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = Snapshot(forbidden={"pods@cluster"}).add_all(base_cluster())
    with kubeapi.serve(snapshot, tmp_path) as api:
        config = POLICY
        assert main(["rebalance", "--kubeconfig", str(api.kubeconfig), "--config", config]) == 1
    err = capsys.readouterr().err
    assert "refused to list pods: HTTP 403 Forbidden" in err and len(err.strip().splitlines()) == 1


def test_the_cronjobs_cluster_role_grants_exactly_the_requests_rebalance_apply_sends(tmp_path: Path) -> None:
    """Every request of `rebalance --apply --config FILE` (as the CronJob runs it, beside the
    ConfigMap of the evictions made that it ships), as an RBAC (apiGroup, resource, verb), is
    granted by deploy/overlays/rebalance's ClusterRole, or its Role in the webhook's namespace for
    that one ConfigMap, and the roles grant nothing else."""
    shipped = yaml.safe_load((REPO / "deploy/overlays/rebalance/history.yaml").read_text())
    objs = [*base_cluster(), shipped]
    objs += [workload("CronJob", "shop", "nightly"), workload("Job", "shop", "nightly-1", owner=("CronJob", "nightly"))]
    objs += [workload("StatefulSet", "shop", "db"), workload("ReplicationController", "shop", "legacy")]
    for i in range(2):
        for owner, name in (
            ("Job", f"nightly-1-{i}"),
            ("StatefulSet", f"db-{i}"),
            ("ReplicationController", f"legacy-{i}"),
        ):
            controller = "nightly-1" if owner == "Job" else name.rpartition("-")[0]
            other = pod("shop", name, QOS, "slow-1", (owner, controller), "2026-05-01T00:00:00Z")
            other["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
            objs.append(other)
    _, report, _, requests = rebalance(objs, tmp_path, "apply", "true", "max_evictions", "5")
    assert {c["owner"]["kind"] for c in report["candidates"]} == {
        "Deployment",
        "CronJob",
        "StatefulSet",
        "ReplicationController",
    }

    def permission(request: str) -> tuple[str, str, str]:
        method, _, path = request.rpartition(" ")
        parts = path.split("?")[0].strip("/").split("/")
        group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
        if rest[0] == "namespaces" and len(rest) > 2:
            rest = rest[2:]
        resource = "/".join([rest[0], *rest[2:]])
        verb = {"POST": "create", "PUT": "update"}.get(method) or ("get" if len(rest) > 1 else "list")
        return group, resource, verb

    # GET /version, a non-resource URL every authenticated user may read (system:public-info-viewer),
    # and the SelfSubjectAccessReview asking whether it may create pods (system:basic-user grants it)
    public = ("/version", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    used = {permission(r) for r in requests if r.split("?")[0].rstrip("/").rpartition(" ")[2] not in public}
    rbac = list(yaml.safe_load_all((REPO / "deploy/overlays/rebalance/rbac.yaml").read_text()))
    [role] = [d for d in rbac if d["kind"] == "ClusterRole"]
    [own] = [d for d in rbac if d["kind"] == "Role"]
    granted = {
        (g, r, v)
        for rule in [*role["rules"], *own["rules"]]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert used == granted
    # the Role's grants are the shipped ConfigMap's alone, where the command reads and writes it
    history = shipped["metadata"]
    assert {(own["metadata"]["namespace"], *rule["resourceNames"]) for rule in own["rules"]} == {
        (history["namespace"], history["name"])
    }
    configmaps = {r.split("?")[0].rpartition(" ")[2] for r in requests if "/configmaps" in r}
    assert configmaps == {f"/api/v1/namespaces/{history['namespace']}/configmaps/{history['name']}"}


# --- the live registration ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "objs", "problem"),
    [
        (
            "not registered",
            lambda: base_cluster(registered=False),
            "no active registration calls the webhook: MutatingWebhookConfiguration netqos-webhook does not exist "
            "and no MutatingAdmissionPolicy *.netqos.io is bound",
        ),
        (
            "registered, no ready endpoints",
            lambda: [*base_cluster(registered=False), *registration(ready=0)],
            "no active registration calls the webhook: webhook entry netqos.netqos.io: Service netqos-webhook in "
            "namespace netqos-system has no ready endpoints: every call fails and pods are created without the "
            "preference",
        ),
    ],
)
def test_apply_without_an_active_registration_evicts_nothing_says_so_and_exits_3(
    case: str, objs: Any, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, evictions, requests = rebalance(objs(), tmp_path, "apply", "true", "max_evictions", "5")
    assert evictions == [] and writes(requests) == []
    assert report["registration"] == {"active": False, "problem": problem}
    assert {(c["action"], c["constraint"]) for c in report["candidates"]} == {("skip", "scope")}
    assert code == 3
    assert f"nothing may be evicted: {problem}" in capsys.readouterr().err


def test_pods_in_a_namespace_the_registration_excludes_are_skipped_saying_why(tmp_path: Path) -> None:
    """The chart's webhook.excludeNamespaces: the registration's namespaceSelector leaves shop out,
    so a replacement there would be created without the terms and evicted again every run."""
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["shop"]}]}
    objs = [*base_cluster(registered=False), *registration(namespaceSelector=selector)]
    code, report, evictions, _ = rebalance(objs, tmp_path, "apply", "true", "max_evictions", "5")
    assert evictions == []
    assert report["registration"]["active"] is True
    assert {c["reason"] for c in report["candidates"]} == {
        "its replacement would not be mutated: the registration does not call the webhook in namespace shop "
        "(namespaceSelector of webhook entry netqos.netqos.io)"
    }
    assert code == 0  # nothing movable, and the webhook is registered and serving


def test_the_table_says_the_webhook_is_not_active(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with kubeapi.serve(Snapshot().add_all(base_cluster(registered=False)), tmp_path) as api:
        argv = ["rebalance", "--kubeconfig", str(api.kubeconfig), "--config", POLICY, "--apply"]
        assert main(argv) == 3
    out = capsys.readouterr().out
    assert "WEBHOOK NOT ACTIVE: no active registration calls the webhook: MutatingWebhookConfiguration" in out
    assert "none: no active registration would give a replacement the preference" in out


def test_pods_off_the_net_high_nodes_are_counted_as_status_counts_them_pending_ones_included(tmp_path: Path) -> None:
    waiting = pod("shop", "web-a-new", QOS, None, ("ReplicaSet", "web-a-rs"))  # no node yet: Pending
    _, report, _, _ = rebalance([*base_cluster(), waiting], tmp_path)
    assert report["off_high"] == {"pods": 4, "pending": 1}
    assert len(report["candidates"]) == 3  # a pending pod is never a candidate


def test_the_registration_is_read_from_the_v1beta1_admission_policies_where_v1_is_not_served(tmp_path: Path) -> None:
    """Kubernetes 1.34 and 1.35 serve MutatingAdmissionPolicy only as v1beta1 (v1 answers 404):
    rebalance reads the registration from there, as status does, so a bound policy calls for the pod."""
    from webhook import cluster, scope
    from webhook.admission_policy import admission_policies
    from webhook.commands.clusterread import read_registration

    group = "/apis/admissionregistration.k8s.io"
    beta = {
        f"{group}/v1beta1/{kubeapi.RESOURCES[o['kind']]}": o
        for o in admission_policies(load_policy(REPO / "deploy/base/policy.yaml"))
        if o["kind"].startswith("Mutating")
    }
    asked: list[str] = []

    def answer(request: kubeapi.Request) -> tuple[int, Any]:
        asked.append(request.path)
        if request.path in beta:
            obj = {**beta[request.path], "apiVersion": "admissionregistration.k8s.io/v1beta1"}
            return 200, {"kind": f"{obj['kind']}List", "apiVersion": obj["apiVersion"], "metadata": {}, "items": [obj]}
        if request.path == "/api/v1/namespaces":
            return 200, {
                "kind": "NamespaceList",
                "apiVersion": "v1",
                "metadata": {},
                "items": [kubeapi.namespace("shop")],
            }
        return 404, kubeapi.status_body(404, "NotFound", "the server could not find the requested resource")

    with kubeapi.ScriptedAPI(answer) as api, cluster.Reader(cluster.connect(str(api.kubeconfig(tmp_path)))) as reader:
        live = read_registration(reader)
    assert [o["kind"] for o in (*live.admission_policies, *live.bindings)] == [
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    ]
    assert f"{group}/v1/mutatingadmissionpolicies" in asked  # v1 first
    assert scope.Registration.read(live).why_not_called("shop", {"qos": "latency-sensitive"}) == ""


# --- pod affinity's namespaceSelector --------------------------------------------------------------


def _beside_payments_db() -> list[dict[str, Any]]:
    """web's pods must run beside app=db of a namespace labelled team=payments; payments' db runs on
    fast-1 (net=high, room), web's one pod on slow-1."""
    term = {
        "labelSelector": {"matchLabels": {"app": "db"}},
        "namespaceSelector": {"matchLabels": {"team": "payments"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    rs = workload("ReplicaSet", "shop", "web-rs", owner=("Deployment", "web"), template=template())
    rs["spec"]["template"]["spec"]["affinity"] = affinity
    payments = kubeapi.namespace("payments")
    payments["metadata"]["labels"]["team"] = "payments"
    return [
        *registration(),
        kubeapi.namespace("shop"),
        payments,
        sized(node("fast-1", "high"), "4"),
        sized(node("slow-1", "low"), "16"),
        workload("Deployment", "shop", "web"),
        rs,
        pod("payments", "db", {"app": "db"}, "fast-1"),
        app("web-slow", "slow-1", "web-rs", preferred=CLASSIC_TERMS, affinity=affinity),
    ]


@pytest.mark.parametrize(
    "forbidden, row, notes",
    [
        pytest.param(set(), ("web-slow", "evict", "fast-1"), [], id="namespaces-listed"),
        pytest.param(
            {"namespaces"},
            ("web-slow", "skip", None),
            [
                "cannot list namespaces (forbidden by RBAC): pod affinity's namespaceSelector is matched against each "
                "namespace's kubernetes.io/metadata.name label alone"
            ],
            id="namespaces-forbidden",
        ),
    ],
)
def test_a_replacements_namespace_selector_matches_the_namespaces_labels(
    forbidden: set[str], row: tuple[str, str, str | None], notes: list[str], tmp_path: Path, capsys
) -> None:
    snapshot = Snapshot(forbidden=forbidden)
    _, report, _, _ = rebalance(_beside_payments_db(), tmp_path, "min_replicas", "1", snapshot=snapshot)
    assert plan_rows(report) == [row]
    said = capsys.readouterr().err.splitlines()  # -o json: the notes go to stderr
    assert [n.removeprefix("netqos-webhook rebalance: ") for n in said if "namespaceSelector" in n] == notes


# --- what --apply records: the evictions made (the `repeat` constraint), and Events ----------------

HISTORY = "netqos-rebalance-history"
LATER = NOW + dt.timedelta(hours=1)


@dataclass
class Applied:
    code: int
    report: dict[str, Any]
    evictions: list[tuple[str, str, int]]
    events: list[dict[str, Any]]
    history: dict[str, Any] | None  # the ConfigMap after the run
    requests: list[str]


def applied(objs: list[dict[str, Any]], tmp_path: Path, now: dt.datetime = NOW, **changes: Any) -> Applied:
    """`rebalance --apply -o json` once against the objects, at `now`."""
    snapshot = changes.pop("snapshot", None) or Snapshot()
    snapshot.add_all(objs)
    tmp_path.mkdir(parents=True, exist_ok=True)
    with kubeapi.serve(snapshot, tmp_path) as api:
        out = io.StringIO()
        args = RebalanceArgs(kubeconfig=str(api.kubeconfig), output="json", config=POLICY, apply=True, **changes)
        code = run(args, out, now=now)
        history = api.config_map(NS, HISTORY)
        return Applied(code, json.loads(out.getvalue()), api.evictions, api.events, history, api.requests)


def records(history: dict[str, Any] | None) -> list[dict[str, Any]]:
    return json.loads((history or {}).get("data", {}).get("evictions.json") or "[]")


def after_the_eviction(history: dict[str, Any] | None, replacement_node: str, more: int = 0) -> list[dict[str, Any]]:
    """base_cluster once web-a-slow was evicted: its ReplicaSet's replacement bound to
    `replacement_node` a few seconds after, and running; `more` pods joined fast-2 since; the
    records' ConfigMap as the first run left it."""
    objs = [o for o in base_cluster() if o["metadata"]["name"] != "web-a-slow"]
    objs.append(app("web-a-new", replacement_node, "web-a-rs", "2026-06-01T00:00:05Z", preferred=CLASSIC_TERMS))
    objs += [pod("shop", f"other-{i}", {"app": "other"}, "fast-2") for i in range(more)]
    return [*objs, history] if history is not None else objs


def test_apply_records_the_eviction_for_its_owner_in_the_history_configmap(tmp_path: Path) -> None:
    first = applied(base_cluster(), tmp_path)
    assert first.evictions == [("shop", "web-a-slow", 201)]
    assert f"POST /api/v1/namespaces/{NS}/configmaps" in first.requests  # none yet: created
    [record] = records(first.history)
    assert {k: v for k, v in record.items() if k not in ("evicted", "world", "newest")} == {
        "namespace": "shop",
        "owner": {"kind": "Deployment", "name": "web-a"},
        "controller": {"kind": "ReplicaSet", "name": "web-a-rs", "uid": "uid-web-a-rs"},
        "pod": {"name": "web-a-slow", "uid": "uid-shop-web-a-slow"},
        "node": "slow-1",
        "target": "fast-1",
    }
    assert record["evicted"].startswith("2026-06-01T00:00:0") and len(record["world"]) == 32
    assert record["newest"] == "2026-05-01T00:00:00Z"  # its ReplicaSet's newest pod when planned
    assert first.report["warnings"] == []


def test_a_second_run_does_not_evict_the_owner_whose_replacement_went_to_a_slower_node(tmp_path: Path) -> None:
    first = applied(base_cluster(), tmp_path / "first")
    second = applied(after_the_eviction(first.history, "slow-1"), tmp_path / "second", LATER)
    rows = {c["name"]: c for c in second.report["candidates"]}
    assert (rows["web-a-new"]["action"], rows["web-a-new"]["constraint"]) == ("skip", "repeat")
    assert rows["web-a-new"]["reason"] == (
        "evicted 2026-06-01T00:00Z, predicted fast-1, its replacement went to slow-1: not evicted again until the "
        "net=high nodes or the pods on them change, or until 2026-06-02T00:00Z (--forget-after)"
    )
    # the next owner moves instead, and both records are kept (PUT: the ConfigMap is updated)
    assert second.evictions == [("shop", "web-b-slow", 201)]
    assert f"PUT /api/v1/namespaces/{NS}/configmaps/{HISTORY}" in second.requests
    assert [r["owner"]["name"] for r in records(second.history)] == ["web-a", "web-b"]


@pytest.mark.parametrize(
    ("case", "replacement_node", "more", "changes", "now"),
    [
        ("its replacement landed on a net=high node", "fast-1", 0, {}, LATER),
        ("a pod joined a net=high node since", "slow-1", 1, {}, LATER),
        ("the record is forgotten", "slow-1", 0, {"forget_after": dt.timedelta(minutes=30)}, LATER),
        ("no record is read: another ConfigMap", "slow-1", 0, {"history_configmap": "elsewhere"}, LATER),
    ],
)
def test_the_owner_may_move_again_once_the_world_changed_or_the_record_is_forgotten(
    case: str, replacement_node: str, more: int, changes: dict[str, Any], now: dt.datetime, tmp_path: Path
) -> None:
    first = applied(base_cluster(), tmp_path / "first")
    second = applied(after_the_eviction(first.history, replacement_node, more), tmp_path / "second", now, **changes)
    assert "repeat" not in [c["constraint"] for c in second.report["candidates"]], case


def test_apply_records_an_event_on_the_evicted_pod_and_on_its_owner(tmp_path: Path) -> None:
    first = applied(base_cluster(), tmp_path)
    assert [e["regarding"] for e in first.events] == [
        {"apiVersion": "v1", "kind": "Pod", "namespace": "shop", "name": "web-a-slow", "uid": "uid-shop-web-a-slow"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "web-a", "uid": "uid-web-a"},
    ]
    assert [e["related"]["name"] for e in first.events] == ["web-a", "web-a-slow"]
    [move] = [c for c in first.report["candidates"] if c["action"] == "evict" and c["name"] == "web-a-slow"]
    for event in first.events:
        assert (event["type"], event["reason"], event["action"]) == ("Normal", "NetQoSRebalanced", "Evict")
        assert event["reportingController"] == "netqos-webhook/rebalance"
        assert event["metadata"]["namespace"] == "shop"
        assert "from slow-1" in event["note"] and "lands on fast-1: " + move["reason"][:40] in event["note"]
    assert "POST /apis/events.k8s.io/v1/namespaces/shop/events" in first.requests


@pytest.mark.parametrize(
    ("forbidden", "warned"),
    [
        ({"events"}, ["no Event recorded on Pod shop/web-a-slow", "no Event recorded on Deployment shop/web-a"]),
        ({"configmaps@write"}, [f"the evictions of this run are not recorded in ConfigMap {NS}/{HISTORY}"]),
        ({"configmaps"}, [f"the evictions of this run are not recorded: ConfigMap {NS}/{HISTORY} cannot be read"]),
    ],
)
def test_what_cannot_be_recorded_is_a_warning_and_never_fails_the_eviction(
    forbidden: set[str], warned: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = applied(base_cluster(), tmp_path, snapshot=Snapshot(forbidden=forbidden))
    assert [e["result"] for e in done.report["evicted"]] == ["evicted"]
    assert done.code == 3  # as without the failure: web-b-slow is still movable
    assert [w[: len(p)] for w, p in zip(done.report["warnings"], warned, strict=True)] == warned
    err = capsys.readouterr().err
    assert all(f"netqos-webhook rebalance: warning: {w}" in err for w in done.report["warnings"])


def test_a_configmap_changed_by_another_writer_is_read_again_and_merged(tmp_path: Path) -> None:
    api = (Owner("Deployment", "api"), Owner("ReplicaSet", "api-1", "uid-api-1"))
    other = Record("shop", *api, "api-x", "u", "slow-1", "fast-2", NOW, "w")
    shipped = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": HISTORY, "namespace": NS}}
    theirs = {**shipped, "metadata": {**shipped["metadata"], "resourceVersion": "7"}, "data": evictions.data([other])}
    snapshot = Snapshot(concurrent_writes={f"{NS}/{HISTORY}": theirs})
    done = applied([*base_cluster(), shipped], tmp_path, snapshot=snapshot)
    assert [r.split("?")[0] for r in done.requests if r.startswith("PUT")] == [
        f"PUT /api/v1/namespaces/{NS}/configmaps/{HISTORY}"
    ] * 2  # the first answered 409
    assert [r["owner"]["name"] for r in records(done.history)] == ["api", "web-a"]
    assert done.report["warnings"] == []


# --- --missing: recreate the pods created without the preference ----------------------------------


def missing_cluster() -> list[dict[str, Any]]:
    """Pods created while the webhook was down (no terms) beside pods created through it: web-a's
    two, one on fast-1 (net=high) and one on slow-1; web-b's on fast-1, its second pod with the
    terms; web-c's two with the terms; batch's, which no rule selects, without them."""
    objs = [
        *registration(),
        kubeapi.namespace("shop"),
        sized(node("fast-1", "high"), "8"),
        sized(node("slow-1", "low"), "16"),
        *workloads("web-a", "web-b", "web-c"),
        workload("ReplicaSet", "shop", "batch-rs", template=template({"app": "batch"})),
        app("web-a-fast", "fast-1", "web-a-rs", "2026-05-01T00:00:00Z"),
        app("web-a-slow", "slow-1", "web-a-rs", "2026-05-02T00:00:00Z"),
        app("web-b-fast", "fast-1", "web-b-rs", "2026-05-03T00:00:00Z"),
        app("web-b-covered", "fast-1", "web-b-rs", preferred=CLASSIC_TERMS),
        *(app(f"web-c-{i}", "slow-1", "web-c-rs", preferred=CLASSIC_TERMS) for i in range(2)),
        *(app(f"batch-{i}", "slow-1", "batch-rs", labels={"app": "batch"}) for i in range(2)),
    ]
    return objs


def test_missing_plans_the_pods_created_without_the_preference_wherever_they_run_and_writes_nothing(
    tmp_path: Path,
) -> None:
    code, report, evictions, requests = rebalance(missing_cluster(), tmp_path, "missing", "true")
    assert report["mode"] == "missing"
    assert [(c["name"], c["action"], c["constraint"], c["target"]) for c in report["candidates"]] == [
        ("web-a-fast", "evict", "", "fast-1"),
        ("web-a-slow", "skip", "one-per-owner", None),
        ("web-b-fast", "evict", "", "fast-1"),
    ]
    first = report["candidates"][0]
    assert (first["node"], first["net"], first["target_net"], first["probability"]) == ("fast-1", "high", "high", None)
    assert first["reason"] == (
        "created without the preference: its replacement gets it; kube-scheduler would place it on fast-1 (net=high)"
    )
    assert report["summary"] == {**NOTHING_DONE, "candidates": 3, "movable": 2, "skipped": 1}
    assert code == 3
    assert evictions == [] and writes(requests) == []
    # without --missing, the same cluster's pods on fast-1 are none of rebalance's candidates
    _, stranded, _, _ = rebalance(missing_cluster(), tmp_path)
    assert stranded["mode"] == "stranded"
    assert {c["name"] for c in stranded["candidates"]} == {"web-a-slow", "web-c-0", "web-c-1"}


def test_missing_apply_evicts_exactly_the_planned_pods_records_them_and_writes_nothing_else(tmp_path: Path) -> None:
    done = applied(missing_cluster(), tmp_path, missing=True, max_evictions=5)
    assert done.evictions == [("shop", "web-a-fast", 201), ("shop", "web-b-fast", 201)]
    assert [(e["name"], e["result"], e["message"]) for e in done.report["evicted"]] == [
        ("web-a-fast", "evicted", "evicted from fast-1 to be recreated with the preference"),
        ("web-b-fast", "evicted", "evicted from fast-1 to be recreated with the preference"),
    ]
    assert [r.split("?")[0] for r in writes(done.requests)] == [
        "POST /api/v1/namespaces/shop/pods/web-a-fast/eviction",
        "POST /apis/events.k8s.io/v1/namespaces/shop/events",
        "POST /apis/events.k8s.io/v1/namespaces/shop/events",
        "POST /api/v1/namespaces/shop/pods/web-b-fast/eviction",
        "POST /apis/events.k8s.io/v1/namespaces/shop/events",
        "POST /apis/events.k8s.io/v1/namespaces/shop/events",
        f"POST /api/v1/namespaces/{NS}/configmaps",  # the records: none yet, created
    ]
    assert not [r for r in done.requests if r.startswith(("PUT", "PATCH", "DELETE"))]
    assert all("so that its replacement is created with the preference: " in e["note"] for e in done.events)
    assert [(r["pod"]["name"], r["target"], r.get("mode")) for r in records(done.history)] == [
        ("web-a-fast", "fast-1", "missing"),
        ("web-b-fast", "fast-1", "missing"),
    ]
    assert done.code == 0  # all planned were evicted; web-a-slow is the next run's (one pod per owner)


def test_missing_respects_budgets_and_system_critical_priority_and_reports_them(tmp_path: Path) -> None:
    objs = missing_cluster()
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"].startswith("web-a"):
            o["metadata"]["labels"] = {**QOS, "app": "web-a"}
        if o["metadata"]["name"] == "web-b-fast":
            o["spec"] |= {"priority": 2000000000, "priorityClassName": "system-cluster-critical"}
    objs.append(budget("web-a", "web-a", 0))
    done = applied(objs, tmp_path, missing=True, max_evictions=5)
    assert [(c["name"], c["action"], c["constraint"]) for c in done.report["candidates"]] == [
        ("web-a-fast", "skip", "pdb"),
        ("web-a-slow", "skip", "pdb"),
        ("web-b-fast", "skip", "priority"),
    ]
    assert done.report["candidates"][0]["reason"] == (
        "blocked: PodDisruptionBudget web-a allows no disruption now (0 allowed)"
    )
    assert done.report["summary"]["blocked_in_plan"] == 2
    assert done.evictions == [] and writes(done.requests) == []
    assert done.code == 0  # nothing to recreate now


def test_missing_without_an_active_registration_recreates_nothing(tmp_path: Path) -> None:
    objs = [o for o in missing_cluster() if o["kind"] not in ("MutatingWebhookConfiguration", "EndpointSlice")]
    done = applied(objs, tmp_path, missing=True, max_evictions=5)
    assert done.report["registration"]["active"] is False
    assert {(c["action"], c["constraint"]) for c in done.report["candidates"]} == {("skip", "scope")}
    assert done.evictions == [] and writes(done.requests) == []
    assert done.code == 3


def test_missing_table_says_what_is_recreated_and_where_it_is_predicted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with kubeapi.serve(Snapshot().add_all(missing_cluster()), tmp_path) as api:
        argv = ["rebalance", "--kubeconfig", str(api.kubeconfig), "--config", POLICY, "--missing"]
        assert main(argv) == 3
    out = capsys.readouterr().out
    assert "PLAN    --missing: 3 running pod(s) created without the preference: 2 to recreate, 1 skipped" in out
    assert "TO RECREATE (created without the preference)" in out
    assert "NAMESPACE/NAME    NODE     NET    OWNER              ACTION   PREDICTED   REASON" in out
    assert "shop/web-a-fast   fast-1   high   Deployment/web-a   evict    fast-1      created without the pref" in out


# --- each rule's own best class, and pods of an earlier policy ------------------------------------

TWO_TABLES = str(FIXTURES / "policy-two-tables.yaml")  # netqos: net=high best; batch: net=low best
BATCH = {"qos": "batch", "app": "batch"}
# what an earlier policy's rule netqos injected: net=high at another weight, under its annotation
EARLIER_TERMS = [
    {"weight": 50, "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]}}
]


def admitted(policy: Policy, obj: dict[str, Any]) -> dict[str, Any]:
    """The pod as the webhook left it under `policy`: its rule's terms and the annotation."""
    outcome = evaluate(policy, obj)
    assert outcome.decision == Decision.MUTATED
    return dict(outcome.pod)


def two_rules_cluster() -> list[dict[str, Any]]:
    """fast-1 (net=high), low-1 (net=low) and plain-1 (no label), 4 CPUs each; the webhook registered
    for the two rules. web-a runs on low-1 and web-old on plain-1 (mutated under an earlier policy),
    batch-a on fast-1 and batch-b on low-1, where its rule asks."""
    policy = load_policy(TWO_TABLES)
    objs = [
        *registration(policy=policy),
        kubeapi.namespace("shop"),
        *(sized(node(name, net), "4") for name, net in (("fast-1", "high"), ("low-1", "low"), ("plain-1", None))),
    ]
    for name, labels in (("web-a", QOS), ("web-old", QOS), ("batch-a", BATCH), ("batch-b", BATCH)):
        objs += [
            workload("Deployment", "shop", name),
            workload("ReplicaSet", "shop", f"{name}-rs", owner=("Deployment", name), template=template(labels)),
        ]
    old = app("web-old-1", "plain-1", "web-old-rs", "2026-05-02T00:00:00Z", preferred=EARLIER_TERMS)
    old["metadata"]["annotations"] = {"netqos.io/injected": "netqos"}
    return [
        *objs,
        admitted(policy, app("web-a-1", "low-1", "web-a-rs", "2026-05-01T00:00:00Z")),
        old,
        admitted(policy, app("batch-a-1", "fast-1", "batch-a-rs", "2026-05-03T00:00:00Z", labels=BATCH)),
        admitted(policy, app("batch-b-1", "low-1", "batch-b-rs", "2026-05-04T00:00:00Z", labels=BATCH)),
    ]


def test_each_rules_pods_move_to_that_rules_best_class_and_pods_of_an_earlier_policy_move_too(tmp_path: Path) -> None:
    code, report, evictions, _ = rebalance(two_rules_cluster(), tmp_path, "config", TWO_TABLES, "min_replicas", "0")
    assert plan_rows(report) == [
        ("web-a-1", "evict", "fast-1"),
        ("web-old-1", "evict", "fast-1"),  # its terms are an earlier policy's: its replacement gets the current ones
        ("batch-a-1", "evict", "low-1"),  # batch belongs on net=low; batch-b-1 is there already: no candidate
    ]
    batch = report["candidates"][2]["reason"]
    assert batch.startswith("kube-scheduler would place the replacement on low-1 (net=low): total "), batch
    assert report["off_high"] == {"pods": 3, "pending": 0}  # off their own rule's best class, as status counts
    assert (code, evictions) == (3, [])
