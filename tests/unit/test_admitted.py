"""`webhook.admitted`: a pod template's pod as the API server (kubernetes v1.36.3) admits and
stores it, step by step: defaulting, LimitRanger, Priority, DefaultTolerationSeconds, RuntimeClass,
and the pod strategy's merge of matchLabelKeys and mismatchLabelKeys into pod affinity."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from webhook import admitted
from webhook.admitted import Objects, before_webhooks, on_create

NOT_READY = {"key": admitted.NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
UNREACHABLE = {"key": admitted.UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}


def pod(resources: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": "app:1"}
    if resources is not None:
        container["resources"] = resources
    return {
        "metadata": {"generateName": "web-", "namespace": "shop", "labels": {"app": "web", "tenant": "a"}},
        "spec": {"containers": [container], **spec},
    }


def limit_range(name: str, namespace: str = "shop", **item: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"limits": [{"type": "Container", **item}]}}


def resources_of(p: dict[str, Any]) -> Any:
    return p["spec"]["containers"][0].get("resources")


@pytest.mark.parametrize(
    ("case", "resources", "ranges", "expected"),
    [
        ("no LimitRange: untouched", {}, [], {}),
        (
            "defaultRequest and default fill what the container leaves out",
            None,
            [limit_range("lr", defaultRequest={"cpu": "500m"}, default={"cpu": "2"})],
            {"requests": {"cpu": "500m"}, "limits": {"cpu": "2"}},
        ),
        (
            "default alone: the stored LimitRange's defaultRequest defaults to it (2 CPUs requested)",
            None,
            [limit_range("lr", default={"cpu": "2"})],
            {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}},
        ),
        (
            "max alone: the default limit, and so the default request",
            None,
            [limit_range("lr", max={"memory": "1Gi"})],
            {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}},
        ),
        (
            "min alone: the default request only",
            None,
            [limit_range("lr", min={"cpu": "100m"})],
            {"requests": {"cpu": "100m"}, "limits": {}},
        ),
        (
            "a container's own limit is its request before LimitRanger runs",
            {"limits": {"cpu": "1"}},
            [limit_range("lr", defaultRequest={"cpu": "2"})],
            {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}},
        ),
        (
            "a container's own request stays",
            {"requests": {"cpu": "250m"}},
            [limit_range("lr", defaultRequest={"cpu": "2", "memory": "1Gi"})],
            {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {}},
        ),
        (
            "the first LimitRange by name wins",
            None,
            [limit_range("b", defaultRequest={"cpu": "3"}), limit_range("a", defaultRequest={"cpu": "1"})],
            {"requests": {"cpu": "1"}, "limits": {}},
        ),
        (
            "another namespace's LimitRange does not apply",
            None,
            [limit_range("lr", namespace="other", defaultRequest={"cpu": "2"})],
            None,
        ),
        (
            "a Pod-type item gives no defaults",
            None,
            [
                {
                    "metadata": {"name": "lr", "namespace": "shop"},
                    "spec": {"limits": [{"type": "Pod", "max": {"cpu": "4"}}]},
                }
            ],
            None,
        ),
    ],
)
def test_limit_ranger_defaults_what_a_container_leaves_out(
    case: str, resources: Any, ranges: list[dict[str, Any]], expected: Any
) -> None:
    got = before_webhooks(pod(resources), Objects.of(ranges, []))
    assert resources_of(got.pod) == expected, case
    assert got.rejected == "" and got.unknown == ()


def test_limit_ranger_defaults_init_containers_too() -> None:
    p = pod(None, initContainers=[{"name": "init", "image": "init:1"}])
    got = before_webhooks(p, Objects.of([limit_range("lr", defaultRequest={"cpu": "2"})], []))
    assert got.pod["spec"]["initContainers"][0]["resources"] == {"requests": {"cpu": "2"}, "limits": {}}


def test_unread_limit_ranges_are_said_and_change_nothing() -> None:
    got = before_webhooks(pod(None), Objects(None, {}))
    assert resources_of(got.pod) is None
    assert got.unknown == ("LimitRanger",)


@pytest.mark.parametrize(
    ("case", "tolerations", "expected"),
    [
        ("none: both added", None, [NOT_READY, UNREACHABLE]),
        (
            "not-ready tolerated already: unreachable added",
            [{"key": admitted.NOT_READY, "operator": "Exists", "effect": "NoExecute"}],
            [{"key": admitted.NOT_READY, "operator": "Exists", "effect": "NoExecute"}, UNREACHABLE],
        ),
        ("an empty key tolerates both", [{"operator": "Exists"}], [{"operator": "Exists"}]),
        (
            "a NoSchedule toleration of the key does not count",
            [{"key": admitted.NOT_READY, "operator": "Exists", "effect": "NoSchedule"}],
            [{"key": admitted.NOT_READY, "operator": "Exists", "effect": "NoSchedule"}, NOT_READY, UNREACHABLE],
        ),
    ],
)
def test_default_toleration_seconds(case: str, tolerations: Any, expected: list[dict[str, Any]]) -> None:
    spec = {} if tolerations is None else {"tolerations": tolerations}
    assert before_webhooks(pod(**spec), Objects({}, {})).pod["spec"]["tolerations"] == expected, case


@pytest.mark.parametrize(
    ("class_name", "priority"),
    [("system-node-critical", 2_000_001_000), ("system-cluster-critical", 2_000_000_000), ("batch", None)],
)
def test_priority_of_the_system_classes(class_name: str, priority: int | None) -> None:
    spec = before_webhooks(pod(priorityClassName=class_name), Objects({}, {})).pod["spec"]
    assert spec.get("priority") == priority
    assert spec.get("preemptionPolicy") == (None if priority is None else "PreemptLowerPriority")


GVISOR = {
    "metadata": {"name": "gvisor"},
    "handler": "runsc",
    "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}},
    "scheduling": {
        "nodeSelector": {"runtime": "gvisor"},
        "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}],
    },
}


@pytest.mark.parametrize(
    ("case", "spec", "changed", "rejected"),
    [
        (
            "overhead, node selector and tolerations come from the class",
            {"runtimeClassName": "gvisor", "nodeSelector": {"zone": "a"}},
            {
                "overhead": {"cpu": "250m", "memory": "64Mi"},
                "nodeSelector": {"zone": "a", "runtime": "gvisor"},
                "tolerations": [
                    NOT_READY,
                    UNREACHABLE,
                    {"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"},
                ],
            },
            "",
        ),
        (
            "a pod toleration that tolerates a superset keeps the class's out",
            {"runtimeClassName": "gvisor", "tolerations": [{"operator": "Exists"}]},
            {"tolerations": [{"operator": "Exists"}]},
            "",
        ),
        (
            "a conflicting node selector rejects the pod",
            {"runtimeClassName": "gvisor", "nodeSelector": {"runtime": "runc"}},
            {},
            "conflict: runtimeClass.scheduling.nodeSelector[runtime] = gvisor; pod.spec.nodeSelector[runtime] = runc",
        ),
        (
            "another overhead rejects the pod",
            {"runtimeClassName": "gvisor", "overhead": {"cpu": "1"}},
            {},
            "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead",
        ),
        (
            "a class that does not exist rejects the pod",
            {"runtimeClassName": "kata"},
            {},
            'pod rejected: RuntimeClass "kata" not found',
        ),
    ],
)
def test_runtime_class(case: str, spec: dict[str, Any], changed: dict[str, Any], rejected: str) -> None:
    got = before_webhooks(pod(**spec), Objects.of([], [GVISOR]))
    assert got.rejected == rejected, case
    if not rejected:
        assert {k: got.pod["spec"].get(k) for k in changed} == changed, case


def test_an_unread_runtime_class_is_said() -> None:
    got = before_webhooks(pod(runtimeClassName="gvisor"), Objects({}, None))
    assert got.rejected == "" and got.unknown == ("RuntimeClass gvisor",)
    assert "overhead" not in got.pod["spec"]


def term(**extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname", **extra}


@pytest.mark.parametrize(
    ("case", "raw", "expressions"),
    [
        ("matchLabelKeys: In the pod's value", term(matchLabelKeys=["tenant"]), [("tenant", "In", ["a"])]),
        ("mismatchLabelKeys: NotIn the pod's value", term(mismatchLabelKeys=["tenant"]), [("tenant", "NotIn", ["a"])]),
        ("a key the pod does not have adds nothing", term(mismatchLabelKeys=["team"]), []),
        ("no keys: untouched", term(), []),
    ],
)
def test_the_pod_strategy_merges_label_keys_into_affinity_selectors(
    case: str, raw: dict[str, Any], expressions: list[tuple[str, str, list[str]]]
) -> None:
    affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [raw],
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": copy.deepcopy(raw)}],
        },
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [copy.deepcopy(raw)]},
    }
    stored = on_create(pod(affinity=affinity))["spec"]["affinity"]
    for got in (
        stored["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0],
        stored["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"],
        stored["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0],
    ):
        merged = got["labelSelector"].get("matchExpressions", [])
        assert [(e["key"], e["operator"], e["values"]) for e in merged] == expressions, case
        assert got["labelSelector"]["matchLabels"] == {"app": "web"}


def test_a_term_without_a_label_selector_still_selects_nothing() -> None:
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "k", "matchLabelKeys": ["app"]}]
        }
    }
    stored = on_create(pod(affinity=affinity))
    assert stored["spec"]["affinity"] == affinity


def test_the_template_is_not_changed() -> None:
    original = pod(None)
    before_webhooks(original, Objects.of([limit_range("lr", default={"cpu": "2"})], []))
    assert resources_of(original) is None
