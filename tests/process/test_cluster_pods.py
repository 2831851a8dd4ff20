"""Live mode's pod listing: every page of the bound, unfinished pods, through a loopback API server."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse

import pytest

from tests.process.test_cluster import kubeconfig
from webhook.cluster import ASSIGNED_NOT_FINISHED, PAGE_SIZE, ClusterError, list_pods


class PagedAPIServer:
    """Answers GET /api/v1/pods page by page, following the continue token; records the queries."""

    def __init__(self, pages: list[list[dict]]) -> None:
        queries: list[dict[str, list[str]]] = []
        self.queries = queries

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # http.server's method name
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query)
                queries.append(query)
                index = int(query.get("continue", ["0"])[0])
                more = {"continue": str(index + 1)} if index + 1 < len(pages) else {}
                body = json.dumps({"kind": "PodList", "metadata": more, "items": pages[index]}).encode()
                self.send_response(200 if url.path == "/api/v1/pods" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def __enter__(self) -> PagedAPIServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def pod(name: str) -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"nodeName": "n1"}}


def test_every_page_is_read_with_the_field_selector_of_bound_unfinished_pods(tmp_path):
    pages = [[pod("a"), pod("b")], [pod("c")], [pod("d")]]
    with PagedAPIServer(pages) as api:
        assert [p["metadata"]["name"] for p in list_pods(kubeconfig(tmp_path, api.url))] == ["a", "b", "c", "d"]
    assert [q.get("continue") for q in api.queries] == [None, ["1"], ["2"]]
    assert all(q["fieldSelector"] == [ASSIGNED_NOT_FINISHED] and q["limit"] == [str(PAGE_SIZE)] for q in api.queries)


def test_an_endless_list_stops_at_the_page_bound(tmp_path, monkeypatch):
    monkeypatch.setattr("webhook.cluster.MAX_POD_PAGES", 3)
    with PagedAPIServer([[pod(str(i))] for i in range(10)]) as api:
        with pytest.raises(ClusterError, match=r"listed more than 1500 pods; explain a smaller cluster"):
            list_pods(kubeconfig(tmp_path, api.url))
    assert len(api.queries) == 3
