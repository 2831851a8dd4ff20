"""`-n` and `--webhook-namespace` of `status` and `rebalance`: validated alike (the API server's rule
for a namespace name: one line, exit 2, before the cluster is asked), and a namespace that does not
exist is said to not exist, against the fake API server on loopback."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from harness import kubeapi
from harness.kubeapi import Snapshot, node
from tests.fixtures import REPO
from webhook.cli import main
from webhook.commands.rebalance import RebalanceArgs
from webhook.commands.rebalance import run as rebalance
from webhook.commands.status import StatusArgs
from webhook.commands.status import run as status

POLICY = str(REPO / "deploy/base/policy.yaml")


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--webhook-namespace", "Bad_NS"],
        ["status", "-n", "Bad_NS"],
        ["rebalance", "--webhook-namespace", "Bad_NS"],
    ],
    ids=["status --webhook-namespace", "status -n", "rebalance --webhook-namespace"],
)
def test_a_namespace_name_the_api_server_refuses_is_one_line_and_exit_2(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = kubeapi.write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")  # never asked
    assert main([*argv, "--kubeconfig", str(kubeconfig), "--config", POLICY]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"netqos-webhook {argv[0]}: namespace 'Bad_NS' is not a valid namespace name: ")
    assert len(err.splitlines()) == 1


CLUSTER = [kubeapi.namespace("shop"), node("fast-1", "high")]


def test_status_says_a_namespace_that_does_not_exist_does_not(tmp_path: Path) -> None:
    with kubeapi.serve(Snapshot().add_all(CLUSTER), tmp_path) as api:
        out = io.StringIO()
        args = StatusArgs(kubeconfig=str(api.kubeconfig), config=POLICY, namespace="ghost", output="json")
        assert status(args, out) == 3
        report = json.loads(out.getvalue())
        out = io.StringIO()
        args = StatusArgs(kubeconfig=str(api.kubeconfig), config=POLICY, webhook_namespace="ghost", output="json")
        status(args, out)
        elsewhere = json.loads(out.getvalue())
    assert "namespace ghost (-n) does not exist: it has no pods to check (kubectl get namespaces)" in report["problems"]
    assert (
        "netqos-webhook is not installed in namespace ghost, which does not exist (no registration, no Deployment): "
        "no pod gets the preference; install it (kubectl apply -k deploy/base, then netqos-webhook register; or "
        "helm install), or name the namespace it runs in with --webhook-namespace NS"
    ) in elsewhere["problems"]


def test_rebalance_says_a_webhook_namespace_that_does_not_exist_does_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with kubeapi.serve(Snapshot().add_all(CLUSTER), tmp_path) as api:
        args = RebalanceArgs(kubeconfig=str(api.kubeconfig), config=POLICY, webhook_namespace="ghost")
        out = io.StringIO()
        rebalance(args, out)
    assert (
        "note: namespace ghost (--webhook-namespace) does not exist: no webhook runs there; name the namespace it "
        "runs in"
    ) in out.getvalue()
