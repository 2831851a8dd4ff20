"""deploy/examples/descheduler-policy.yaml is a DeschedulerPolicy the descheduler accepts: every field
name and enum value is one of its `descheduler/v1alpha2` types, as its Go source declares them
(the descheduler decodes strictly and case-sensitively, so a misspelt field is an error or, worse,
silently nothing). It selects the pods the shipped policy selects and restricts the fit check to
net=high nodes.

The types, from kubernetes-sigs/descheduler:
- pkg/api/v1alpha2/types.go (673126a): DeschedulerPolicy, DeschedulerProfile, Plugins, PluginSet,
  PluginConfig;
- pkg/api/types.go: Namespaces {include, exclude};
- pkg/framework/plugins/removepodsviolatingnodeaffinity/types.go: RemovePodsViolatingNodeAffinityArgs
  {namespaces, labelSelector, nodeAffinityType}; node_affinity.go (7b731df) switches on the two
  nodeAffinityType values below and logs any other as invalid;
- pkg/framework/plugins/defaultevictor/types.go: DefaultEvictorArgs.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.fixtures import REPO
from webhook.policy_file import load_policy

EXAMPLE = REPO / "deploy/examples/descheduler-policy.yaml"

POLICY_FIELDS = {
    "apiVersion",
    "kind",
    "profiles",
    "nodeSelector",
    "maxNoOfPodsToEvictPerNode",
    "maxNoOfPodsToEvictPerNamespace",
    "maxNoOfPodsToEvictTotal",
    "evictionFailureEventNotification",
    "metricsCollector",
    "metricsProviders",
    "gracePeriodSeconds",
}
PROFILE_FIELDS = {"name", "pluginConfig", "plugins"}
EXTENSION_POINTS = {"presort", "sort", "deschedule", "balance", "filter", "preevictionfilter"}
PLUGIN_SET_FIELDS = {"enabled", "disabled"}
PLUGIN_CONFIG_FIELDS = {"name", "args"}
NODE_AFFINITY_ARGS = {"namespaces", "labelSelector", "nodeAffinityType"}
NODE_AFFINITY_TYPES = {
    "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution",
}
NAMESPACES_FIELDS = {"include", "exclude"}
DEFAULT_EVICTOR_ARGS = {
    "nodeSelector",
    "evictLocalStoragePods",
    "evictDaemonSetPods",
    "evictSystemCriticalPods",
    "ignorePvcPods",
    "evictFailedBarePods",
    "labelSelector",
    "priorityThreshold",
    "nodeFit",
    "minReplicas",
    "minPodAge",
    "ignorePodsWithoutPDB",
    "protectionPolicies",
}
LABEL_SELECTOR_FIELDS = {"matchLabels", "matchExpressions"}
# plugin -> (the extension points it implements, its args' fields)
PLUGINS = {
    "DefaultEvictor": ({"filter", "preevictionfilter"}, DEFAULT_EVICTOR_ARGS),
    "RemovePodsViolatingNodeAffinity": ({"deschedule"}, NODE_AFFINITY_ARGS),
}
GO_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")


def unknown(obj: dict[str, Any], allowed: set[str], where: str) -> list[str]:
    return [f"{where}.{key}" for key in obj if key not in allowed]


def problems(policy: dict[str, Any]) -> list[str]:
    """Every field or value of `policy` the descheduler's v1alpha2 types do not have."""
    found = unknown(policy, POLICY_FIELDS, "")
    if (policy.get("apiVersion"), policy.get("kind")) != ("descheduler/v1alpha2", "DeschedulerPolicy"):
        found.append("apiVersion/kind")
    for key in ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal"):
        if key in policy and not (isinstance(policy[key], int) and policy[key] >= 0):
            found.append(f".{key}: not a uint")
    for i, profile in enumerate(policy.get("profiles") or []):
        where = f".profiles[{i}]"
        found += unknown(profile, PROFILE_FIELDS, where)
        plugins = profile.get("plugins") or {}
        found += unknown(plugins, EXTENSION_POINTS, f"{where}.plugins")
        for point, plugin_set in plugins.items():
            found += unknown(plugin_set, PLUGIN_SET_FIELDS, f"{where}.plugins.{point}")
            for name in plugin_set.get("enabled") or []:
                if name not in PLUGINS or point not in PLUGINS[name][0]:
                    found.append(f"{where}.plugins.{point}: {name} is no {point} plugin")
        for j, config in enumerate(profile.get("pluginConfig") or []):
            at = f"{where}.pluginConfig[{j}]"
            found += unknown(config, PLUGIN_CONFIG_FIELDS, at)
            if config.get("name") not in PLUGINS:
                found.append(f"{at}.name: unknown plugin {config.get('name')}")
                continue
            args = config.get("args") or {}
            found += unknown(args, PLUGINS[config["name"]][1], f"{at}.args")
            found += unknown(args.get("namespaces") or {}, NAMESPACES_FIELDS, f"{at}.args.namespaces")
            found += unknown(args.get("labelSelector") or {}, LABEL_SELECTOR_FIELDS, f"{at}.args.labelSelector")
            for value in args.get("nodeAffinityType") or []:
                if value not in NODE_AFFINITY_TYPES:
                    found.append(f"{at}.args.nodeAffinityType: {value}")
            if "minPodAge" in args and not GO_DURATION.match(str(args["minPodAge"])):
                found.append(f"{at}.args.minPodAge: not a duration")
    return found


