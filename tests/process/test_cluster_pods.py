"""Live mode's pod listing: every page of the bound, unfinished pods, through a loopback API server."""

from __future__ import annotations

import pytest

from tests.process.test_cluster import kubeconfig
from webhook.cluster import ASSIGNED_NOT_FINISHED, PAGE_SIZE, ClusterError, list_pods
from webhook.testing.kubeapi import Request, ScriptedAPI
from webhook.testing.pods import pod


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
