"""rebalance's plan: which stranded pods move, where, and why the others do not. The prediction it
keeps up to date per pod spec is checked against `rank` (what `explain` prints) on
random clusters; every never-evicted kind is skipped with its reason; capacity is reserved across
the planned candidates; the order is stable (longest on a slow node first)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from typing import Any

import pytest
import yaml

from harness.kubeapi import node, pod
from tests.fixtures import FIXTURES
from webhook import evictability, owners, rebalance, scope
from webhook.manifests import webhook_configuration
from webhook.policy import Policy
from webhook.policy_file import default_policy
from webhook.scheduler import incremental
from webhook.scheduler.config import profiles
from webhook.scheduler.cycle import rank
from webhook.scheduler.incremental import Predictor, World
from webhook.scheduler.model import PodInfo, Profile
from webhook.scheduler.plugins.netqos import NETQOS_TARGET
from webhook.scheduler.read import NO_SELECTORS, Selectors, pod_info, selectors_from_api
from webhook.scheduler.registry import DEFAULT_PROFILE

NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
LONG_AGO = "2026-01-01T00:00:00Z"
QOS = {"qos": "latency-sensitive", "app": "web"}
SMALL = {"requests": {"cpu": "1", "memory": "1Gi"}}


def sized(obj: dict[str, Any], cpu: str = "4", pods: str = "110", memory: str = "16Gi") -> dict[str, Any]:
    obj["status"] = {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}}
    return obj


def app_pod(name: str, node_name: str, owner: str = "web-1", created: str = LONG_AGO, **extra: Any) -> dict[str, Any]:
    p = pod("shop", name, extra.pop("labels", QOS), node_name, ("ReplicaSet", owner), created, **extra)
    p["spec"]["containers"][0]["resources"] = extra.get("resources", SMALL)
    return p


def replicas(owner: str, count: int, node_name: str = "busy") -> list[dict[str, Any]]:
    """`count` ready pods of `owner` elsewhere (on a net=high node, so they are no candidates)."""
    return [app_pod(f"{owner}-peer-{i}", node_name, owner, labels={"app": "web"}) for i in range(count)]


def registered(policy: Policy, ready: int = 2, **changes: Any) -> scope.Registration:
    """The registration `manifests` makes for `policy` (with a caBundle), its Service with `ready`
    endpoints; `changes` replace fields of every entry."""
    configuration = webhook_configuration(policy, ca_bundle=b"-----BEGIN CERTIFICATE-----")
    for entry in configuration["webhooks"]:
        entry.update(changes)
    endpoints = [{"addresses": [f"10.0.0.{i}"], "conditions": {"ready": True}} for i in range(ready)]
    slices = {("netqos-system", "netqos-webhook"): [{"endpoints": endpoints}]}
    namespaces = {n: {"kubernetes.io/metadata.name": n} for n in ("shop", "kube-system", "netqos-system")}
    return scope.Registration.read(scope.Live(configuration, slices, namespaces=namespaces))


def controller_of(obj: dict[str, Any], template: dict[str, Any] | None = None) -> dict[str, Any]:
    """The controller object of `obj` (a pod), its pod template `template` (else the pod's own
    labels, annotations and spec, as its controller made it)."""
    ref = obj["metadata"]["ownerReferences"][0]
    if template is None:
        spec = {k: v for k, v in obj["spec"].items() if k != "nodeName"}
        meta = {k: obj["metadata"][k] for k in ("labels", "annotations") if k in obj["metadata"]}
        template = {"metadata": meta, "spec": spec}
    return {
        "apiVersion": ref["apiVersion"],
        "kind": ref["kind"],
        "metadata": {"name": ref["name"], "namespace": obj["metadata"]["namespace"]},
        "spec": {"template": template},
    }


def make_plan(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    policy: Policy | None = None,
    owners: dict[tuple[str, str, str], rebalance.Owner] | None = None,
    registration: scope.Registration | None = None,
    controllers: dict[tuple[str, str, str], Any] | None = None,
    budgets: list[dict[str, Any]] | None = None,
    profile: Profile = DEFAULT_PROFILE,
    selectors: Selectors = NO_SELECTORS,
    profiles: dict[str, Profile] | None = None,
    **options: Any,
) -> rebalance.Plan:
    """The plan for the cluster; each candidate's controller (unless `controllers` names it) has
    the candidate's own template, as a controller that has not changed since it made the pod."""
    policy = policy or default_policy()
    cluster = rebalance.Inventory(policy, rebalance.Options(now=NOW, **options))
    for n in nodes:
        cluster.add_node(n)
    for p in pods:
        cluster.add_pod(p)
    found: dict[tuple[str, str, str], Any] = {}
    candidates = {c.name for c in cluster.pending}
    for p in pods:
        refs = (p.get("metadata") or {}).get("ownerReferences") or []
        if refs and p["metadata"]["name"] in candidates:
            found.setdefault(("shop", refs[0]["kind"], refs[0]["name"]), controller_of(p))
    found.update(controllers or {})
    return rebalance.plan(
        cluster,
        registration or registered(policy),
        found,
        owners,
        profile,
        budgets=evictability.Budgets(budgets or []),
        selectors=selectors,
        profiles=profiles,
    )


def rows(plan: rebalance.Plan) -> list[tuple[str, str, str | None]]:
    return [(c.name, c.action, c.target) for c in plan.candidates]


def by_name(plan: rebalance.Plan) -> dict[str, rebalance.Candidate]:
    return {c.name: c for c in plan.candidates}


CLUSTER = [sized(node("fast-a", "high")), sized(node("slow", "low"), cpu="64"), sized(node("busy", "high"), cpu="64")]


# --- the plan -------------------------------------------------------------------------------------


