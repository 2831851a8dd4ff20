"""What reaches the running webhook pods through their mounted volumes, as the kubelet updates
them: a changed policy ConfigMap, a renewed certificate in the Secret; and the experiment of the
NetQoS scheduler plugin with pods that really run where the scheduler put them."""

from __future__ import annotations

import hashlib
import json
import ssl
import time
import urllib.request

from cryptography import x509

from harness.controlplane import NETQOS_SCHEDULER
from tests.e2e.conftest import cli, node_affinity
from tests.e2e.realnodes.conftest import DEPLOYMENT, PodCreator, fail_open, webhook_pods
from tests.fixtures import REPO
from webhook.names import DEFAULT_NAMESPACE

PROPAGATION = 120.0  # the kubelet syncs every 10 s here; the webhook looks at its files every second


def _insecure() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # what is checked is which certificate is served
    return context


def readyz(pod: dict) -> dict:
    """The pod's /readyz, straight to its IP (the host routes the cluster's pod range)."""
    url = f"https://{pod['status']['podIP']}:8443/readyz"
    with urllib.request.urlopen(url, context=_insecure(), timeout=5) as reply:
        answer: dict = json.loads(reply.read())
        return answer


def served_serial(pod: dict) -> int:
    with ssl.create_connection((pod["status"]["podIP"], 8443), timeout=5) as raw:
        with _insecure().wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def until(condition, what: str, timeout: float = PROPAGATION):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except OSError:
            pass
        time.sleep(1)
    raise AssertionError(f"{what} not within {timeout:.0f} s")


def ready_pods(cluster) -> list[dict]:
    return [
        p
        for p in webhook_pods(cluster)
        if not p["metadata"].get("deletionTimestamp")
        and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
    ]


def test_a_changed_policy_configmap_reaches_every_running_pod(real_cluster, installed, real_namespace):
    path = f"/apis/apps/v1/namespaces/{DEFAULT_NAMESPACE}/deployments/{DEPLOYMENT}"
    volumes = real_cluster.get(path)["spec"]["template"]["spec"]["volumes"]
    name = next(v["configMap"]["name"] for v in volumes if "configMap" in v)
    configmap = f"/api/v1/namespaces/{DEFAULT_NAMESPACE}/configmaps/{name}"
    original = real_cluster.get(configmap)["data"]["policy.yaml"]
    classic = (REPO / "deploy/examples/policies/classic.yaml").read_text()
    pods = ready_pods(real_cluster)
    assert len(pods) == 2

    def serving(text: str) -> bool:
        digest = hashlib.sha256(text.encode()).hexdigest()
        return all(readyz(p)["policy"]["sha256"] == digest for p in pods)

    assert serving(original)
    merge = "application/merge-patch+json"
    try:
        assert real_cluster.request("PATCH", configmap, {"data": {"policy.yaml": classic}}, merge)[0] == 200
        until(lambda: serving(classic), "the classic policy in both pods")
        creator = PodCreator(real_cluster, real_namespace)
        creator.start()
        time.sleep(2)
        creator.stop()
        assert creator.created and not creator.unmutated()
        assert all(len(node_affinity(p)) == 2 for p in creator.created), "the classic terms: 90 In, 10 NotIn"
    finally:
        real_cluster.request("PATCH", configmap, {"data": {"policy.yaml": original}}, merge)
        until(lambda: serving(original), "the original policy back in both pods")


def test_a_renewed_certificate_reaches_the_pods_through_the_mounted_secret_without_a_failed_call(
    real_cluster, installed, real_namespace
):
    before = fail_open(real_cluster)
    pods = ready_pods(real_cluster)
    old = {served_serial(p) for p in pods}
    creator = PodCreator(real_cluster, real_namespace, interval=0.2)
    creator.start()
    try:
        # the README's renewal: a new server certificate under the same CA, then register
        cli(real_cluster, "certs", "--out", str(installed), "--renew-before", "400")
        renewed = x509.load_pem_x509_certificate((installed / "tls.crt").read_bytes()).serial_number
        assert renewed not in old
        cli(real_cluster, "register", "--config", str(REPO / "deploy/base/policy.yaml"), "--certs", str(installed))
        until(lambda: all(served_serial(p) == renewed for p in pods), "the renewed certificate in both pods")
    finally:
        creator.stop()
    assert not creator.errors and creator.created and not creator.unmutated()
    assert fail_open(real_cluster) == before


def test_the_experiments_test_pod_runs_on_the_fast_node_and_the_netqos_profile_places_it_there_too(
    real_cluster, installed, real_namespace
):
    pod = (REPO / "deploy/examples/test-pod.yaml").read_text()
    real_cluster.kubectl("apply", "-n", real_namespace, "-f", "-", input=pod)
    unmutated = pod.replace("name: qos-demo-pod", "name: qos-demo-pod-netqos-profile")
    unmutated = unmutated.replace("spec:\n", f"spec:\n  schedulerName: {NETQOS_SCHEDULER}\n", 1)
    real_cluster.kubectl("apply", "-n", real_namespace, "-f", "-", input=unmutated)
    for name in ("qos-demo-pod", "qos-demo-pod-netqos-profile"):
        until(lambda n=name: real_cluster.pod(real_namespace, n)["status"].get("phase") == "Running", f"{name} running")
        running = real_cluster.pod(real_namespace, name)
        assert running["spec"]["nodeName"] == "fast-1"
        assert running["status"]["hostIP"] == running["status"]["hostIPs"][0]["ip"]
        assert all(c["ready"] for c in running["status"]["containerStatuses"]), "its container started"
    assert node_affinity(real_cluster.pod(real_namespace, "qos-demo-pod"))
