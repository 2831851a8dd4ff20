"""The policy ConfigMap validated at admission, through the real kube-apiserver: `kubectl apply`
of a ConfigMap whose policy does not compile is refused with the message the webhook would log,
a valid one is applied, and with the webhook stopped the API server lets it through
(`failurePolicy: Ignore`). The webhook runs on loopback, registered by URL with the
ValidatingWebhookConfiguration `webhook.policy_review` generates, scoped to the test's namespace.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml

from harness.server import start_server
from tests.fixtures import REPO
from webhook.names import LABELS
from webhook.policy_file import PolicyError, policy_from_bytes
from webhook.policy_review import ENTRY, PATH, validating_configuration

GOOD = (REPO / "deploy/base/policy.yaml").read_text()
TYPO = GOOD.replace("podSelector:", "podSelectr:", 1)
CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


def config_map(name: str, policy: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": dict(LABELS)},
        "data": {"policy.yaml": policy},
    }


def apply(cluster, namespace: str, obj: dict[str, Any]):
    return cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj), check=False)


def _wait_called(cluster, namespace: str, timeout: float = 30) -> None:
    """Until the API server calls the webhook for the policy ConfigMap (it watches
    configurations): a server-side dry run of an invalid one is refused."""
    probe = config_map("netqos-webhook-policy-probe", TYPO)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, _ = cluster.request("POST", f"/api/v1/namespaces/{namespace}/configmaps?dryRun=All", probe)
        if status != 201:
            return
        time.sleep(0.2)
    raise AssertionError(f"the API server did not call {PATH} within {timeout:.0f} s")


def test_a_policy_that_does_not_compile_is_refused_at_apply_and_the_webhook_down_refuses_nothing(
    cluster, namespace: str, tmp_path: Path
) -> None:
    mounted = tmp_path / "config" / "policy.yaml"  # as the Deployment mounts the ConfigMap
    mounted.parent.mkdir()
    mounted.write_text(GOOD)
    with start_server(tmp_path / "webhook", "--config", str(mounted)) as server:
        configuration = validating_configuration(
            namespace, ca_bundle=server.certs.ca_cert.read_bytes(), url=f"https://127.0.0.1:{server.port}{PATH}"
        )
        configuration["metadata"]["name"] = f"policy-{namespace}"
        cluster.create(configuration)
        try:
            _wait_called(cluster, namespace)
            refused = apply(cluster, namespace, config_map("netqos-webhook-policy-typo", TYPO))
            assert refused.returncode != 0, refused.stdout
            try:
                policy_from_bytes(TYPO.encode(), str(mounted))
            except PolicyError as err:
                expected = str(err)
            assert f'admission webhook "{ENTRY}" denied the request: {expected}' in refused.stderr, refused.stderr
            assert cluster.get(f"/api/v1/namespaces/{namespace}/configmaps/netqos-webhook-policy-typo") is None

            applied = apply(cluster, namespace, config_map("netqos-webhook-policy-good", GOOD))
            assert applied.returncode == 0, applied.stderr
            # an update that breaks it is refused too; other ConfigMaps are never sent
            assert apply(cluster, namespace, config_map("netqos-webhook-policy-good", TYPO)).returncode != 0
            other = apply(cluster, namespace, config_map("unrelated", TYPO))
            assert other.returncode == 0, other.stderr
            logged = [r for r in server.log_records() if r.get("config_map", "").startswith(f"{namespace}/")]
            assert {r["allowed"] for r in logged} == {True, False}

            server.stop()
            down = apply(cluster, namespace, config_map("netqos-webhook-policy-typo", TYPO))
            assert down.returncode == 0, down.stderr  # failurePolicy Ignore: the webhook down blocks nothing
        finally:
            cluster.request("DELETE", f"{CONFIGURATIONS}/{configuration['metadata']['name']}")


def test_the_shipped_configuration_is_accepted_by_the_api_server(cluster) -> None:
    shipped = yaml.safe_load(
        (REPO / "deploy/base/webhook-configuration/validatingwebhookconfiguration.yaml").read_text()
    )
    done = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(shipped), check=False)
    assert done.returncode == 0, done.stderr