def test_a_stranded_pod_moves_to_the_net_high_node_it_fits() -> None:
    plan = make_plan(CLUSTER, [app_pod("a", "slow"), *replicas("web-1", 1)])
    [row] = plan.candidates
    assert (row.name, row.node, row.net, row.action) == ("a", "slow", "low", "evict")
    assert row.target in ("fast-a", "busy")
    assert row.owner == rebalance.Owner("ReplicaSet", "web-1")
    assert "kube-scheduler would place the replacement on" in row.reason


def test_pods_on_net_high_nodes_and_pods_the_policy_leaves_alone_are_no_candidates() -> None:
    opted_out = app_pod("opted-out", "slow", annotations={"netqos.io/inject": "false"})
    explicit = app_pod(
        "explicit",
        "slow",
        preferred=[
            {"weight": 1, "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["low"]}]}}
        ],
    )
    unselected = app_pod("batch", "slow", labels={"app": "batch"})
    system = pod("kube-system", "dns", QOS, "slow", ("ReplicaSet", "dns-1"))
    pending = app_pod("pending", "slow", phase="Pending")
    on_high = app_pod("on-high", "fast-a")
    plan = make_plan(CLUSTER, [opted_out, explicit, unselected, system, pending, on_high, *replicas("web-1", 2)])
    assert plan.candidates == []


def test_pods_created_without_the_terms_and_pods_with_them_are_both_candidates() -> None:
    terms = default_policy().rules[0].preferences
    with_terms = app_pod("with-terms", "slow", owner="a-1", preferred=[t.to_api() for t in terms])
    without = app_pod("without", "slow", owner="b-1")
    plan = make_plan(CLUSTER, [with_terms, without, *replicas("a-1", 1), *replicas("b-1", 1)])
    assert sorted((c.name, c.action) for c in plan.candidates) == [("with-terms", "evict"), ("without", "evict")]


def test_capacity_is_reserved_across_the_planned_candidates() -> None:
    # one fast node with room for exactly two 1-CPU pods: the third candidate no longer fits
    nodes = [sized(node("fast", "high"), cpu="2"), sized(node("slow", "low"), cpu="64")]
    pods = [app_pod(f"p{i}", "slow", owner=f"rs-{i}", created=f"2026-01-01T0{i}:00:00Z") for i in range(3)]
    pods += [app_pod(f"peer{i}", "slow", owner=f"rs-{i}", labels={"app": "web"}) for i in range(3)]
    plan = make_plan(nodes, pods)
    assert rows(plan) == [("p0", "evict", "fast"), ("p1", "evict", "fast"), ("p2", "skip", None)]
    assert by_name(plan)["p2"].reason == "no net=high node fits the replacement: 1/1 net=high node(s): Insufficient cpu"


def test_the_order_is_longest_on_a_slow_node_first_then_namespace_and_name() -> None:
    pods = [
        app_pod("young", "slow", owner="a", created="2026-01-01T10:00:00Z"),
        app_pod("old-b", "slow", owner="b", created="2026-01-01T01:00:00Z"),
        app_pod("old-a", "slow", owner="c", created="2026-01-01T01:00:00Z"),
    ]
    pods += [p for o in "abc" for p in replicas(o, 1)]
    assert [c.name for c in make_plan(CLUSTER, pods).candidates] == ["old-a", "old-b", "young"]


def test_the_time_on_the_node_is_the_pods_scheduled_condition() -> None:
    late = app_pod("bound-late", "slow", owner="a", created="2026-01-01T00:00:00Z")
    late["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T12:00:00Z"
    early = app_pod("bound-early", "slow", owner="b", created="2026-01-01T06:00:00Z")
    plan = make_plan(CLUSTER, [late, early, *replicas("a", 1), *replicas("b", 1)])
    assert [c.name for c in plan.candidates] == ["bound-early", "bound-late"]


def test_one_pod_per_owner_moves_in_a_run() -> None:
    pods = [app_pod(f"p{i}", "slow", owner="web-1", created=f"2026-01-01T0{i}:00:00Z") for i in range(3)]
    plan = make_plan(CLUSTER, pods)
    assert [c.action for c in plan.candidates] == ["evict", "skip", "skip"]
    assert by_name(plan)["p1"].reason == "another pod of ReplicaSet/web-1 is moved in this run (one pod per owner)"


def test_one_pod_per_owner_counts_the_top_owner() -> None:
    pods = [app_pod("a", "slow", owner="web-old"), app_pod("b", "slow", owner="web-new")]
    pods += replicas("web-old", 1) + replicas("web-new", 1)
    deployment = rebalance.Owner("Deployment", "web")
    owners = {("shop", "ReplicaSet", "web-old"): deployment, ("shop", "ReplicaSet", "web-new"): deployment}
    plan = make_plan(CLUSTER, pods, owners=owners)
    assert [(c.name, c.action, c.owner) for c in plan.candidates] == [
        ("a", "evict", deployment),
        ("b", "skip", deployment),
    ]
    assert by_name(plan)["b"].reason == "another pod of Deployment/web is moved in this run (one pod per owner)"


def test_top_owner_reads_the_controllers_own_controller() -> None:
    replica_set = {"metadata": {"ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}]}}
    rs = owners.Owner("ReplicaSet", "web-1")
    assert owners.top_owner(rs, replica_set) == rebalance.Owner("Deployment", "web")
    assert owners.top_owner(rs, {"metadata": {}}) == rs
    assert owners.top_owner(owners.Owner("Job", "j"), None) == owners.Owner("Job", "j")
    # a ReplicaSet some other controller owns stays the owner a person knows
    other = {"metadata": {"ownerReferences": [{"kind": "Rollout", "name": "web", "controller": True}]}}
    assert owners.top_owner(rs, other) == rs


def _with(p: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    *parents, last = path.split(".")
    obj = p
    for key in parents:
        obj = obj.setdefault(key, {})
    obj[last] = value
    return p


NEVER_EVICTED = [
    (
        "terminating",
        _with(app_pod("x", "slow"), "metadata.deletionTimestamp", "2026-01-01T23:59:00Z"),
        {},
        "terminating",
    ),
    (
        "mirror",
        _with(app_pod("x", "slow"), "metadata.annotations", {"kubernetes.io/config.mirror": "abc"}),
        {},
        "a mirror pod of a static pod: the kubelet runs it from a file, the API cannot move it",
    ),
    (
        "no-controller",
        _with(app_pod("x", "slow"), "metadata.ownerReferences", []),
        {},
        "no controller: nothing would re-create it after an eviction",
    ),
    (
        "daemonset",
        pod("shop", "x", QOS, "slow", ("DaemonSet", "agent")),
        {},
        "a DaemonSet pod (DaemonSet/agent): its replacement is bound to the same node",
    ),
    (
        "empty-dir",
        app_pod("x", "slow", volumes=[{"name": "cache", "emptyDir": {}}]),
        {},
        "uses emptyDir volume cache, lost on eviction (--include-local-storage moves it anyway)",
    ),
    (
        "host-path",
        app_pod("x", "slow", volumes=[{"name": "logs", "hostPath": {"path": "/var/log"}}]),
        {},
        "uses hostPath volume logs, lost on eviction (--include-local-storage moves it anyway)",
    ),
    (
        "too-young",
        app_pod("x", "slow", created="2026-01-01T23:55:00Z"),
        {},
        "created 5m0s ago, less than --min-age 10m0s",
    ),
    (
        "too-few-ready",
        app_pod("x", "slow", owner="solo"),
        {},
        "its ReplicaSet solo has 1 ready pod(s), fewer than --min-replicas 2",
    ),
    (
        "too-few-ready-by-option",
        app_pod("x", "slow"),
        {"min_replicas": 3},
        "its ReplicaSet web-1 has 2 ready pod(s), fewer than --min-replicas 3",
    ),
    (
        "system-cluster-critical",
        app_pod("x", "slow", priority=2000000000, priorityClassName="system-cluster-critical"),
        {},
        "system-critical priority (2000000000, system-cluster-critical): never evicted, "
        "as the descheduler protects such pods",
    ),
    (
        "system-node-critical-by-value",
        app_pod("x", "slow", priority=2000001000),
        {},
        "system-critical priority (2000001000): never evicted, as the descheduler protects such pods",
    ),
    (
        "system-priority-class-without-value",
        app_pod("x", "slow", priorityClassName="system-node-critical"),
        {},
        "system-critical priority (system-node-critical): never evicted, as the descheduler protects such pods",
    ),
]
# The named constraint (`webhook.evictability.CONSTRAINTS`) that answers for each case.
CONSTRAINT_OF = {
    "empty-dir": "local-storage",
    "host-path": "local-storage",
    "too-young": "min-age",
    "too-few-ready": "replicas",
    "too-few-ready-by-option": "replicas",
    "system-cluster-critical": "priority",
    "system-node-critical-by-value": "priority",
    "system-priority-class-without-value": "priority",
}


@pytest.mark.parametrize(("case", "obj", "options", "reason"), NEVER_EVICTED, ids=[c[0] for c in NEVER_EVICTED])
def test_never_evicted_kinds_are_skipped_with_their_reason(
    case: str, obj: dict[str, Any], options: dict[str, Any], reason: str
) -> None:
    plan = make_plan(CLUSTER, [obj, *replicas("web-1", 1)], **options)
    [row] = plan.candidates
    assert (row.action, row.target, row.reason) == ("skip", None, reason)
    assert row.constraint == CONSTRAINT_OF.get(case, case)


def test_a_priority_below_system_critical_is_evicted() -> None:
    plan = make_plan(
        CLUSTER, [app_pod("x", "slow", priority=1999999999, priorityClassName="high"), *replicas("web-1", 1)]
    )
    assert [(c.name, c.action) for c in plan.candidates] == [("x", "evict")]


def test_local_storage_and_age_limits_can_be_lifted() -> None:
    pods = [
        app_pod("cache", "slow", owner="a", volumes=[{"name": "cache", "emptyDir": {}}]),
        app_pod("young", "slow", owner="b", created="2026-01-01T23:59:00Z"),
        *replicas("a", 1),
        *replicas("b", 1),
    ]
    plan = make_plan(CLUSTER, pods, include_local_storage=True, min_age=dt.timedelta(0))
    assert [c.action for c in plan.candidates] == ["evict", "evict"]


def test_a_slower_node_the_scheduler_prefers_is_a_skip_with_both_totals() -> None:
    # the only net=high node has a PreferNoSchedule taint: TaintToleration (weight 3) outweighs the affinity
    tainted = node("fast", "high", taints=[{"key": "maintenance", "value": "soon", "effect": "PreferNoSchedule"}])
    nodes = [sized(tainted), sized(node("plain"), cpu="64"), sized(node("slow", "low"), cpu="64")]
    plan = make_plan(nodes, [app_pod("a", "slow"), *replicas("web-1", 1, "plain")])
    [row] = plan.candidates
    assert row.action == "skip"
    assert row.reason.startswith("kube-scheduler would place the replacement on plain (no net label): total ")
    assert row.reason.endswith("on fast (net=high), the best net=high node")


def test_no_net_high_node_at_all() -> None:
    plan = make_plan([sized(node("slow", "low"))], [app_pod("a", "slow"), *replicas("web-1", 1, "slow")])
    assert [(c.name, c.action, c.reason) for c in plan.candidates if c.name == "a"] == [
        ("a", "skip", "no node is labelled net=high")
    ]


def test_unusable_nodes_are_noted_and_left_out() -> None:
    broken = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bad"}, "spec": {"taints": "oops"}}
    plan = make_plan([*CLUSTER, broken], [app_pod("a", "slow"), *replicas("web-1", 1)])
    assert plan.nodes == 3
    assert plan.notes == ["node bad left out: spec.taints: expected a list, got a string ('oops')"] or plan.notes[
        0
    ].startswith("node bad left out: spec.taints")


def test_the_policy_decides_never_a_fixed_label_or_weight() -> None:
    """A policy with other terms and another pod label: its own selector and terms are used."""
    from webhook.policy_file import policy_from_bytes

    policy = policy_from_bytes(
        b"""
rules:
- name: gold
  podSelector: {matchLabels: {tier: gold}}
  preferences:
  - weight: 50
    matchExpressions: [{key: net, operator: In, values: [high]}]
""",
        "policy.yaml",
    )
    gold = app_pod("gold", "slow", labels={"tier": "gold"})
    qos = app_pod("qos", "slow", owner="web-2")
    plan = make_plan(CLUSTER, [gold, qos, *replicas("web-1", 1), *replicas("web-2", 1)], policy=policy)
    assert [(c.name, c.action) for c in plan.candidates] == [("gold", "evict")]


def test_summary_counts() -> None:
    candidates = [
        rebalance.Candidate("ns", "a", "n", None, None, "evict", "f", "r"),
        rebalance.Candidate("ns", "b", "n", None, None, "skip", None, "r"),
    ]
    assert rebalance.summary(candidates) == {
        "candidates": 2,
        "movable": 1,
        "evicted": 0,
        "blocked": 0,
        "skipped": 1,
        "gone": 0,
        "throttled": 0,
        "blocked_in_plan": 0,
    }


# --- the prediction is rank's -----------------------------------------------------------


def random_cluster(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = []
    for i in range(rng.randint(2, 9)):
        taints = []
        if rng.random() < 0.3:
            taints.append(
                {"key": "k", "value": rng.choice(["a", "b"]), "effect": rng.choice(["PreferNoSchedule", "NoSchedule"])}
            )
        if rng.random() < 0.2:
            taints.append({"key": "other", "effect": "PreferNoSchedule"})
        n = node(f"n{i}", rng.choice(["high", "low", None, "medium"]), taints=taints, unschedulable=rng.random() < 0.1)
        sized(n, cpu=str(rng.choice([1, 2, 4])), pods=str(rng.choice([2, 3, 110])), memory=f"{rng.choice([2, 8])}Gi")
        n["status"]["images"] = (
            [{"names": ["registry.example/app:1"], "sizeBytes": 500 * 2**20}] if rng.random() < 0.3 else []
        )
        nodes.append(n)
    pods = []
    for j in range(rng.randint(0, 12)):
        where = rng.choice(nodes)["metadata"]["name"]
        resources = {"requests": {"cpu": rng.choice(["100m", "500m", "1"]), "memory": rng.choice(["128Mi", "1Gi"])}}
        pods.append(app_pod(f"p{j}", where, owner=f"rs-{j}", labels={"app": "x"}, resources=resources))
    return nodes, pods


@pytest.mark.parametrize("seed", range(60))
def test_the_prediction_is_the_cycles_as_usage_changes(seed: int) -> None:
    rng = random.Random(seed)
    nodes, pods = random_cluster(rng)
    cluster = rebalance.Inventory(default_policy(), rebalance.Options(now=NOW))
    for n in nodes:
        cluster.add_node(n)
    for p in pods:
        cluster.add_pod(p)
    state = World(cluster.nodes, cluster.usage(), DEFAULT_PROFILE, NETQOS_TARGET)
    tolerations = [{"key": "k", "operator": "Equal", "value": "a"}] if rng.random() < 0.5 else []
    incoming = app_pod("new", "", labels=QOS, tolerations=tolerations, resources={"requests": {"cpu": "500m"}})
    outcome_view = pod_info(incoming)
    view = dataclasses.replace(outcome_view, preferred=default_policy().rules[0].preferences, node_name="")
    predictor = Predictor(view, state)
    for _ in range(12):
        usage = {n.name: state.usage[i] for i, n in enumerate(state.nodes)}
        expected = sorted(rank(view, state.nodes, usage).predicted)
        # choice() first: it scores lazily, only the nodes that could beat the best net=high node
        high = {n.name for n in state.nodes if n.labels.get("net") == "high"}
        target = predictor.choice().target
        assert target == (expected[0] if expected and set(expected) <= high else None)
        assert predictor.predicted() == expected
        # a pod moves: one node gains, another loses (if it has one)
        mover = pod_info(app_pod("m", "", resources={"requests": {"cpu": rng.choice(["250m", "1"])}}))
        feasible = sorted(predictor.feasible)  # fill the feasible nodes: the best raw scores change
        state.move(rng.choice(feasible) if feasible else 0, mover, remove=False)
        loaded = [i for i, t in enumerate(state.tallies) if t.pods and t.requested.get("cpu", 0) >= 1000]
        if loaded and rng.random() < 0.3:
            state.move(rng.choice(loaded), mover, remove=True)
        predictor.sync()


def test_the_prediction_renormalises_when_the_best_feasible_node_fills() -> None:
    """Once the net=high node is full, NodeAffinity normalises by the unlabelled node: with the
    classic terms it then scores 100 there (not 10), which outweighs the empty net=low node's free
    resources. (The default's constant keeps that lead at 20, which the free resources outweigh.)"""
    nodes = [sized(node("fast", "high"), cpu="1"), sized(node("plain"), cpu="4"), sized(node("slow", "low"), cpu="4")]
    busy = app_pod("busy", "plain", labels={"app": "x"}, resources={"requests": {"cpu": "3", "memory": "1Gi"}})
    cluster = rebalance.Inventory(default_policy(), rebalance.Options(now=NOW))
    for n in nodes:
        cluster.add_node(n)
    cluster.add_pod(busy)
    state = World(cluster.nodes, cluster.usage(), DEFAULT_PROFILE, NETQOS_TARGET)
    view = pod_info(app_pod("new", "", resources={"requests": {"cpu": "500m", "memory": "128Mi"}}))
    view = dataclasses.replace(view, preferred=default_policy().rules[0].beside_own)  # the classic terms
    predictor = Predictor(view, state)
    assert predictor.predicted() == ["fast"]
    state.move(state.index["fast"], pod_info(busy), remove=False)  # fast is full now
    predictor.sync()
    usage = {n.name: state.usage[i] for i, n in enumerate(state.nodes)}
    assert predictor.predicted() == list(rank(view, state.nodes, usage).predicted) == ["plain"]


def test_pods_that_differ_only_in_their_labels_share_one_prediction(monkeypatch: pytest.MonkeyPatch) -> None:
    """A StatefulSet's pods carry their own names as labels: one Predictor (one pass over every
    node) serves them all, as long as what the scheduler reads of them is the same."""
    made: list[PodInfo] = []

    class Counting(Predictor):
        def __init__(self, view: PodInfo, state: Any, profile: Any = None, target: Any = None) -> None:
            made.append(view)
            super().__init__(view, state, profile, target)

    monkeypatch.setattr(incremental, "Predictor", Counting)
    pods = [
        app_pod(f"db-{i}", "slow", owner=f"db-{i}", labels={**QOS, "statefulset.kubernetes.io/pod-name": f"db-{i}"})
        for i in range(4)
    ]
    pods += [p for i in range(4) for p in replicas(f"db-{i}", 1)]
    plan = make_plan([sized(node("fast", "high"), cpu="64"), *CLUSTER[1:]], pods)
    assert [c.action for c in plan.candidates] == ["evict"] * 4
    assert len(made) == 1


def test_a_pod_whose_fields_cannot_be_read_is_skipped_with_the_field() -> None:
    broken = app_pod("broken", "slow", resources={"requests": {"cpu": "lots"}})
    plan = make_plan(CLUSTER, [broken, *replicas("web-1", 1)])
    [row] = plan.candidates
    assert row.action == "skip"
    assert row.reason.startswith(
        "cannot evaluate the replacement's scheduling fields: spec.containers[0].resources.requests"
    )


def test_objects_missing_fields_are_left_out_not_a_crash() -> None:
    bare_node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}}  # no spec, no status
    plan = make_plan([*CLUSTER, bare_node], [{"kind": "Pod"}, {"metadata": {}, "spec": None}, app_pod("a", "bare")])
    [row] = plan.candidates
    assert (row.name, row.node, row.net) == ("a", "bare", None)


# --- the live registration ----------------------------------------------------------------------


def test_a_pod_the_registration_does_not_call_the_webhook_for_is_never_evicted() -> None:
    # the chart's webhook.excludeNamespaces: the shop namespace is left out by the namespaceSelector
    excluded = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["shop"]}]}
    plan = make_plan(
        CLUSTER,
        [app_pod("a", "slow"), *replicas("web-1", 1)],
        registration=registered(default_policy(), **{"namespaceSelector": excluded}),
    )
    [row] = plan.candidates
    assert (row.action, row.constraint) == ("skip", "scope")
    assert row.reason == (
        "its replacement would not be mutated: the registration does not call the webhook in namespace shop "
        "(namespaceSelector of webhook entry netqos.netqos.io)"
    )
    assert plan.registration == ""


def test_without_an_active_registration_nothing_is_movable_and_the_plan_says_why() -> None:
    plan = make_plan(
        CLUSTER, [app_pod("a", "slow"), *replicas("web-1", 1)], registration=registered(default_policy(), ready=0)
    )
    assert plan.movable == []
    assert plan.registration.startswith("no active registration calls the webhook: webhook entry netqos.netqos.io: ")
    assert [c.constraint for c in plan.candidates] == ["scope"]


# --- the replacement is predicted from the controller's template --------------------------------

BIG = {"requests": {"cpu": "1", "memory": "7Gi"}}
# fast has room for one more pod, as full as it can be then; plain (no net label) is nearly empty:
# the classic terms' net=high lead (180) keeps the replacement on fast, the default's (90) does not.
CROWDED = [
    sized(node("fast", "high"), cpu="2"),
    sized(node("plain"), cpu="64", memory="256Gi"),
    sized(node("slow", "low"), cpu="64"),
]


def test_a_pod_with_older_terms_is_not_evicted_when_its_templates_replacement_lands_on_a_slower_node() -> None:
    from tests.fixtures import CLASSIC_TERMS

    carrying_classic = app_pod("a", "slow", preferred=CLASSIC_TERMS, resources=BIG)
    peer = app_pod("web-1-peer-0", "fast", labels={"app": "web"}, resources=BIG)
    as_created = controller_of(carrying_classic)  # a template with the classic terms, as once injected
    now = controller_of(app_pod("a", "slow", resources=BIG))  # the template as it is: no terms
    moved = make_plan(CROWDED, [carrying_classic, peer], controllers={("shop", "ReplicaSet", "web-1"): as_created})
    assert [(c.action, c.target) for c in moved.candidates] == [("evict", "fast")]
    kept = make_plan(CROWDED, [carrying_classic, peer], controllers={("shop", "ReplicaSet", "web-1"): now})
    [row] = kept.candidates
    assert (row.action, row.constraint) == ("skip", "placement")
    assert row.reason.startswith("kube-scheduler would place the replacement on plain (no net label): total ")


# The profiles of tests/fixtures/scheduler-config-netqos.yaml: the default, netqos-scheduler (the
# default plus the NetQoS scheduler plugin at weight 1), network-aware (a Score plugin not evaluated).
PROFILES = profiles(yaml.safe_load((FIXTURES / "scheduler-config-netqos.yaml").read_text()))
SCHEDULED_BY = [
    # (case, the template's schedulerName, the profiles known, action, target, constraint, the reason begins)
    (
        "the default scheduler's profile: the default terms' lead (90) loses to plain's free room",
        "default-scheduler",
        PROFILES,
        "skip",
        None,
        "placement",
        "kube-scheduler would place the replacement on plain (no net label)",
    ),
    (
        "netqos-scheduler's profile: NetQoS adds 90 more to fast's lead, which keeps it there",
        "netqos-scheduler",
        PROFILES,
        "evict",
        "fast",
        "",
        "kube-scheduler would place the replacement on fast",
    ),
    (
        "netqos-scheduler with no profile given for it: never evicted, the reason says what to pass",
        "netqos-scheduler",
        {"default-scheduler": DEFAULT_PROFILE},
        "skip",
        None,
        "scheduler",
        "its replacement is scheduled by netqos-scheduler, whose profile is not known: where it would land cannot "
        "be predicted; give that scheduler's KubeSchedulerConfiguration with --scheduler-config FILE",
    ),
    (
        "a profile that runs a Score plugin not evaluated here: never evicted",
        "network-aware",
        PROFILES,
        "skip",
        None,
        "scheduler",
        "its replacement is scheduled by network-aware: its profile runs the Score plugin(s) NetworkOverhead, not "
        "evaluated here: where it would land cannot be predicted",
    ),
]


@pytest.mark.parametrize(
    ("case", "scheduler", "known", "action", "target", "constraint", "reason"),
    SCHEDULED_BY,
    ids=[c[0] for c in SCHEDULED_BY],
)
def test_the_replacement_is_predicted_with_the_profile_of_its_templates_scheduler(
    case: str,
    scheduler: str,
    known: dict[str, Profile],
    action: str,
    target: str | None,
    constraint: str,
    reason: str,
) -> None:
    stranded = app_pod("a", "slow", resources=BIG, schedulerName=scheduler)
    peer = app_pod("web-1-peer-0", "fast", labels={"app": "web"}, resources=BIG)
    plan = make_plan(CROWDED, [stranded, peer], profiles=known)
    [row] = plan.candidates
    assert (row.action, row.target, row.constraint) == (action, target, constraint), row.reason
    assert row.reason.startswith(reason)
    if action == "evict":
        assert "(netqos-scheduler's profile)" in row.reason


def test_the_netqos_profile_of_the_fixture_is_the_one_the_control_plane_harness_runs() -> None:
    """The fixture's two first profiles are the harness's kube-scheduler's (the e2e tests pass its file)."""
    from harness.controlplane import _scheduler_config

    harness = profiles(_scheduler_config(FIXTURES / "kubeconfig"))
    assert harness == {name: PROFILES[name] for name in ("default-scheduler", "netqos-scheduler")}
    assert dict(harness["netqos-scheduler"].weights) == {**DEFAULT_PROFILE.weights, "NetQoS": 1}


def _template(labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "app", "image": "app:1"}], **spec}}


