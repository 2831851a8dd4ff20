"""The evictions `rebalance --apply` remembers (webhook/evictions.py), and the `repeat` constraint
the plan applies with them: an owner whose last replacement went to a slower node is not evicted
again while the net=high nodes and the pods on them are what they were when the prediction was
made; a replacement on a net=high node, a changed world, a forgotten record or none let it move.
And the Events of an eviction, as the descheduler's recorder writes them."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from harness.kubeapi import node
from tests.unit.test_rebalance import NOW, app_pod, controller_of, registered, sized
from webhook import evictability, evictions, rebalance
from webhook.evictions import History, Record, Reference, Seen
from webhook.owners import Owner
from webhook.policy_file import default_policy
from webhook.scheduler.read import node_info

EVICTED = dt.datetime(2026, 1, 1, 12, 0, 30, tzinfo=dt.UTC)
SINCE = "2026-01-01T12:00:31Z"  # a pod created a second after the eviction: its replacement
BEFORE = "2026-01-01T06:00:00Z"
WEB = Owner("Deployment", "web", "uid-web")
RS = Owner("ReplicaSet", "web-1", "uid-web-1")
NODES = [sized(node("fast-1", "high")), sized(node("slow-1", "low"), cpu="64"), sized(node("slow-2", "low"), cpu="64")]


def record(
    target: str = "fast-1",
    world: str = "",
    evicted: dt.datetime = EVICTED,
    owner: Owner = WEB,
    newest: dt.datetime | None = None,
) -> Record:
    return Record("shop", owner, RS, "web-gone", "uid-shop-web-gone", "slow-1", target, evicted, world, newest)


def inventory(
    pods: list[dict[str, Any]], history: History = evictions.NO_HISTORY, nodes: list[dict[str, Any]] = NODES
) -> rebalance.Inventory:
    cluster = rebalance.Inventory(default_policy(), rebalance.Options(now=NOW), history=history)
    for n in nodes:
        cluster.add_node(n)
    for p in pods:
        if p["spec"].get("nodeName"):
            cluster.add_pod(p)
        else:
            cluster.add_unbound_pod(p)
    return cluster


def world(pods: list[dict[str, Any]], nodes: list[dict[str, Any]] = NODES) -> str:
    """The digest a plan of this cluster records: the world the prediction is made in."""
    cluster = inventory(pods, nodes=nodes)
    return cluster.seen.world(str(cluster.target))


def plan(pods: list[dict[str, Any]], *records: Record, nodes: list[dict[str, Any]] = NODES) -> rebalance.Plan:
    """The plan with `records` in force; every candidate's controller is ReplicaSet web-1 of
    Deployment web, its template the candidate's own."""
    cluster = inventory(pods, History(records), nodes)
    candidate = next(p for p in pods if p["metadata"]["name"] in {c.name for c in cluster.pending})
    controllers = {("shop", "ReplicaSet", "web-1"): controller_of(candidate)}
    owners = {("shop", "ReplicaSet", "web-1"): WEB}
    budgets = evictability.Budgets([])
    return rebalance.plan(cluster, registered(default_policy()), controllers, owners, budgets=budgets)


def stranded(replacement_node: str | None = "slow-2", created: str = SINCE) -> list[dict[str, Any]]:
    """web's pod on slow-1 and one on fast-1, since long before, and the pod created in place of
    the one evicted (`replacement_node` None: none; "": not bound yet)."""
    pods = [app_pod("web-a", "slow-1", owner="web-1"), app_pod("web-p", "fast-1", owner="web-1", created=BEFORE)]
    if replacement_node is not None:
        pods.append(app_pod("web-r", replacement_node or None, owner="web-1", created=created))
    return pods


def actions(p: rebalance.Plan) -> list[tuple[str, str, str]]:
    return [(c.name, c.action, c.constraint) for c in p.candidates]


# --- the repeat constraint -------------------------------------------------------------------------


def test_without_a_record_the_pod_moves() -> None:
    assert actions(plan(stranded()))[0] == ("web-a", "evict", "")


def test_a_wasted_eviction_in_an_unchanged_world_is_not_made_again_and_the_reason_says_when_where_and_why() -> None:
    pods = stranded()
    p = plan(pods, record(world=world(pods)))
    assert actions(p) == [("web-a", "skip", "repeat"), ("web-r", "skip", "repeat")]
    assert p.candidates[0].reason == (
        "evicted 2026-01-01T12:00Z, predicted fast-1, its replacement went to slow-2: not evicted again until the "
        "net=high nodes or the pods on them change, or until 2026-01-02T12:00Z (--forget-after)"
    )
    assert p.movable == []


TENANT = app_pod("tenant", "fast-1", owner="tenant-1", labels={"app": "tenant"})
TAINTED = sized(node("fast-1", "high", taints=[{"key": "k", "effect": "PreferNoSchedule"}]))


