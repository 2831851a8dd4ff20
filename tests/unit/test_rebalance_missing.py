"""`rebalance --missing`'s plan: the running pods the policy selects that were created without the
preference (the webhook would mutate them as they are, as `status` counts them missing) are
recreated wherever they run, by every rule `rebalance` evicts by (the evictability constraints
but `scheduler`, the live registration, budgets, one pod per owner, `repeat`), in the same order;
where each replacement is predicted to land is said and counted, never required; a replacement no
node fits even once its pod is gone is never recreated."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from harness.kubeapi import node, pod
from tests.unit.test_evictions import EVICTED, RS, SINCE, WEB
from tests.unit.test_rebalance import (
    CLUSTER,
    CONSTRAINT_OF,
    NEVER_EVICTED,
    QOS,
    app_pod,
    budget,
    by_name,
    controller_of,
    make_plan,
    registered,
    replicas,
    rows,
    sized,
)
from webhook import evictability, evictions, rebalance
from webhook.evictions import History, Record
from webhook.policy_file import default_policy

TERMS = [t.to_api() for t in default_policy().rules[0].preferences]
# fast-1 (net=high) has room for one more 1-CPU pod; slow (net=low) for many
ROOM_FOR_ONE = [sized(node("fast-1", "high"), cpu="1"), sized(node("slow", "low"), cpu="64")]


def missing_plan(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], **options: Any) -> rebalance.Plan:
    return make_plan(nodes, pods, missing=True, **options)


def test_the_candidates_are_the_running_selected_pods_created_without_the_preference_wherever_they_run() -> None:
    pods = [
        app_pod("on-fast", "fast-a", owner="a"),  # a net=high node: the point is the preference
        app_pod("on-slow", "slow", owner="b"),
        app_pod("with-terms", "slow", owner="c", preferred=TERMS),  # created through the webhook
        app_pod("opted-out", "slow", owner="d", annotations={"netqos.io/inject": "false"}),
        app_pod("unselected", "slow", owner="e", labels={"app": "batch"}),
        pod("kube-system", "dns", QOS, "slow", ("ReplicaSet", "dns-1")),
        app_pod("pending", "slow", owner="f", phase="Pending"),
        *(p for o in "abcdef" for p in replicas(o, 1)),
    ]
    plan = missing_plan(CLUSTER, pods)
    assert plan.missing
    assert sorted((c.name, c.action, c.missing) for c in plan.candidates) == [
        ("on-fast", "evict", True),
        ("on-slow", "evict", True),
    ]
    # the mode without --missing: the pod on the net=high node is none of its candidates
    assert [c.name for c in make_plan(CLUSTER, pods).candidates] == ["on-slow", "with-terms"]


def test_a_recreation_needs_no_net_high_prediction_and_says_where_its_replacement_is_predicted() -> None:
    full = [sized(node("fast-1", "high"), cpu="1"), sized(node("slow", "low"), cpu="64")]
    pods = [pod("shop", "hog", {"app": "other"}, "fast-1", ("ReplicaSet", "hog"))]
    pods[0]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    pods += [app_pod("a", "slow"), *replicas("web-1", 1, "slow")]
    [row] = missing_plan(full, pods).candidates
    assert (row.action, row.target, row.target_net) == ("evict", "slow", "low")
    assert row.reason == (
        "created without the preference: its replacement gets it; kube-scheduler would place it on slow (net=low)"
    )
    assert row.probability is None
    # the stranded mode skips it: no net=high node has room
    [stranded] = make_plan(full, pods).candidates
    assert (stranded.action, stranded.constraint) == ("skip", "placement")


def test_each_predicted_replacement_takes_its_room_for_the_recreations_after_it() -> None:
    pods = [
        app_pod("first", "slow", owner="a", created="2026-01-01T01:00:00Z"),
        app_pod("second", "slow", owner="b", created="2026-01-01T02:00:00Z"),
        *replicas("a", 1, "slow"),
        *replicas("b", 1, "slow"),
    ]
    plan = missing_plan(ROOM_FOR_ONE, pods)
    assert rows(plan) == [("first", "evict", "fast-1"), ("second", "evict", "slow")]
    assert [c.target_net for c in plan.candidates] == ["high", "low"]


def test_the_order_is_longest_running_first_then_namespace_and_name() -> None:
    pods = [
        app_pod("young", "fast-a", owner="a", created="2026-01-01T10:00:00Z"),
        app_pod("old-b", "slow", owner="b", created="2026-01-01T01:00:00Z"),
        app_pod("old-a", "busy", owner="c", created="2026-01-01T01:00:00Z"),
        *(p for o in "abc" for p in replicas(o, 1)),
    ]
    assert [c.name for c in missing_plan(CLUSTER, pods).candidates] == ["old-a", "old-b", "young"]


@pytest.mark.parametrize(("case", "obj", "options", "reason"), NEVER_EVICTED, ids=[c[0] for c in NEVER_EVICTED])
def test_what_rebalance_never_evicts_is_never_recreated_with_the_same_reason(
    case: str, obj: dict[str, Any], options: dict[str, Any], reason: str
) -> None:
    [row] = missing_plan(CLUSTER, [obj, *replicas("web-1", 1)], **options).candidates
    assert (row.action, row.target, row.reason) == ("skip", None, reason)
    assert row.constraint == CONSTRAINT_OF.get(case, case)


def test_a_budget_that_allows_no_disruption_blocks_the_recreation_and_the_next_owner_goes_on() -> None:
    pods = [
        app_pod("a", "slow", owner="a-1", labels={**QOS, "app": "a"}, created="2026-01-01T00:00:00Z"),
        app_pod("b", "fast-a", owner="b-1", labels={**QOS, "app": "b"}, created="2026-01-01T01:00:00Z"),
        *replicas("a-1", 1),
        *replicas("b-1", 1),
    ]
    plan = missing_plan(CLUSTER, pods, budgets=[budget("a", {"app": "a"}, 0)])
    assert [(c.name, c.action, c.constraint) for c in plan.candidates] == [("a", "skip", "pdb"), ("b", "evict", "")]
    assert by_name(plan)["a"].reason == "blocked: PodDisruptionBudget a allows no disruption now (0 allowed)"


def test_one_pod_per_owner_is_recreated_in_a_run() -> None:
    pods = [app_pod(f"p{i}", "fast-a", owner="web-1", created=f"2026-01-01T0{i}:00:00Z") for i in range(3)]
    plan = missing_plan(CLUSTER, pods)
    assert [(c.action, c.constraint) for c in plan.candidates] == [
        ("evict", ""),
        ("skip", "one-per-owner"),
        ("skip", "one-per-owner"),
    ]


@pytest.mark.parametrize(
    ("case", "registration", "constraint", "reason"),
    [
        (
            "no ready endpoints: the webhook is not serving",
            registered(default_policy(), ready=0),
            "scope",
            "its replacement would not be mutated: no active registration calls the webhook",
        ),
        (
            "its namespace left out by the namespaceSelector",
            registered(
                default_policy(),
                namespaceSelector={
                    "matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["shop"]}
                    ]
                },
            ),
            "scope",
            "its replacement would not be mutated: the registration does not call the webhook in namespace shop",
        ),
    ],
)
def test_a_pod_whose_replacement_the_webhook_would_not_be_called_for_is_never_recreated(
    case: str, registration: Any, constraint: str, reason: str
) -> None:
    plan = missing_plan(CLUSTER, [app_pod("a", "fast-a"), *replicas("web-1", 1)], registration=registration)
    [row] = plan.candidates
    assert (row.action, row.constraint) == ("skip", constraint), case
    assert row.reason.startswith(reason), row.reason


def test_a_template_the_webhook_would_not_mutate_is_never_recreated() -> None:
    """The pod lacks the preference, but its controller's template now opts out: its replacement
    would lack it too."""
    missing = app_pod("a", "slow")
    template = controller_of(missing)["spec"]["template"]
    template["metadata"]["annotations"] = {"netqos.io/inject": "false"}
    controllers = {("shop", "ReplicaSet", "web-1"): controller_of(missing, template)}
    [row] = missing_plan(CLUSTER, [missing, *replicas("web-1", 1)], controllers=controllers).candidates
    assert (row.action, row.constraint) == ("skip", "replacement")
    assert row.reason == "the webhook would not give its replacement the preference: its template opts out"


def test_a_replacement_no_node_fits_even_once_its_pod_is_gone_is_never_recreated() -> None:
    missing = app_pod("a", "slow")
    template = controller_of(missing)["spec"]["template"]
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100"}}  # more than any node has
    controllers = {("shop", "ReplicaSet", "web-1"): controller_of(missing, template)}
    [row] = missing_plan(CLUSTER, [missing, *replicas("web-1", 1)], controllers=controllers).candidates
    assert (row.action, row.constraint) == ("skip", rebalance.UNSCHEDULABLE)
    assert row.reason == (
        "no node fits its replacement, even once this pod is gone: 0/3 nodes are available: 3 Insufficient cpu. "
        "Recreating it would leave its owner a pod short"
    )


def test_a_replacement_that_fits_only_once_its_pod_is_gone_is_recreated_saying_so() -> None:
    """One node, full with the pod itself: while it terminates its replacement waits, then takes its place."""
    only = [sized(node("slow", "low"), cpu="2")]
    pods = [app_pod("a", "slow"), *replicas("web-1", 1, "slow")]
    [row] = missing_plan(only, pods).candidates
    assert (row.action, row.target) == ("evict", "slow")
    assert row.reason == (
        "created without the preference: its replacement gets it; no node has room for it while this pod "
        "terminates, then kube-scheduler would place it on slow (net=low)"
    )


def test_a_replacement_of_a_scheduler_whose_profile_is_not_known_is_recreated_without_a_prediction() -> None:
    missing = app_pod("a", "slow", schedulerName="gpu-scheduler")
    pods = [missing, *replicas("web-1", 1)]
    [row] = missing_plan(CLUSTER, pods).candidates
    assert (row.action, row.target) == ("evict", None)
    assert row.reason == (
        "created without the preference: its replacement gets it; where it lands is not predicted: it is scheduled "
        "by gpu-scheduler, and its profile is not known (--scheduler-config FILE gives it)"
    )
    # moving it needs the prediction: the stranded mode skips it
    assert [c.constraint for c in make_plan(CLUSTER, pods).candidates] == ["scheduler"]


# --- the records: a recreation whose replacement lacks the preference too is not made again ---------


def recorded(mode: str) -> Record:
    return Record("shop", WEB, RS, "web-gone", "uid-shop-web-gone", "fast-1", "fast-1", EVICTED, "w", None, mode)


def history_plan(pods: list[dict[str, Any]], *records: Record) -> rebalance.Plan:
    """The --missing plan with `records` in force; the candidates' controller ReplicaSet web-1 of Deployment web."""
    cluster = rebalance.Inventory(
        default_policy(), rebalance.Options(now=EVICTED + dt.timedelta(hours=1), missing=True), history=History(records)
    )
    for n in ROOM_FOR_ONE:
        cluster.add_node(n)
    for p in pods:
        cluster.add_pod(p)
    controllers = {("shop", "ReplicaSet", "web-1"): controller_of(pods[0])}
    owners = {("shop", "ReplicaSet", "web-1"): WEB}
    return rebalance.plan(cluster, registered(default_policy()), controllers, owners, budgets=evictability.Budgets([]))