REPLACEMENTS = [
    (
        "the template opts out now",
        {
            ("shop", "ReplicaSet", "web-1"): controller_of(
                app_pod("x", "slow"),
                {**_template(QOS), "metadata": {"labels": QOS, "annotations": {"netqos.io/inject": "false"}}},
            )
        },
        "replacement",
        "the webhook would not give its replacement the preference: its template opts out",
    ),
    (
        "the template's labels leave the registration's objectSelector",
        {("shop", "ReplicaSet", "web-1"): controller_of(app_pod("x", "slow"), _template({"app": "web"}))},
        "scope",
        "its replacement would not be mutated: the registration does not call the webhook for its labels "
        "(objectSelector of webhook entry netqos.netqos.io)",
    ),
    (
        "the controller RBAC hides",
        {("shop", "ReplicaSet", "web-1"): "forbidden by RBAC"},
        "replacement",
        "cannot read its ReplicaSet/web-1 (forbidden by RBAC): the pod it would create in its place is not known",
    ),
    (
        "the template is scheduled by another scheduler",
        {("shop", "ReplicaSet", "web-1"): controller_of(app_pod("x", "slow"), _template(QOS, schedulerName="netqos"))},
        "scheduler",
        "its replacement is scheduled by netqos, whose profile is not known: where it would land cannot be predicted; "
        "give that scheduler's KubeSchedulerConfiguration with --scheduler-config FILE",
    ),
]


