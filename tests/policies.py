"""Policies the admission-policy tests compile: the default, and rules that exercise what the
default does not (several rules on one pod, shared keys, every node-selector operator)."""

from __future__ import annotations

import copy

from tests.fixtures import REPO
from webhook.policy import Policy
from webhook.policy_file import DEFAULT_DOCUMENT, compile_policy, default_policy, load_policy

_NETQOS = {
    "name": "netqos",
    "podSelector": {"matchLabels": {"qos": "latency-sensitive"}},
    "preferences": [
        {"weight": 90, "matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]},
        {"weight": 10, "matchExpressions": [{"key": "net", "operator": "NotIn", "values": ["low"]}]},
    ],
}
_GPU = {
    "name": "gpu-batch",
    "podSelector": {
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["batch"]},
            {"key": "gpu", "operator": "Exists"},
        ]
    },
    "preferences": [
        {"weight": 50, "matchExpressions": [{"key": "accel", "operator": "In", "values": ["a100", "h100"]}]},
        {
            "weight": 5,
            "matchExpressions": [
                {"key": "disk", "operator": "Exists"},
                {"key": "cpu", "operator": "Gt", "values": ["8"]},
            ],
        },
        {"weight": 3, "matchExpressions": [{"key": "spot", "operator": "DoesNotExist"}]},
    ],
}
# A second rule on the `net` key: the first rule's terms are policy terms for it, never explicit.
_NET_BATCH = {
    "name": "net-batch",
    "podSelector": {"matchLabels": {"tier": "batch"}},
    "preferences": [{"weight": 20, "matchExpressions": [{"key": "net", "operator": "In", "values": ["high", "mid"]}]}],
}


def policies() -> dict[str, Policy]:
    # The default rule as the default document writes it (a score table compiled into terms, with
    # the earlier terms as an equivalent form), beside rules that write their terms.
    table = copy.deepcopy(DEFAULT_DOCUMENT)
    table["rules"] += [_GPU, _NET_BATCH]
    return {
        "default": default_policy(),
        "classic": load_policy(REPO / "deploy" / "examples" / "policies" / "classic.yaml"),
        "three rules": compile_policy({"rules": [_NETQOS, _GPU, _NET_BATCH]}, "<three rules>"),
        "table and two rules": compile_policy(table, "<table and two rules>"),
    }
