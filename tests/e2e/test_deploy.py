"""The deploy manifests, accepted by the real API server: `kubectl apply --server-side
--dry-run=server` of deploy/base and of each overlay runs every object through the API server's
decoding, defaulting, validation and admission without storing it. Kinds whose API the cluster
does not serve (the CRDs of cert-manager and the Prometheus operator) are left out, and listed."""

from __future__ import annotations

import shutil

import pytest
import yaml

from tests.e2e.conftest import WEBHOOK_CONFIGURATION, assert_accepted_by_server_dry_run, cli, register, served
from tests.fixtures import REPO
from webhook.names import DEFAULT_NAMESPACE

WITH_COMPONENT = """apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../base
components:
- ../overlays/{name}
"""


def targets() -> list[str]:
    """deploy/base and every overlay; a kustomize Component is rendered on top of the base."""
    found = ["base"]
    for overlay in sorted((REPO / "deploy/overlays").iterdir()):
        kustomization = overlay / "kustomization.yaml"
        if kustomization.exists():
            kind = yaml.safe_load(kustomization.read_text()).get("kind", "Kustomization")
            found.append(f"with-{overlay.name}" if kind == "Component" else f"overlays/{overlay.name}")
    return found


@pytest.fixture(scope="module")
def tree(cluster, webhook, tmp_path_factory):
    """A copy of deploy/ with what the overlays need: the dev overlay's certificate, and a
    kustomization that adds each component to the base. The webhook's namespace
    exists (a dry run does not create it, and namespaced objects need it). No webhook
    configuration does, as on a cluster the base is first applied to (the session's, registered
    with a URL, is put back afterwards)."""
    root = tmp_path_factory.mktemp("deploy") / "deploy"
    # without certificates a working tree may hold (scripts/demo.sh writes the dev overlay's)
    shutil.copytree(REPO / "deploy", root, ignore=shutil.ignore_patterns("certs"))
    cli(cluster, "certs", "--out", str(root / "overlays/dev/certs"), "--host", "host.minikube.internal")
    for target in targets():
        if target.startswith("with-"):
            (root / target).mkdir()
            (root / target / "kustomization.yaml").write_text(WITH_COMPONENT.format(name=target.removeprefix("with-")))
    cluster.create_namespace(DEFAULT_NAMESPACE)
    cluster.request("DELETE", WEBHOOK_CONFIGURATION)
    yield root
    cluster.delete_namespace(DEFAULT_NAMESPACE)
    register(cluster, webhook)


@pytest.mark.parametrize("target", targets())
def test_every_object_is_accepted_by_a_server_side_dry_run(cluster, tree, target):
    rendered = [d for d in yaml.safe_load_all(cluster.kubectl("kustomize", str(tree / target)).stdout) if d]
    kept = [d for d in rendered if served(cluster, d)]
    left_out = sorted({f"{d['apiVersion']}/{d['kind']}" for d in rendered if d not in kept})
    assert kept, f"{target} renders no object the cluster serves"
    # only kinds of API groups this cluster does not serve at all (their CRDs are not installed)
    assert all(cluster.get(f"/apis/{kind.split('/')[0]}") is None for kind in left_out), left_out
    assert_accepted_by_server_dry_run(cluster, kept)