@pytest.mark.parametrize(
    ("case", "controllers", "constraint", "reason"), REPLACEMENTS, ids=[r[0] for r in REPLACEMENTS]
)
def test_the_replacement_is_what_the_controllers_template_makes(
    case: str, controllers: dict[tuple[str, str, str], Any], constraint: str, reason: str
) -> None:
    plan = make_plan(CLUSTER, [app_pod("x", "slow"), *replicas("web-1", 1)], controllers=controllers)
    [row] = plan.candidates
    assert (row.action, row.constraint, row.reason) == ("skip", constraint, reason)


def test_a_controller_without_a_pod_template_of_its_own_is_never_evicted() -> None:
    p = pod("shop", "x", QOS, "slow", ("ReplicaSet", "web-1"))
    p["metadata"]["ownerReferences"][0]["kind"] = "Rollout"
    peer = pod("shop", "y", {"app": "web"}, "busy", ("ReplicaSet", "web-1"))
    peer["metadata"]["ownerReferences"][0]["kind"] = "Rollout"
    [row] = make_plan(CLUSTER, [p, peer]).candidates
    assert (row.action, row.constraint) == ("skip", "replacement")
    assert row.reason == (
        "its controller Rollout/web-1 is not a ReplicaSet, StatefulSet, Job or ReplicationController: the pod it "
        "would create in its place cannot be read"
    )


