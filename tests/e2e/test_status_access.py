"""`netqos-webhook status` on the real control plane, as the README documents it beside the
in-cluster install: the session's webhook is registered out of the cluster (`register --url`), and
a ServiceAccount whose RBAC the real API server enforces reads what it may.

- the `register --url` registration: no problem about an in-cluster Deployment, Service endpoints
  or Secret; the certificate served at the URL verifies against the caBundle;
- with no rights at all, nothing is "MISSING" or "none": it is unknown, and the run exits 1;
- with the right to read pods and nodes but not the registration, the registration is unknown and
  the pods are counted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import cli
from tests.fixtures import REPO

POLICY = str(REPO / "deploy/base/policy.yaml")


def account(cluster, namespace: str, tmp_path: Path, rules: list[dict[str, Any]] | None) -> Path:
    """A ServiceAccount in `namespace` (with a ClusterRole of `rules` bound to it, when given) and a
    kubeconfig with its token."""
    name = "status-reader"
    cluster.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}, namespace)
    if rules is not None:
        role = f"{namespace}-status-reader"
        rbac = "rbac.authorization.k8s.io/v1"
        cluster.create({"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": role}, "rules": rules})
        cluster.create(
            {
                "apiVersion": rbac,
                "kind": "ClusterRoleBinding",
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            }
        )
    code, token = cluster.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}},
    )
    assert code == 201, token
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    kubeconfig = tmp_path / "reader.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": name, "user": {"token": token["status"]["token"]}}],
                "contexts": [{"name": name, "context": {"cluster": admin["clusters"][0]["name"], "user": name}}],
                "current-context": name,
            }
        )
    )
    return kubeconfig


def remove_role(cluster, namespace: str) -> None:
    role = f"{namespace}-status-reader"
    for plural in ("clusterrolebindings", "clusterroles"):
        cluster.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/{plural}/{role}")


def test_status_of_the_register_url_registration_checks_the_url_not_an_in_cluster_deployment(
    cluster, registered, namespace: str
) -> None:
    result = cli(cluster, "status", "--config", POLICY, "-n", namespace, "-o", "json", check=False)
    report = json.loads(result.stdout)
    assert report["problems"] == [], report["problems"]
    assert report["webhook"]["urls"] == [f"https://127.0.0.1:{registered.port}/mutate"]
    assert report["webhook"]["certificate"]["verifies_against_ca_bundle"] is True
    assert (report["webhook"]["deployment"], report["webhook"]["ready_endpoints"]) == (None, None)
    assert result.returncode == 0, result.stderr


def test_status_with_no_rights_says_unknown_never_missing_and_exits_1(
    cluster, registered, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = account(cluster, namespace, tmp_path, None)
    table = cli(cluster, "status", "--kubeconfig", str(kubeconfig), "--config", POLICY, check=False)
    assert table.returncode == 1, table.stdout + table.stderr
    assert "MISSING" not in table.stdout, table.stdout
    assert "INSTALLATION unknown" in table.stdout
    assert "  configuration     unknown (cannot read it)" in table.stdout
    assert "PODS      unknown (cannot read the pods)" in table.stdout
    assert "RESULT nothing could be checked (forbidden by RBAC): exit 1" in table.stdout


def test_status_that_may_read_pods_but_not_the_registration_counts_the_pods_and_says_the_rest_is_unknown(
    cluster, registered, namespace: str, tmp_path: Path
) -> None:
    rules = [{"apiGroups": [""], "resources": ["pods", "nodes", "namespaces"], "verbs": ["list"]}]
    kubeconfig = account(cluster, namespace, tmp_path, rules)
    try:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "waiting", "labels": {"qos": "latency-sensitive"}},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
        }
        cluster.create(pod, namespace)  # no node: it stays Pending
        args = ("status", "--kubeconfig", str(kubeconfig), "--config", POLICY, "-n", namespace)
        report = json.loads(cli(cluster, *args, "-o", "json", check=False).stdout)
        table = cli(cluster, *args, check=False).stdout
    finally:
        remove_role(cluster, namespace)
    assert report["installation"] == "unknown"
    assert report["webhook"]["configuration"] is None
    assert any("MutatingWebhookConfiguration" in u for u in report["unknown"]), report["unknown"]
    assert report["pods"]["selected"] == 1 and report["placement"]["pending"] == 1
    assert "MISSING" not in table.split("PODS")[0], table