@pytest.mark.parametrize(
    ("why", "pods", "nodes"),
    [
        ("a pod joined a net=high node", [*stranded(), TENANT, app_pod("new", "fast-1", owner="n-1")], NODES),
        ("a pod left a net=high node", stranded(), NODES),
        ("a net=high node joined", [*stranded(), TENANT], [*NODES, sized(node("fast-2", "high"))]),
        ("a net=high node changed", [*stranded(), TENANT], [TAINTED, *NODES[1:]]),
    ],
)
def test_a_changed_world_lets_the_pod_move_again(
    why: str, pods: list[dict[str, Any]], nodes: list[dict[str, Any]]
) -> None:
    before = world([*stranded(), TENANT])
    assert world(pods, nodes) != before, why
    assert actions(plan(pods, record(world=before), nodes=nodes))[0][2] != "repeat", why


def test_the_world_is_the_same_in_any_order_and_a_slower_nodes_pods_do_not_change_it() -> None:
    pods = [*stranded(), app_pod("t1", "fast-1", owner="t-1"), app_pod("t2", "fast-1", owner="t-2")]
    assert world(pods) == world(list(reversed(pods)))
    assert world([*pods, app_pod("elsewhere", "slow-2", owner="e-1")]) == world(pods)


@pytest.mark.parametrize(
    ("case", "pods", "expected"),
    [
        # the prediction came true: the pod created since is on fast-1
        ("its replacement went to a net=high node", stranded("fast-1"), ("web-a", "evict", "")),
        # every pod of its controller is older than the eviction: no replacement to judge by
        ("no pod was created since", stranded("slow-2", BEFORE), ("web-a", "evict", "")),
        ("its replacement is gone", stranded(None), ("web-a", "evict", "")),
    ],
)
def test_nothing_holds_the_pod_when_there_is_no_replacement_on_a_slower_node(
    case: str, pods: list[dict[str, Any]], expected: tuple[str, str, str]
) -> None:
    assert actions(plan(pods, record(world=world(pods))))[0] == expected, case


@pytest.mark.parametrize(
    ("newest", "expected"),
    [
        # the plan saw it: a sibling created within the clock skew before the eviction
        (EVICTED - dt.timedelta(seconds=2), "evict"),
        # a record that does not say (none is written so): the pod counts as the replacement
        (None, "skip"),
    ],
)
def test_a_pod_the_controller_had_when_the_plan_was_made_is_no_replacement(
    newest: dt.datetime | None, expected: str
) -> None:
    pods = stranded("slow-2", "2026-01-01T12:00:28Z")
    assert actions(plan(pods, record(world=world(pods), newest=newest)))[0][1] == expected


def test_a_replacement_not_scheduled_yet_holds_the_owner_whatever_the_world() -> None:
    pods = stranded("")
    p = plan(pods, record(world="another world"))
    assert actions(p) == [("web-a", "skip", "repeat")]
    assert p.candidates[0].reason == (
        "evicted 2026-01-01T12:00Z, predicted fast-1, its replacement web-r is not scheduled yet: not evicted again "
        "until it is"
    )


def test_a_record_of_another_owner_holds_nothing() -> None:
    pods = stranded()
    assert actions(plan(pods, record(world=world(pods), owner=Owner("Deployment", "api"))))[0][1] == "evict"


def test_a_move_carries_its_controller_for_the_record_and_the_plan_its_world_and_newest_pod() -> None:
    pods = stranded()
    p = plan(pods)
    [move] = p.movable
    assert (move.controller, move.controller.uid if move.controller else "") == (RS, "uid-web-1")
    assert p.world == world(pods)
    assert p.newest == {"uid-web-1": evictions.parse_time(SINCE)}


# --- the records in the ConfigMap ------------------------------------------------------------------


def test_a_record_reads_back_as_written() -> None:
    written = evictions.data([record(world="w")])
    history, notes = evictions.read(written, NOW)
    assert (history.records, notes) == ((record(world="w"),), [])
    newer = record(world="w", newest=EVICTED - dt.timedelta(hours=1))
    assert evictions.read(evictions.data([newer]), NOW)[0].records == (newer,)
    assert json.loads(evictions.data([newer])[evictions.KEY])[0]["newest"] == "2026-01-01T11:00:30Z"
    assert json.loads(written[evictions.KEY])[0] == {
        "namespace": "shop",
        "owner": {"kind": "Deployment", "name": "web"},
        "controller": {"kind": "ReplicaSet", "name": "web-1", "uid": "uid-web-1"},
        "pod": {"name": "web-gone", "uid": "uid-shop-web-gone"},
        "node": "slow-1",
        "target": "fast-1",
        "evicted": "2026-01-01T12:00:30Z",
        "world": "w",
    }


@pytest.mark.parametrize(
    ("data", "note"),
    [
        ({evictions.KEY: "{"}, "the eviction records are not JSON"),
        ({evictions.KEY: "{}"}, "the eviction records are not a JSON list: they are left out"),
        ({evictions.KEY: '[{"namespace": "shop"}]'}, "eviction record 0 left out: not a record"),
    ],
)
def test_records_that_cannot_be_read_are_left_out_with_a_note(data: dict[str, str], note: str) -> None:
    history, notes = evictions.read(data, NOW)
    assert history.records == ()
    assert len(notes) == 1 and notes[0].startswith(note), notes


