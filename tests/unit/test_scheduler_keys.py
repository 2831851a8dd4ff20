"""Pods of one template share their keys as the real API server stores them: it mounts each pod's
service account token from a volume with a random name, which no filter and no usage reads."""

from __future__ import annotations

import copy

from webhook.scheduler.keys import pod_filter_key, usage_key


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
