"""`status` with an invalid policy in the webhook's ConfigMap, on the real control plane: the
running webhook keeps its last good policy, and `status` reads it from the webhook's pod
(GET /policy through the API server's pod proxy, as `kubectl get --raw` would) and judges by it,
instead of reporting the built-in default as in force and advising to re-register for it.

No kubelet runs here: the webhook's Deployment makes its pod, whose status is written as a kubelet
would, with this machine's address as its IP; a real `netqos-webhook serve` listens there on the
pod's container port, so the API server's pod proxy reaches it.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import server as harness_server
from harness.server import free_port, start_server
from tests.e2e.conftest import cli
from tests.e2e.test_status import node
from tests.fixtures import REPO
from webhook.policy_file import PolicyError, policy_from_bytes

SERVED = (REPO / "deploy/examples/policies/classic.yaml").read_text().replace("- name: netqos", "- name: fastlane", 1)
INVALID = "apiVersion: netqos.io/v1alpha1\nkind: NetQoSPolicy\nrules: []\n"


def machine_address() -> str:
    """This machine's global unicast IPv4 address: the API server proxies to no loopback address
    (pkg/registry/core/pod/strategy.go, ResourceLocation: `ip.IsGlobalUnicast()`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("203.0.113.1", 9))  # a UDP "connect" sends nothing: it picks the route's address
        except OSError:
            pytest.skip("no non-loopback IPv4 address to serve a pod's address from")
        address: str = probe.getsockname()[0]
    if address.startswith("127."):
        pytest.skip("no non-loopback IPv4 address to serve a pod's address from")
    return address


def installed(namespace: str, port: int) -> list[dict[str, Any]]:
    """deploy/base's Deployment, ServiceAccount and Service in `namespace`, the Deployment's
    container port the server's, and the ConfigMap it mounts holding an invalid policy."""
    deployment = yaml.safe_load((REPO / "deploy/base/deployment.yaml").read_text())
    deployment["metadata"]["namespace"] = namespace
    deployment["spec"]["replicas"] = 1
    pod = deployment["spec"]["template"]["spec"]
    pod["containers"][0]["ports"][0]["containerPort"] = port
    config = next(v for v in pod["volumes"] if v.get("configMap"))
    config["configMap"]["name"] = "netqos-webhook-policy-broken"
    service, account = (
        yaml.safe_load((REPO / f"deploy/base/{f}.yaml").read_text()) for f in ("service", "serviceaccount")
    )
    service["metadata"]["namespace"] = account["metadata"]["namespace"] = namespace
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "netqos-webhook-policy-broken", "namespace": namespace},
        "data": {"policy.yaml": INVALID},
    }
    return [config_map, account, service, deployment]


def running_at(cluster, namespace: str, address: str, timeout: float = 30) -> None:
    """The Deployment's pod, once made and bound (the EndpointSlice controller skips a pod whose
    Node it cannot find), written Running and Ready at `address`; then until the Service's
    EndpointSlice lists it ready."""
    deadline = time.monotonic() + timeout
    pods: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not (pods and pods[0]["spec"].get("nodeName")):
        pods = cluster.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
        time.sleep(0.2)
    assert pods and pods[0]["spec"].get("nodeName"), f"the Deployment made no bound pod: {pods}"
    (pod,) = pods
    cluster.write_pod_status(pod)
    path = f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}/status"
    patch = {"status": {"podIP": address, "podIPs": [{"ip": address}]}}
    code, body = cluster.request("PATCH", path, patch, "application/merge-patch+json")
    assert code == 200, body
    while time.monotonic() < deadline:
        slices = cluster.get(f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices")["items"]
        if any(
            e.get("conditions", {}).get("ready") and address in e["addresses"]
            for s in slices
            for e in s.get("endpoints") or ()
        ):
            return
        time.sleep(0.2)
    raise AssertionError(f"the Service lists no ready endpoint at {address} within {timeout:.0f} s")


def test_status_reads_the_policy_the_running_pods_keep_when_the_configmap_is_invalid(
    cluster, namespace: str, nodes: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = machine_address()
    cluster.create(node("webhook-node", None))
    port = free_port()
    monkeypatch.setattr(harness_server, "free_port", lambda: port)  # so the server binds every address on it
    served = tmp_path / "policy.yaml"
    served.write_text(SERVED)  # the last good policy the running pod loaded
    with start_server(tmp_path / "webhook", "--config", str(served), "--bind", f"0.0.0.0:{port}", workers=1):
        for obj in installed(namespace, port):
            cluster.create(obj, namespace)
        running_at(cluster, namespace, address)
        done = cli(cluster, "status", "--webhook-namespace", namespace, "-n", namespace, "-o", "json", check=False)
        table = cli(cluster, "status", "--webhook-namespace", namespace, "-n", namespace, check=False)
    report = json.loads(done.stdout)
    version = hashlib.sha256(SERVED.encode()).hexdigest()[:12]
    try:
        policy_from_bytes(INVALID.encode(), f"ConfigMap {namespace}/netqos-webhook-policy-broken key policy.yaml")
    except PolicyError as err:
        error = str(err)
    assert report["policy"] == {
        "source": f"the policy the webhook's pods serve (version {version}, from {served})",
        "rules": ["fastlane"],
    }
    assert f"the ConfigMap is invalid: {error}; the running pods keep policy {version}" in report["problems"]
    assert not [p for p in report["problems"] if "built-in default" in p], report["problems"]
    assert f"the running pods keep policy {version}" in table.stdout
