"""Live mode's pod listing: every page of the bound, unfinished pods, through a loopback API server."""

from __future__ import annotations

import pytest

from harness.kubeapi import Request, ScriptedAPI
from harness.pods import pod
from tests.process.test_cluster import kubeconfig
from webhook import cluster
from webhook.cluster import ASSIGNED_NOT_FINISHED, PAGE_SIZE, ClusterError
from webhook.commands import clusterread
from webhook.commands.explain import TOO_MANY_PODS
from webhook.commands.flags import ClusterArgs


def fold_pods(kubeconfig: str, new):
    """Every bound, unfinished pod folded into `new()`, as explain reads them (one reader)."""
    with clusterread.reader(ClusterArgs(kubeconfig), max_pages=cluster.MAX_POD_PAGES) as reader:
        return clusterread.fold_bound_pods(reader, new, TOO_MANY_PODS)


class Collected:
    def __init__(self) -> None:
        self.items: list[dict] = []

    def add(self, index: int, pod: dict) -> None:
        self.items.append(pod)


def list_pods(kubeconfig: str) -> list[dict]:
    return fold_pods(kubeconfig, Collected).items


def node_pod(name: str) -> dict:
    return pod(name=name, namespace="default", nodeName="n1")


def paging_api(pages: list[list[dict]]) -> ScriptedAPI:
    """A loopback API server that answers GET /api/v1/pods page by page, following the continue token."""

    def answer(request: Request) -> tuple[int, dict]:
        index = int(request.query.get("continue", ["0"])[0])
        more = {"continue": str(index + 1)} if index + 1 < len(pages) else {}
        return (200 if request.path == "/api/v1/pods" else 404), {
            "kind": "PodList",
            "metadata": more,
            "items": pages[index],
        }

    return ScriptedAPI(answer)


def test_every_page_is_read_with_the_field_selector_of_bound_unfinished_pods(tmp_path):
    pages = [[node_pod("a"), node_pod("b")], [node_pod("c")], [node_pod("d")]]
    with paging_api(pages) as api:
        assert [p["metadata"]["name"] for p in list_pods(kubeconfig(tmp_path, api.url))] == ["a", "b", "c", "d"]
    assert [r.query.get("continue") for r in api.requests] == [None, ["1"], ["2"]]
    assert all(
        q["fieldSelector"] == [ASSIGNED_NOT_FINISHED] and q["limit"] == [str(PAGE_SIZE)]
        for q in (r.query for r in api.requests)
    )


def test_an_endless_list_stops_at_the_page_bound(tmp_path, monkeypatch):
    monkeypatch.setattr("webhook.cluster.MAX_POD_PAGES", 3)
    with paging_api([[node_pod(str(i))] for i in range(10)]) as api:
        with pytest.raises(ClusterError, match=r"listed more than 1500 pods; explain a smaller cluster"):
            list_pods(kubeconfig(tmp_path, api.url))
    assert len(api.requests) == 3


EXPIRED = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": "The provided continue parameter is too old to display a consistent list result. You can start a "
    "new list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results.",
    "reason": "Expired",
    "code": 410,
}


def expiring_api(snapshots: list[list[list[dict]]], expiries: int) -> ScriptedAPI:
    """Pages of `snapshots[k]` (token `k:page`) as the API server serves a consistent list; the
    first `expiries` continued requests answer 410 Expired (etcd compacted past the snapshot), and
    each expiry moves the next fresh list to the next snapshot, as a compaction does."""
    state = {"snapshot": 0, "expiries": expiries}

    def answer(request: Request) -> tuple[int, dict]:
        token = request.query.get("continue", [None])[0]
        if token is None:
            snapshot, index = state["snapshot"], 0
        elif state["expiries"]:
            state["expiries"] -= 1
            state["snapshot"] += 1
            return 410, EXPIRED
        else:
            snapshot, index = (int(part) for part in token.split(":"))
        pages = snapshots[snapshot]
        more = {"continue": f"{snapshot}:{index + 1}"} if index + 1 < len(pages) else {}
        return 200, {"kind": "PodList", "metadata": more, "items": pages[index]}

    return ScriptedAPI(answer)


def names(pods: list[dict]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_a_list_that_expires_between_pages_is_read_again_from_the_first_page_without_the_old_pages(tmp_path):
    before = [[node_pod("a"), node_pod("b")], [node_pod("c")]]
    after = [[node_pod("a"), node_pod("x")], [node_pod("y")], [node_pod("z")]]  # b and c deleted meanwhile
    with expiring_api([before, after], expiries=1) as api:
        assert names(list_pods(kubeconfig(tmp_path, api.url))) == ["a", "x", "y", "z"]
    assert [r.query.get("continue") for r in api.requests] == [None, ["0:1"], None, ["1:1"], ["1:2"]]


def test_a_list_that_expires_again_after_its_restart_is_one_line_saying_so(tmp_path):
    pages = [[node_pod("a")], [node_pod("b")]]
    with expiring_api([pages, pages, pages], expiries=2) as api:
        with pytest.raises(ClusterError) as raised:
            list_pods(kubeconfig(tmp_path, api.url))
    assert str(raised.value).startswith(f"the API server at {api.url} (kubeconfig ")
    assert "refused to list pods: HTTP 410" in str(raised.value)
    assert str(raised.value).endswith(
        "it expired again after one restart: etcd is compacted faster than the list "
        "can be read, try again when the cluster is less busy"
    )
    assert len(api.requests) == 4  # two first pages, two expired continues: no third try


class Names:
    """A fold that keeps the pods' names."""

    started = 0

    def __init__(self) -> None:
        Names.started += 1
        self.names: list[str] = []

    def add(self, index: int, pod: dict) -> None:
        assert index == len(self.names)
        self.names.append(pod["metadata"]["name"])


def test_a_fold_whose_list_expires_starts_again_empty_so_nothing_is_counted_twice(tmp_path):
    before = [[node_pod("a"), node_pod("b")], [node_pod("c")]]
    after = [[node_pod("a"), node_pod("x")], [node_pod("y")]]
    Names.started = 0
    with expiring_api([before, after], expiries=1) as api:
        assert fold_pods(kubeconfig(tmp_path, api.url), Names).names == ["a", "x", "y"]
    assert Names.started == 2
