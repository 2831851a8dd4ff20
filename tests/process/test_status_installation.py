"""`netqos-webhook status` where nothing of the webhook is installed (after `helm uninstall`, or
`kubectl delete -k deploy/base`), against the fake API server (harness/kubeapi.py): one line says
so, not a certificate checked against a caBundle that is gone nor a Deployment "that could not be
read", and the exit code is 3, a problem found (docs/commands.md, Exit codes)."""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness import kubeapi
from harness.kubeapi import Snapshot, issue_tls, namespace, node, pod
from tests.fixtures import NETQOS_TERMS
from webhook.cli import main
from webhook.commands.status import StatusArgs, run
from webhook.errors import EXIT_FOUND

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
NS = "netqos-system"
QOS = {"qos": "latency-sensitive", "app": "web"}
ADVICE = (
    "(no registration, no Deployment): no pod gets the preference; install it (kubectl apply -k deploy/base, then "
    "netqos-webhook register; or helm install), or name the namespace it runs in with --webhook-namespace NS"
)
NOT_INSTALLED = f"netqos-webhook is not installed in namespace {NS} {ADVICE}"
# After `kubectl delete -k deploy/base` the namespace is gone too, and status says so.
NOT_INSTALLED_NO_NAMESPACE = f"netqos-webhook is not installed in namespace {NS}, which does not exist {ADVICE}"


def _world() -> list[dict[str, Any]]:
    """Nodes and a pod created while the webhook was installed: what outlives an uninstall."""
    return [
        namespace("default"),
        namespace("shop"),
        node("fast-1", "high"),
        node("slow-1", "low"),
        pod("shop", "web-a", QOS, "fast-1", preferred=NETQOS_TERMS),
    ]


def helm_uninstalled() -> list[dict[str, Any]]:
    """`helm uninstall`: the release's objects are gone, its namespace stays."""
    return [*_world(), namespace(NS)]


def kustomize_deleted() -> list[dict[str, Any]]:
    """`kubectl delete -k deploy/base`: the namespace went with everything in it."""
    return _world()


def secret_left_behind() -> list[dict[str, Any]]:
    """The TLS Secret `register` made outlives the release: its certificate is not judged."""
    tls = issue_tls(["netqos-webhook.netqos-system.svc"], "2025-01-01", "2034-01-01")
    leftover = kubeapi.installation(None, _deployment(), "", tls, NS)
    return [*helm_uninstalled(), *(o for o in leftover if o["kind"] == "Secret")]


def _deployment() -> dict[str, Any]:
    import yaml

    from tests.fixtures import REPO

    return yaml.safe_load((REPO / "deploy/base/deployment.yaml").read_text())


@pytest.mark.parametrize(
    ("world", "problem"),
    [
        (helm_uninstalled, NOT_INSTALLED),
        (kustomize_deleted, NOT_INSTALLED_NO_NAMESPACE),
        (secret_left_behind, NOT_INSTALLED),
    ],
)
def test_status_says_the_webhook_is_not_installed_and_nothing_about_its_certificate(
    world: Callable[[], list[dict[str, Any]]], problem: str, tmp_path: Path
) -> None:
    with kubeapi.serve(Snapshot().add_all(world()), tmp_path) as api:
        out = io.StringIO()
        code = run(StatusArgs(kubeconfig=str(api.kubeconfig), output="json"), out, now=NOW)
        table = io.StringIO()
        run(StatusArgs(kubeconfig=str(api.kubeconfig)), table, now=NOW)
    report = json.loads(out.getvalue())
    assert code == EXIT_FOUND
    assert report["installation"] == "none"
    assert report["problems"] == [problem]
    assert report["webhook"]["certificate"] is None and report["webhook"]["deployment"] is None
    assert report["policy"]["source"] == f"the built-in default policy (no Deployment netqos-webhook in namespace {NS})"
    lines = table.getvalue().splitlines()
    assert lines[:3] == ["INSTALLATION none", "WEBHOOK", "  not installed     no registration, no Deployment"]
    assert not [line for line in lines if "caBundle" in line or "ready endpoints" in line or "could not" in line]
    assert f"  - {problem}" in lines


def test_the_command_line_exits_3_when_the_webhook_is_not_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with kubeapi.serve(Snapshot().add_all(helm_uninstalled()), tmp_path) as api:
        assert main(["status", "--kubeconfig", str(api.kubeconfig)]) == 3
    assert "not installed in namespace netqos-system" in capsys.readouterr().out