def test_a_statefulset_replacement_keeps_its_ordinal_labels() -> None:
    sts = pod("shop", "db-3", {**QOS, "statefulset.kubernetes.io/pod-name": "db-3"}, "slow", ("StatefulSet", "db"))
    peers = [pod("shop", f"db-{i}", {"app": "web"}, "busy", ("StatefulSet", "db")) for i in range(2)]
    # only the pod named db-3 is selected: a replacement labelled as db-0 would not be
    selector = {"matchLabels": {"statefulset.kubernetes.io/pod-name": "db-3"}}
    plan = make_plan(CLUSTER, [sts, *peers], registration=registered(default_policy(), objectSelector=selector))
    assert [(c.name, c.action) for c in plan.candidates] == [("db-3", "evict")]


def test_each_statefulset_candidate_is_replaced_by_a_pod_of_its_own_ordinal() -> None:
    """The replacements of one StatefulSet's candidates differ in their ordinal labels: one made
    for db-3 is never taken for db-4's."""
    selected = [
        pod("shop", f"db-{i}", {**QOS, "statefulset.kubernetes.io/pod-name": f"db-{i}"}, "slow", ("StatefulSet", "db"))
        for i in (3, 4)
    ]
    selector = {"matchLabels": {"statefulset.kubernetes.io/pod-name": "db-3"}}
    plan = make_plan(CLUSTER, selected, registration=registered(default_policy(), objectSelector=selector))
    # db-4's replacement, labelled db-4, is outside the registration's objectSelector
    assert [(c.name, c.action, c.constraint) for c in plan.candidates] == [
        ("db-3", "evict", ""),
        ("db-4", "skip", "scope"),
    ]


