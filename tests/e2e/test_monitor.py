"""`netqos-webhook monitor` on the real control plane: after churn (pods created and deleted, a
fast node relabelled slow, pods created while the webhook is down), its gauges equal what
`status -A -o json` reports of the same world within a few seconds; SIGTERM stops it at once."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import monitorview
from harness.server import start_server
from tests.e2e.conftest import cli, register
from tests.e2e.test_status import LABELS, node
from tests.fixtures import REPO


def pod(name: str, cpu: str = "100m") -> dict[str, Any]:
    container = {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": LABELS},
        "spec": {"containers": [container]},
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def monitor(cluster, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    log = (tmp_path / "monitor.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "webhook",
            "monitor",
            "--metrics-bind",
            f"127.0.0.1:{port}",
            "--interval",
            "0.2",
            "--refresh",
            "5",
            "--watch-timeout",
            "10",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
        env={**os.environ, **cluster.env()},
        cwd=REPO,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    yield process, url
    if process.poll() is None:
        process.kill()
        process.wait()
    log.close()


def assert_agree(cluster, url: str, timeout: float = 20) -> dict[str, Any]:
    """The monitor's gauges equal status's report, within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        expected = monitorview.status_says(json.loads(cli(cluster, "status", "-A", "-o", "json", check=False).stdout))
        try:
            got = monitorview.gauges_say(monitorview.scrape(url))
        except OSError:
            got = None
        if got == expected or time.monotonic() > deadline:
            assert got == expected
            return got
        time.sleep(0.5)


def test_the_monitor_agrees_with_status_after_churn_and_stops_on_sigterm(
    cluster, registered, namespace, nodes, monitor, tmp_path
):
    process, url = monitor
    for name, net in (("fast-1", "high"), ("fast-2", "high"), ("slow-1", "low"), ("plain-1", None)):
        cluster.create(node(name, net))
    with start_server(tmp_path / "webhook") as server:
        register(cluster, server)
        for i in range(6):
            cluster.create(pod(f"api-{i}"), namespace)
        for i in range(6):
            cluster.wait_bound(namespace, f"api-{i}")
        first = assert_agree(cluster, url)
        assert first["states"]["injected"] >= 6
        for i in range(2):
            cluster.request(
                "DELETE", f"/api/v1/namespaces/{namespace}/pods/{i and 'api-1' or 'api-0'}?gracePeriodSeconds=0"
            )
    # the webhook is down but registered: pods are admitted without the preference (fail open)
    for i in range(3):
        cluster.create(pod(f"late-{i}"), namespace)
    for i in range(3):
        cluster.wait_bound(namespace, f"late-{i}")
    status, _ = cluster.request(
        "PATCH", "/api/v1/nodes/fast-1", {"metadata": {"labels": {"net": "low"}}}, "application/merge-patch+json"
    )
    assert status == 200
    after = assert_agree(cluster, url)
    assert after["missing"].get(namespace) == 3, after
    assert after["classes"].get("slow", 0) >= 1, after

    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=5) == 0
    assert time.monotonic() - started < 1.5
