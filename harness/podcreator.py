"""Pods created one after another through a real API server while something changes underneath
(a certificate rotation, a rollout, an upgrade): each created pod must carry the webhook's
preference, since with `failurePolicy: Ignore` a failed call lets a pod through unmutated."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.pods import PAUSE, pod
from webhook.names import INJECTED_ANNOTATION

if TYPE_CHECKING:
    from harness.controlplane import Cluster

LATENCY_SENSITIVE = {"qos": "latency-sensitive"}


class PodCreator(threading.Thread):
    """Creates labelled pods `PREFIX-1`, `PREFIX-2`, ... in `namespace`, `interval` seconds apart,
    until stopped, as the API server's clients would; records each created pod and each refusal.
    `node_selector` keeps them Pending on a cluster with nodes: what is measured is admission, not
    the nodes' capacity to run hundreds."""

    def __init__(
        self,
        cluster: Cluster,
        namespace: str,
        interval: float = 0.05,
        prefix: str = "created",
        node_selector: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.cluster, self.namespace, self.interval = cluster, namespace, interval
        self.prefix, self.node_selector = prefix, dict(node_selector) if node_selector else None
        self.stopping = threading.Event()
        self.created: list[dict[str, Any]] = []
        self.errors: list[str] = []

    def run(self) -> None:
        count = 0
        while not self.stopping.is_set():
            count += 1
            body = pod(
                LATENCY_SENSITIVE, name=f"{self.prefix}-{count}", containers=[PAUSE], nodeSelector=self.node_selector
            )
            status, created = self.cluster.request("POST", f"/api/v1/namespaces/{self.namespace}/pods", body)
            if status == 201:
                self.created.append(created)
            else:
                self.errors.append(f"{status}: {created}")
            time.sleep(self.interval)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)

    def unmutated(self) -> list[str]:
        """The created pods the webhook did not mutate (no injected annotation)."""
        return [
            p["metadata"]["name"]
            for p in self.created
            if INJECTED_ANNOTATION not in (p["metadata"].get("annotations") or {})
        ]