# --- PodDisruptionBudgets are read when planning ------------------------------------------------


def budget(name: str, labels: dict[str, str], allowed: int, generation: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "shop", "generation": generation},
        "spec": {"selector": {"matchLabels": labels}},
        "status": {"disruptionsAllowed": allowed, "observedGeneration": 1},
    }


ROOM_FOR_ONE = [sized(node("fast", "high"), cpu="1"), sized(node("slow", "low"), cpu="64")]


def test_a_pod_its_budget_blocks_is_planned_as_blocked_and_reserves_no_room() -> None:
    blocked = app_pod("a", "slow", owner="a-1", labels={**QOS, "app": "a"}, created="2026-01-01T00:00:00Z")
    other = app_pod("b", "slow", owner="b-1", labels={**QOS, "app": "b"}, created="2026-01-01T01:00:00Z")
    pods = [blocked, other, *replicas("a-1", 1, "slow"), *replicas("b-1", 1, "slow")]
    plan = make_plan(ROOM_FOR_ONE, pods, budgets=[budget("a", {"app": "a"}, 0)])
    assert rows(plan) == [("a", "skip", None), ("b", "evict", "fast")]
    row = by_name(plan)["a"]
    assert (row.constraint, row.reason) == (
        "pdb",
        "blocked: PodDisruptionBudget a allows no disruption now (0 allowed)",
    )