def after_recreation(preference: bool) -> list[dict[str, Any]]:
    """web's pods: one from long before, without the preference, and the replacement of the one
    recreated (created after the eviction, with the preference or not)."""
    return [
        app_pod("web-a", "slow", owner="web-1"),
        app_pod("web-r", "slow", owner="web-1", created=SINCE, preferred=TERMS if preference else None),
    ]


def test_a_recreation_whose_replacement_lacks_the_preference_too_is_not_made_again() -> None:
    plan = history_plan(after_recreation(preference=False), recorded(evictions.MISSING))
    assert [(c.name, c.action, c.constraint) for c in plan.candidates] == [
        ("web-a", "skip", "repeat"),
        ("web-r", "skip", "repeat"),
    ]
    assert plan.candidates[0].reason == (
        "recreated 2026-01-01T12:00Z, its replacement web-r was created without the preference too (the webhook was "
        "not called for it, or failed open): not recreated again until 2026-01-02T12:00Z (--forget-after)"
    )


@pytest.mark.parametrize(
    ("case", "pods", "mode"),
    [
        ("its replacement got the preference", after_recreation(preference=True), evictions.MISSING),
        ("a record of a move, not of a recreation", after_recreation(preference=False), ""),
    ],
)
def test_a_recreation_that_worked_or_a_record_of_the_other_mode_holds_nothing(
    case: str, pods: list[dict[str, Any]], mode: str
) -> None:
    plan = history_plan(pods, recorded(mode))
    assert "repeat" not in [c.constraint for c in plan.candidates], case
    assert plan.movable, case


def test_a_recreations_record_says_its_mode_and_reads_back() -> None:
    record = recorded(evictions.MISSING)
    assert record.to_json()["mode"] == "missing"
    assert "mode" not in recorded("").to_json()  # a move's record is written as before
    history, notes = evictions.read(evictions.data([record]), EVICTED)
    assert (history.records, notes) == ((record,), [])