@pytest.fixture(scope="module")
def policy() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return document


def args_of(policy: dict[str, Any], plugin: str) -> dict[str, Any]:
    [profile] = policy["profiles"]
    [config] = [c for c in profile["pluginConfig"] if c["name"] == plugin]
    found: dict[str, Any] = config["args"]
    return found


def test_every_field_and_value_is_one_of_the_descheduler_v1alpha2_types(policy: dict[str, Any]) -> None:
    assert problems(policy) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("profiles", 0, "plugins", "preEvictionFilter"), {"enabled": ["DefaultEvictor"]}),  # the tag is lower case
        (("profiles", 0, "pluginConfig", 1, "args", "nodeAffinityType"), ["preferredDuringScheduling"]),
        (("profiles", 0, "pluginConfig", 0, "args", "minPodAge"), "ten minutes"),
        (("profiles", 0, "plugins", "balance"), {"enabled": ["RemovePodsViolatingNodeAffinity"]}),
        (("maxNoOfPodsToEvict",), 3),
    ],
)
def test_the_check_catches_a_wrong_field_or_value(policy: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    broken = yaml.safe_load(EXAMPLE.read_text())
    obj = broken
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value
    assert problems(broken)


def test_it_evicts_on_preferred_node_affinity_only(policy: dict[str, Any]) -> None:
    [profile] = policy["profiles"]
    assert profile["plugins"]["deschedule"]["enabled"] == ["RemovePodsViolatingNodeAffinity"]
    assert args_of(policy, "RemovePodsViolatingNodeAffinity")["nodeAffinityType"] == [
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]


def test_it_moves_only_the_pods_the_shipped_policy_selects(policy: dict[str, Any]) -> None:
    [rule] = load_policy(REPO / "deploy/base/policy.yaml").rules
    assert args_of(policy, "RemovePodsViolatingNodeAffinity")["labelSelector"] == rule.pod_selector.to_api()


def test_the_fit_check_counts_only_net_high_nodes_and_the_policy_walks_every_node(policy: dict[str, Any]) -> None:
    evictor = args_of(policy, "DefaultEvictor")
    assert (evictor["nodeFit"], evictor["nodeSelector"]) == (True, "net=high")
    assert "nodeSelector" not in policy  # it would hide the slower nodes the pods are on
    [profile] = policy["profiles"]
    assert (
        profile["plugins"]["filter"]["enabled"]
        == profile["plugins"]["preevictionfilter"]["enabled"]
        == ["DefaultEvictor"]
    )


def test_it_keeps_the_same_floors_as_rebalance(policy: dict[str, Any]) -> None:
    from webhook import rebalance

    evictor = args_of(policy, "DefaultEvictor")
    assert evictor["minReplicas"] == rebalance.DEFAULT_MIN_REPLICAS
    assert evictor["minPodAge"] == "10m" and rebalance.DEFAULT_MIN_AGE.total_seconds() == 600
    assert all(
        isinstance(policy[k], int) and policy[k] > 0 for k in ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictTotal")
    )


def _descheduler_section() -> str:
    text = (REPO / "docs" / "operations.md").read_text()
    start = text.index("### The descheduler, and when to prefer `rebalance`")
    return text[start : text.index("\n## ", start)]


@pytest.mark.parametrize(
    "said",
    [
        "descheduler v0.36.0",
        "A single `--dry-run` cycle reports no evictions",
        "Its dry run ignores PodDisruptionBudgets",
        "It evicted both replicas of one Deployment in one cycle",
    ],
)
def test_the_docs_say_what_running_the_descheduler_beside_rebalance_showed(said: str) -> None:
    assert said in _descheduler_section()


def test_the_docs_check_command_runs_this_example_in_dry_run_over_several_cycles() -> None:
    # descheduler's flags (cmd/descheduler/app/options/options.go): --policy-config-file,
    # --dry-run, --descheduling-interval; "Evicted pod in dry run mode" is its V(1) log line
    # (pkg/descheduler/evictions/evictions.go).
    command = next(line for line in _descheduler_section().splitlines() if line.strip().startswith("descheduler "))
    assert "--policy-config-file deploy/examples/descheduler-policy.yaml" in command and EXAMPLE.is_file()
    section = _descheduler_section()
    assert "--dry-run --descheduling-interval" in section and "'Evicted pod in dry run mode'" in section
