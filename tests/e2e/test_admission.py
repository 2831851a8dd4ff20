"""What users see of the webhook through the real API server and kubectl: a server-side dry run
shows the mutated pod, the webhook's warnings are printed by kubectl, the opt-out annotation is
honoured, and an UPDATE is never mutated. Every expectation is what `netqos-webhook review` says
of the same manifest, so these tests hold whatever the policy's terms are."""

from __future__ import annotations

import json

import yaml

from tests.e2e.conftest import cli, manifest, node_affinity, register
from webhook.names import INJECTED_ANNOTATION, OPT_OUT_ANNOTATION

EXPLICIT_NET = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["medium"]}]}}
        ]
    }
}


def pod_file(tmp_path, name="qos-demo-pod", **changes):
    pod = manifest("deploy/examples/test-pod.yaml")
    pod["metadata"]["name"] = name
    for key, value in changes.items():
        if key == "annotations":
            pod["metadata"]["annotations"] = value
        else:
            pod["spec"][key] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(pod))
    return path


def review(cluster, path) -> dict:
    """`netqos-webhook review -o json` of one manifest: decision, rules, warnings, patch."""
    records = json.loads(cli(cluster, "review", str(path), "-o", "json").stdout)
    return records[0] if isinstance(records, list) else records


def reviewed_pod(cluster, path) -> dict:
    return yaml.safe_load(cli(cluster, "review", str(path), "-o", "pod").stdout)


def test_a_server_side_dry_run_shows_the_mutated_pod_and_stores_nothing(cluster, registered, namespace, tmp_path):
    path = pod_file(tmp_path)
    shown = yaml.safe_load(
        cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(path), "-o", "yaml").stdout
    )
    want = reviewed_pod(cluster, path)
    assert node_affinity(want)
    assert node_affinity(shown) == node_affinity(want)
    assert shown["metadata"]["annotations"][INJECTED_ANNOTATION] == want["metadata"]["annotations"][INJECTED_ANNOTATION]
    assert cluster.pod(namespace, "qos-demo-pod") is None


def test_a_pod_with_its_own_net_affinity_keeps_it_and_kubectl_prints_the_webhooks_warning(
    cluster, registered, namespace, tmp_path
):
    path = pod_file(tmp_path, affinity=EXPLICIT_NET)
    expected = review(cluster, path)
    assert expected["warnings"], "review warns about a pod that chose its own net preference"
    applied = cluster.kubectl("apply", "-n", namespace, "-f", str(path))
    for warning in expected["warnings"]:
        assert f"Warning: {warning}" in applied.stderr, applied.stderr
    stored = cluster.pod(namespace, "qos-demo-pod")
    assert node_affinity(stored) == node_affinity(reviewed_pod(cluster, path))
    assert (
        node_affinity(stored)[0] == EXPLICIT_NET["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    )


def test_a_pod_that_opts_out_is_stored_as_written(cluster, registered, namespace, tmp_path):
    path = pod_file(tmp_path, annotations={OPT_OUT_ANNOTATION: "false"})
    assert review(cluster, path)["decision"] == "skipped_opt_out"
    cluster.kubectl("apply", "-n", namespace, "-f", str(path))
    stored = cluster.pod(namespace, "qos-demo-pod")
    assert node_affinity(stored) == []
    assert INJECTED_ANNOTATION not in stored["metadata"].get("annotations", {})


def test_an_update_of_a_selected_pod_is_not_mutated(cluster, unregistered, webhook, namespace, tmp_path):
    # Created while no webhook was registered, so it has no terms; then the webhook is registered
    # and the pod updated (an annotation and a label, as kubectl does it): it must stay without them.
    path = pod_file(tmp_path)
    cluster.kubectl("apply", "-n", namespace, "-f", str(path))
    register(cluster, webhook)
    cluster.kubectl("annotate", "-n", namespace, "pod/qos-demo-pod", "example.com/touched=yes")
    cluster.kubectl("label", "-n", namespace, "pod/qos-demo-pod", "tier=frontend")
    stored = cluster.pod(namespace, "qos-demo-pod")
    assert stored["metadata"]["annotations"]["example.com/touched"] == "yes"
    assert node_affinity(stored) == []
    assert INJECTED_ANNOTATION not in stored["metadata"]["annotations"]
