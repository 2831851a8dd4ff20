"""Pods of one template share their keys as the real API server stores them: it mounts each pod's
service account token from a volume with a random name, which no filter and no usage reads."""

from __future__ import annotations

import copy

import pytest

from webhook.scheduler import read
from webhook.scheduler.keys import UsageFold, pod_filter_key, usage_key
from webhook.scheduler.model import UsageTally, usage_by_node, usage_of
from webhook.scheduler.read import pod_info


def stored(token_volume: str, cpu: str = "100m") -> dict:
    mount = {"name": token_volume, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}
    container = {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": cpu}}, "volumeMounts": [mount]}
    return {
        "metadata": {"name": f"web-{token_volume}"},
        "spec": {"containers": [container], "volumes": [{"name": token_volume, "projected": {"sources": []}}]},
    }


def test_two_pods_of_one_template_share_their_filter_and_usage_keys_whatever_their_token_volume_is_called():
    a, b = stored("kube-api-access-x7k2p"), stored("kube-api-access-9qz4m")
    assert pod_filter_key(a) == pod_filter_key(b)
    assert usage_key(a["spec"]) == usage_key(b["spec"])


def test_a_different_request_still_makes_a_different_filter_key():
    a, b = stored("kube-api-access-x7k2p"), stored("kube-api-access-x7k2p", cpu="2")
    assert pod_filter_key(a) != pod_filter_key(b)


def test_any_other_container_field_still_counts_in_the_filter_key():
    a = stored("kube-api-access-x7k2p")
    b = copy.deepcopy(a)
    b["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    assert pod_filter_key(a) != pod_filter_key(b)


def on_host_network(pod: dict, **spec) -> dict:
    changed = copy.deepcopy(pod)
    changed["spec"] |= {"hostNetwork": True, **spec}
    return changed


def with_bind_mount_options(pod: dict) -> dict:
    changed = copy.deepcopy(pod)
    changed["spec"]["containers"][0]["volumeMounts"][0]["bindMountOptions"] = {"propagation": "Private"}
    return changed


TOKEN = stored("kube-api-access-x7k2p")


@pytest.mark.parametrize(
    ("plain", "needs_a_feature"),
    [
        (on_host_network(TOKEN), on_host_network(TOKEN, hostUsers=False)),  # UserNamespacesHostNetworkSupport
        (TOKEN, with_bind_mount_options(TOKEN)),  # VolumeBindMountOptions
    ],
    ids=["hostUsers false", "bindMountOptions"],
)
def test_a_pod_that_needs_a_node_feature_declared_gets_another_filter_key(plain, needs_a_feature):
    # NodeDeclaredFeatures reads hostUsers and a mount's bindMountOptions, fields no other filter reads
    assert pod_filter_key(plain) != pod_filter_key(needs_a_feature)


def bound(name: str, node: str, cpu: str = "100m", image: str = "app:1", **meta) -> dict:
    container = {"name": "app", "image": image, "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
    return {
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web"}, **meta},
        "spec": {"nodeName": node, "containers": [container]},
        "status": {"phase": "Running"},
    }


def test_the_folded_usage_is_the_usage_of_every_pods_full_scheduling_view():
    pods = [bound(f"web-{i}", f"n{i % 3}", image=f"app:{i}") for i in range(9)]
    pods += [bound("big", "n1", cpu="2"), bound("other-ns", "n2", namespace="batch")]
    finished, unbound = bound("done", "n0"), bound("pending", "")
    finished["status"]["phase"] = "Succeeded"
    fold = UsageFold()
    for p in [*pods, finished, unbound]:
        fold.add(p)
    assert fold.usage() == usage_by_node(pod_info(p) for p in pods)


def test_only_the_given_nodes_count_and_the_pod_left_out_is_not_counted():
    fold = UsageFold(["n1", "n3"], leave_out=("shop", "me"))
    for p in (bound("a", "n1"), bound("b", "n2"), bound("me", "n1")):
        fold.add(p)
    assert fold.usage() == {"n1": usage_of([pod_info(bound("a", "n1"))]), "n3": usage_of(())}


def test_the_pods_of_one_template_are_read_once(monkeypatch):
    reads = []
    real = read.usage_info
    monkeypatch.setattr(read, "usage_info", lambda pod: reads.append(pod["metadata"]["name"]) or real(pod))
    fold = UsageFold()
    for i in range(1000):
        fold.add(bound(f"web-{i}", f"n{i % 50}", image=f"app:{i % 7}"))
    fold.add(bound("big", "n1", cpu="2"))
    assert reads == ["web-0", "big"]
    assert sum(u.pods for u in fold.usage().values()) == 1001


def statefulset_pod(i: int, node: str) -> dict:
    """A StatefulSet's pod as the API server stores it: labels of its own (pod name and index)
    beside the template's, and the template's anti-affinity."""
    labels = {
        "app": "db",
        "controller-revision-hash": "db-5d8f7c",
        "statefulset.kubernetes.io/pod-name": f"db-{i}",
        "apps.kubernetes.io/pod-index": str(i),
    }
    pod = bound(f"db-{i}", node, cpu="250m", labels=labels)
    term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]
        }
    }
    return pod


def test_the_pods_of_one_statefulset_read_their_resources_once_whatever_labels_of_their_own_they_carry(monkeypatch):
    readings = []
    real = read.pod_resources
    monkeypatch.setattr(read, "pod_resources", lambda pod: readings.append(pod["metadata"]["name"]) or real(pod))
    pods = [statefulset_pod(i, f"n{i % 7}") for i in range(300)]
    pods += [bound(f"web-{i}", f"n{i % 7}") for i in range(300)]  # a Deployment's: one template, labels alike
    pods += [bound("big", "n1", cpu="2"), statefulset_pod(300, "n2") | {"status": {"phase": "Running"}}]
    terminating = statefulset_pod(301, "n3")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    pods.append(terminating)
    fold = UsageFold()
    for p in pods:
        fold.add(p)
    assert readings == ["db-0", "web-0", "big", "db-301"], "each template's resources are read once"
    monkeypatch.undo()
    each: dict[str, UsageTally] = {}
    for p in pods:  # every pod read whole, as other pods see it
        each.setdefault(p["spec"]["nodeName"], UsageTally()).add(read.usage_info(p))
    assert fold.usage() == {node: tally.usage() for node, tally in each.items()}