def test_no_configmap_or_no_data_is_no_record() -> None:
    assert evictions.read(None, NOW) == (History(), [])
    assert evictions.read({}, NOW) == (History(), [])


def test_records_older_than_forget_after_are_dropped() -> None:
    old = record(evicted=NOW - dt.timedelta(hours=25))
    fresh = record(evicted=NOW - dt.timedelta(hours=23), owner=Owner("Deployment", "api"))
    history, _ = evictions.read(evictions.data([old, fresh]), NOW)
    assert history.records == (fresh,)
    history, _ = evictions.read(evictions.data([old, fresh]), NOW, dt.timedelta(hours=26))
    assert history.records == (old, fresh)


def test_an_owners_newer_eviction_replaces_its_record_and_the_oldest_go_past_the_bound() -> None:
    first, second = record(evicted=NOW - dt.timedelta(hours=2)), record(evicted=NOW - dt.timedelta(hours=1))
    assert evictions.pruned([second, first], NOW, evictions.DEFAULT_FORGET_AFTER) == [second]
    many = [
        record(evicted=NOW - dt.timedelta(seconds=i), owner=Owner("Deployment", f"w{i}"))
        for i in range(evictions.MAX_RECORDS + 5)
    ]
    kept = evictions.pruned(many, NOW, evictions.DEFAULT_FORGET_AFTER)
    assert len(kept) == evictions.MAX_RECORDS
    assert kept[0].owner.name == f"w{evictions.MAX_RECORDS - 1}" and kept[-1].owner.name == "w0"


def test_the_records_stay_well_under_a_configmaps_size_limit() -> None:
    long = "x" * 253
    many = [
        Record("n" * 63, Owner("Deployment", f"{i}{long}"[:253]), RS, long, "u" * 36, long, long, NOW, "w" * 32)
        for i in range(evictions.MAX_RECORDS)
    ]
    assert len(evictions.data(many)[evictions.KEY]) < 1024 * 1024


def test_seen_watches_only_the_recorded_controllers_pods() -> None:
    seen = Seen(History((record(),)))
    seen.add_pod({"name": "mine", "uid": "1", "creationTimestamp": SINCE}, RS, "slow-2", fast=False)
    seen.add_pod({"name": "theirs", "uid": "2"}, Owner("ReplicaSet", "x", "uid-x"), "slow-2", fast=False)
    assert [p.name for p in seen.pods["uid-web-1"]] == ["mine"] and list(seen.pods) == ["uid-web-1"]
    seen.add_node(node_info(NODES[0]), fast=True)
    assert seen.world("net=high") != Seen().world("net=high")


# --- Events ---------------------------------------------------------------------------------------


def test_an_eviction_event_is_the_descheduler_recorders_event() -> None:
    pod = Reference("Pod", "shop", "web-a", "uid-a")
    owner = Reference("Deployment", "shop", "web", "uid-web")
    when = dt.datetime(2026, 1, 1, 12, 0, 30, 123456, tzinfo=dt.UTC)
    event = evictions.event(pod, owner, "evicted from slow-1", when, "rebalance-28f1-x", "a-uuid")
    nanos = int(when.timestamp()) * 10**9 + 123456000
    assert event == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"web-a.{nanos:x}", "namespace": "shop"},
        "eventTime": "2026-01-01T12:00:30.123456Z",
        "reportingController": "netqos-webhook/rebalance",
        "reportingInstance": "netqos-webhook/rebalance-rebalance-28f1-x",
        "action": "Evict",
        "reason": "NetQoSRebalanced",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "shop", "name": "web-a", "uid": "uid-a"},
        "related": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "namespace": "shop",
            "name": "web",
            "uid": "uid-web",
        },
        "note": "evicted from slow-1",
        "type": "Normal",
    }


@pytest.mark.parametrize(
    ("field", "given", "expected"),
    [
        ("note", "n" * 2000, "n" * 1021 + "..."),  # the API server's NoteLengthLimit: 1024
        ("reportingInstance", "h" * 200, ("netqos-webhook/rebalance-" + "h" * 200)[:128]),
        ("name", "p" * 250, "a-uuid"),  # no room for the suffix: client-go's UUID instead
    ],
)
def test_an_event_keeps_within_the_api_servers_limits(field: str, given: str, expected: str) -> None:
    pod = Reference("Pod", "shop", given if field == "name" else "web-a", "uid-a")
    note = given if field == "note" else "n"
    host = given if field == "reportingInstance" else "h"
    event = evictions.event(pod, None, note, NOW, host, "a-uuid")
    assert (event["metadata"]["name"] if field == "name" else event[field]) == expected
    assert "related" not in event
