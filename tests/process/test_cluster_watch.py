"""`cluster.watch` and the monitor's list-then-watch, through the real client against a scripted API
server: what each watch request asks for (bookmarks, a deadline, the resourceVersion to resume
from, the selectors), the events it yields, a 410 Gone (as an answer or as an ERROR event) raised
as `Expired`, after which the monitor lists again and counts a restart."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.kubeapi import Request, ScriptedAPI, node, pod
from webhook import cluster
from webhook.commands import monitor

GONE = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired",
        "message": "too old resource version: 5 (90)"}  # fmt: skip


def lines(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(json.dumps({"type": t, "object": o}).encode() + b"\n" for t, o in events)


def bookmark(version: str) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": version}}


def versioned(obj: dict[str, Any], version: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": version}}


def reader(api: ScriptedAPI, tmp_path: Path) -> cluster.Reader:
    return cluster.Reader(cluster.connect(str(api.kubeconfig(tmp_path)), None))


CASES = {
    "events in order, a bookmark among them": (
        (
            200,
            lines(
                ("ADDED", versioned(pod("shop", "a"), "11")),
                ("BOOKMARK", bookmark("12")),
                ("DELETED", versioned(pod("shop", "a"), "13")),
            ),
        ),  # fmt: skip
        [("ADDED", "11"), ("BOOKMARK", "12"), ("DELETED", "13")],
        None,
    ),
    "a 410 answer is Expired": ((410, GONE), [], cluster.Expired),
    "a 410 ERROR event is Expired": ((200, lines(("ERROR", GONE))), [], cluster.Expired),
    "another ERROR event is a ClusterError": (
        (200, lines(("ERROR", {**GONE, "code": 500, "message": "internal"}))),
        [],
        cluster.ClusterError,
    ),
    "a 403 is Forbidden": ((403, {"kind": "Status", "code": 403, "message": "forbidden"}), [], cluster.Forbidden),
}


@pytest.mark.parametrize("name", CASES)
def test_a_watch_yields_the_events_or_raises_what_the_server_said(name: str, tmp_path: Path) -> None:
    answer, expected, error = CASES[name]
    with ScriptedAPI(lambda request: answer) as api, reader(api, tmp_path) as r:
        seen: list[tuple[str, str]] = []
        if error is None:
            for kind, obj in cluster.watch(r, "Pod", "10", label_selector="qos=latency-sensitive", timeout_seconds=30):
                seen.append((kind, obj["metadata"]["resourceVersion"]))
        else:
            with pytest.raises(error):
                list(cluster.watch(r, "Pod", "10", timeout_seconds=30))
        [request] = api.requests
    assert seen == expected
    assert request.path == "/api/v1/pods"
    query = {k: v[0] for k, v in request.query.items()}
    assert query["watch"] == "true" and query["allowWatchBookmarks"] == "true"
    assert query["resourceVersion"] == "10" and query["timeoutSeconds"] == "30"
    if error is None:
        assert query["labelSelector"] == "qos=latency-sensitive"


class World:
    """A scripted API server for the monitor: lists and watches of nodes and pods; the first
    watch of the selected pods ends with 410 Gone, the next ones with a bookmark."""

    def __init__(self) -> None:
        self.pod_watches = 0
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> tuple[int, Any]:
        query = {k: v[0] for k, v in request.query.items()}
        if request.path.rstrip("/") == "/version":
            return 200, {"major": "1", "minor": "36", "gitVersion": "v1.36.3"}
        if request.path in ("/api/v1/nodes", "/api/v1/pods") and query.get("watch") == "true":
            time.sleep(0.2)  # a watch that ends at once would spin
            selected = "labelSelector" in query
            if selected and request.path == "/api/v1/pods":
                with self.lock:
                    self.pod_watches += 1
                    first = self.pod_watches == 1
                if first:
                    return 200, lines(("ADDED", versioned(pod("shop", "b", {"qos": "latency-sensitive"}), "21")),
                                      ("ERROR", GONE))  # fmt: skip
            return 200, lines(("BOOKMARK", bookmark("30")))
        if request.path == "/api/v1/nodes":
            return 200, {"kind": "NodeList", "metadata": {"resourceVersion": "20"}, "items": [node("fast-1", "high")]}
        if request.path == "/api/v1/pods":
            items = [pod("shop", "a", {"qos": "latency-sensitive"}, "fast-1")] if "labelSelector" in query else []
            return 200, {"kind": "PodList", "metadata": {"resourceVersion": "20"}, "items": items}
        if request.path == "/api/v1/namespaces":
            return 200, {"kind": "NamespaceList", "metadata": {}, "items": []}
        return 404, {"kind": "Status", "code": 404, "message": "not found"}


def test_the_monitor_lists_then_watches_from_the_list_and_lists_again_after_a_410(tmp_path: Path) -> None:
    world = World()
    with ScriptedAPI(world) as api:
        args = monitor.MonitorArgs(kubeconfig=str(api.kubeconfig(tmp_path)), interval=0.05, watch_timeout=30)
        stop = threading.Event()
        connection = cluster.connect(args.kubeconfig, None)
        m = monitor.Monitor(args, connection, None, stop)
        with cluster.Reader(connection) as r:
            m.reframe(r)
        m.start()
        deadline = time.monotonic() + 10
        while m.restarts["pods"] < 1 or world.pod_watches < 2:
            assert time.monotonic() < deadline, f"no relist: {[r.path + str(r.query) for r in api.requests]}"
            time.sleep(0.05)
        stop.set()
        selected = [r for r in api.requests if r.path == "/api/v1/pods" and "labelSelector" in r.query]
    kinds = ["watch" if r.query.get("watch") == ["true"] else "list" for r in selected]
    assert kinds[:4] == ["list", "watch", "list", "watch"], kinds
    assert selected[1].query["resourceVersion"] == ["20"]  # the watch starts where the list was
    assert m.restarts["pods"] >= 1