BUDGETS = [
    (
        "one disruption, two pods: the second is blocked",
        [budget("web", {"app": "web"}, 1)],
        ["evict", "skip"],
        "blocked: PodDisruptionBudget web allows no disruption now (0 allowed)",
    ),
    (
        "a budget still being processed",
        [budget("web", {"app": "web"}, 5, generation=2)],
        ["skip", "skip"],
        "blocked: PodDisruptionBudget web is still being processed by the disruption controller",
    ),
    (
        "two budgets select the pod",
        [budget("web", {"app": "web"}, 5), budget("all", {}, 5)],
        ["skip", "skip"],
        "more than one PodDisruptionBudget selects it (web, all): the Eviction API refuses to evict such a pod",
    ),
]


@pytest.mark.parametrize(("case", "budgets", "actions", "reason"), BUDGETS, ids=[b[0] for b in BUDGETS])
def test_budgets_as_the_eviction_api_counts_them(
    case: str, budgets: list[dict[str, Any]], actions: list[str], reason: str
) -> None:
    pods = [
        app_pod("a", "slow", owner="a-1", created="2026-01-01T00:00:00Z"),
        app_pod("b", "slow", owner="b-1", created="2026-01-01T01:00:00Z"),
        *replicas("a-1", 1, "slow"),
        *replicas("b-1", 1, "slow"),
    ]
    plan = make_plan(CLUSTER, pods, budgets=budgets)
    assert [c.action for c in plan.candidates] == actions
    assert plan.candidates[1].reason == reason


# --- PodTopologySpread's default spreading: the lead must hold with it --------------------------


SPREAD_NODES = [sized(node("fast-1", "high"), cpu="64"), sized(node("slow", "low"), cpu="64")]
WEB_SERVICE = {"metadata": {"namespace": "shop", "name": "web"}, "spec": {"selector": {"app": "web"}}}


def behind_service(siblings_on_fast: int) -> rebalance.Plan:
    """A pod of web-1 stranded on the slow node; `siblings_on_fast` pods of its Service's app on
    the fast node (of another ReplicaSet, so none is a candidate nor counted as a replica of it)."""
    pods = [app_pod("web-0", "slow"), *replicas("web-1", 1, node_name="slow")]
    pods += [app_pod(f"web-peer-{i}", "fast-1", owner="web-2", labels={"app": "web"}) for i in range(siblings_on_fast)]
    return make_plan(SPREAD_NODES, pods, selectors=selectors_from_api([WEB_SERVICE]), min_replicas=1)


def test_without_siblings_on_the_fast_node_the_pod_moves_and_the_reason_states_its_lead() -> None:
    row = by_name(behind_service(0))["web-0"]
    assert (row.action, row.target) == ("evict", "fast-1")
    assert "a lead of " in row.reason and "PodTopologySpread" in row.reason


def test_siblings_on_the_fast_node_spread_the_replacement_away_so_it_is_not_moved() -> None:
    """Three pods of the Service's app on fast-1: the default hostname constraint scores it 33 and
    the empty slow node 100 (x2), more than NodeAffinity's lead of 100 (x2 of 50): the real
    scheduler would put the replacement back on a slow node, so rebalance does not evict."""
    row = by_name(behind_service(3))["web-0"]
    assert (row.action, row.target) == ("skip", None)
    assert row.reason.startswith("kube-scheduler would place the replacement on slow (net=low)")


