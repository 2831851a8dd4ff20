"""Where the webhook's Deployment serves its policy from, as the kubelet mounts it: `status` judges
by that ConfigMap key, or says why it cannot read the file."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.status import PolicyLocation, policy_location

CONFIG_MAP = {"name": "config", "configMap": {"name": "netqos-policy"}}


def deployment(args: list[str], mounts: list[dict[str, Any]], volumes: list[dict[str, Any]]) -> dict[str, Any]:
    container = {"name": "webhook", "command": ["netqos-webhook", "serve"], "args": args, "volumeMounts": mounts}
    return {"spec": {"template": {"spec": {"containers": [container], "volumes": volumes}}}}


@pytest.mark.parametrize(
    "args, mounts, volumes, expected",
    [
        # deploy/base: the ConfigMap as a directory
        (
            ["--config=/config/policy.yaml"],
            [{"name": "config", "mountPath": "/config"}],
            [CONFIG_MAP],
            PolicyLocation("/config/policy.yaml", "netqos-policy", "policy.yaml"),
        ),
        # one key mounted as one file: the kubelet puts the volume's subPath at the mountPath
        (
            ["--config", "/etc/netqos/policy.yaml"],
            [{"name": "config", "mountPath": "/etc/netqos/policy.yaml", "subPath": "policy.yaml"}],
            [CONFIG_MAP],
            PolicyLocation("/etc/netqos/policy.yaml", "netqos-policy", "policy.yaml"),
        ),
        # the same, through an item that maps the key to another path
        (
            ["--config=/etc/netqos/policy.yaml"],
            [{"name": "config", "mountPath": "/etc/netqos/policy.yaml", "subPath": "netqos.yaml"}],
            [{"name": "config", "configMap": {"name": "cm", "items": [{"key": "rules", "path": "netqos.yaml"}]}}],
            PolicyLocation("/etc/netqos/policy.yaml", "cm", "rules"),
        ),
        # a directory of the volume mounted with subPath, the file beneath it
        (
            ["--config=/etc/netqos/policy.yaml"],
            [{"name": "config", "mountPath": "/etc/netqos", "subPath": "conf"}],
            [{"name": "config", "configMap": {"name": "cm", "items": [{"key": "policy", "path": "conf/policy.yaml"}]}}],
            PolicyLocation("/etc/netqos/policy.yaml", "cm", "policy"),
        ),
        # the deepest mount wins, as mounts stack
        (
            ["--config=/etc/netqos/policy.yaml"],
            [{"name": "etc", "mountPath": "/etc"}, {"name": "config", "mountPath": "/etc/netqos/"}],
            [{"name": "etc", "emptyDir": {}}, CONFIG_MAP],
            PolicyLocation("/etc/netqos/policy.yaml", "netqos-policy", "policy.yaml"),
        ),
        # a mount path that only shares a prefix of characters holds nothing of the file
        (
            ["--config=/config2/policy.yaml"],
            [{"name": "config", "mountPath": "/config"}],
            [CONFIG_MAP],
            PolicyLocation("/config2/policy.yaml", elsewhere="no volume is mounted there (a file of the image)"),
        ),
        (
            ["--config=/config/policy.yaml"],
            [{"name": "config", "mountPath": "/config"}],
            [{"name": "config", "secret": {"secretName": "policy"}}],
            PolicyLocation("/config/policy.yaml", elsewhere="volume config is a secret volume, not a ConfigMap"),
        ),
        (
            ["--config=/config/policy.yaml"],
            [{"name": "config", "mountPath": "/config", "subPathExpr": "$(POD_NAME)"}],
            [CONFIG_MAP],
            PolicyLocation(
                "/config/policy.yaml",
                elsewhere="volume config is mounted with subPathExpr, which only the kubelet expands",
            ),
        ),
        # no --config: the built-in policy
        (["--bind=0.0.0.0:8443"], [{"name": "config", "mountPath": "/config"}], [CONFIG_MAP], None),
    ],
    ids=[
        "directory",
        "sub-path-file",
        "sub-path-through-item",
        "sub-path-directory",
        "deepest-mount",
        "prefix-of-characters-only",
        "secret-volume",
        "sub-path-expr",
        "built-in",
    ],
)
def test_policy_location_follows_the_mount_as_the_kubelet_does(args, mounts, volumes, expected):
    assert policy_location(deployment(args, mounts, volumes)) == expected