# --- the evicted pod while its replacement is scheduled ---------------------------------------------

SELF = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
PREFERS_ITS_OWN = {
    "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": SELF}]}
}
ZONE_ANTI = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
HOSTNAME_SPREAD = {
    "maxSkew": 1,
    "topologyKey": "kubernetes.io/hostname",
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "web"}},
}


def zoned(name: str, net: str, zone: str) -> dict[str, Any]:
    obj = sized(node(name, net))
    obj["metadata"]["labels"]["zone"] = zone
    return obj


@pytest.mark.parametrize(
    ("spec", "nodes", "others", "action"),
    [
        pytest.param(
            # its predecessor, Terminating on slow, draws it back: InterPodAffinity counts every
            # pod of the node (2 x 100 there against NodeAffinity's lead of 2 x 50 on fast)
            {"affinity": PREFERS_ITS_OWN},
            [sized(node("fast", "high")), sized(node("slow", "low"))],
            [],
            "skip",
            id="preferred-affinity-to-its-own-pods",
        ),
        pytest.param(
            # one pod of web per zone: the Terminating predecessor still holds zone a
            {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [ZONE_ANTI]}}},
            [zoned("fast", "high", "a"), zoned("slow", "low", "a"), zoned("other", "low", "b")],
            [],
            "skip",
            id="required-anti-affinity-in-its-zone",
        ),
        pytest.param(
            # spreading leaves terminating pods out: slow counts 0, fast 1, so fast would make a skew of 2
            {"topologySpreadConstraints": [HOSTNAME_SPREAD]},
            [sized(node("fast", "high")), sized(node("slow", "low"))],
            [app_pod("web-peer", "fast", owner="web-2", labels={"app": "web"})],
            "skip",
            id="spreading-leaves-it-out",
        ),
        pytest.param(
            # what it requests stays taken on slow: that only helps fast
            {},
            [sized(node("fast", "high")), sized(node("slow", "low"), cpu="1")],
            [],
            "evict",
            id="its-requests-stay-on-slow",
        ),
    ],
)
def test_the_evicted_pod_stays_on_its_node_terminating_while_its_replacement_is_scheduled(
    spec: dict[str, Any], nodes: list[dict[str, Any]], others: list[dict[str, Any]], action: str
) -> None:
    """After an eviction the pod stays on its node, Terminating, for its grace period, and its
    controller's replacement is scheduled meanwhile: the plan predicts it beside its predecessor."""
    candidate = app_pod("web-0", "slow")
    candidate["spec"].update(spec)
    plan = make_plan(nodes, [candidate, *others], min_replicas=1)
    row = by_name(plan)["web-0"]
    assert row.action == action, row.reason


def test_a_pod_not_evicted_counts_on_its_node_as_before_for_the_next_candidates() -> None:
    """A candidate the plan keeps (no move) is not left Terminating in the plan's world: the next
    candidate's spreading still counts it."""
    keep = app_pod("web-0", "slow", created="2025-12-01T00:00:00Z")  # first in order
    keep["spec"]["affinity"] = PREFERS_ITS_OWN
    spread = app_pod("api-0", "slow", owner="api-1", labels={**QOS, "app": "api"})
    spread["spec"]["topologySpreadConstraints"] = [
        {**HOSTNAME_SPREAD, "labelSelector": {"matchLabels": {"qos": "latency-sensitive"}}}
    ]
    peer = app_pod("peer", "fast", owner="other", labels={"qos": "latency-sensitive", "app": "peer"})
    peer["metadata"]["annotations"] = {"netqos.io/inject": "false"}
    nodes = [sized(node("fast", "high")), sized(node("slow", "low"))]
    rows = by_name(make_plan(nodes, [keep, spread, peer], min_replicas=1))
    assert rows["web-0"].action == "skip"
    # slow holds web-0 (not evicted) and api-0 (Terminating): fast 1 + 1 - 1 = 1, within maxSkew
    assert (rows["api-0"].action, rows["api-0"].target) == ("evict", "fast"), rows["api-0"].reason


# --- sampling: 100 nodes or more ----------------------------------------------------------------


def wide_cluster(count: int, fast: int) -> list[dict[str, Any]]:
    """`count` nodes, `fast` of them net=high spread evenly, the others net=low."""
    step = count // fast
    return [sized(node(f"n{i:04}", "high" if i % step == 0 else "low")) for i in range(count)]


@pytest.mark.parametrize(
    ("count", "fast", "minimum", "action", "probability"),
    [
        (99, 1, 0.9, "evict", 1.0),  # every cycle filters every node: certain
        (200, 1, 0.9, "skip", 0.5),  # 100 of 200 nodes per cycle: the fast node is in half the samples
        (200, 1, 0.4, "evict", 0.5),
        (200, 4, 0.9, "evict", 1.0),  # 4 fast nodes 50 apart: every window of 100 holds one
    ],
)
def test_a_move_is_planned_only_where_its_replacement_lands_on_a_fast_node_often_enough(
    count: int, fast: int, minimum: float, action: str, probability: float
) -> None:
    nodes = wide_cluster(count, fast)
    slow = nodes[1]["metadata"]["name"]
    plan = make_plan(nodes, [app_pod("web-0", slow)], min_replicas=1, min_probability=minimum)
    row = by_name(plan)["web-0"]
    assert (row.action, row.probability) == (action, pytest.approx(probability)), row.reason
    if count >= 100:
        assert f"lands on a net=high node with probability {probability:.2f}" in row.reason
    if action == "skip":
        assert row.constraint == "probability"
        assert row.reason.endswith(f"below --min-probability {minimum:g}")
