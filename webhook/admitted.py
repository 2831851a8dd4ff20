"""The pod the API server stores when a controller creates one, modelled: what a pod template
becomes on its way through the API server's defaulting, admission plugins and pod strategy, as far
as it changes where kube-scheduler places the pod. Pure: API JSON in, API JSON out.

A controller sends its template's pod; the API server (kubernetes v1.36.3) then, in order:

1. defaults it (pkg/apis/core/v1/defaults.go `SetDefaults_Pod`): a container's limit is its
   request where it gives none;
2. runs the mutating admission plugins in `AllOrderedPlugins` order
   (pkg/kubeapiserver/options/plugins.go), of which these change the scheduling view:
   - LimitRanger (plugin/pkg/admission/limitranger/admission.go `PodMutateLimitFunc`,
     `defaultContainerResourceRequirements`, `mergeContainerResources`): each LimitRange of the
     namespace of type Container gives its `defaultRequest` to every container and init
     container that requests nothing of that resource, and its `default` to every one without
     that limit; a LimitRange's `defaultRequest` defaults to its `default`, and that to its `max`
     (pkg/apis/core/v1/defaults.go `SetDefaults_LimitRangeItem`), so `default: {cpu: 2}` alone
     requests 2 CPUs. The first LimitRange (by name, as the API server lists them) to give a
     resource wins: a later one never overwrites what an earlier one set;
   - Priority (plugin/pkg/admission/priority/admission.go `admitPod`): `priorityClassName` becomes
     `priority` and `preemptionPolicy`; modelled for the built-in system classes
     (pkg/apis/scheduling/v1/helpers.go); another class's value is left unknown (unset);
   - DefaultTolerationSeconds (plugin/pkg/admission/defaulttolerationseconds/admission.go `Admit`):
     a pod tolerating neither `node.kubernetes.io/not-ready` nor `node.kubernetes.io/unreachable`
     with NoExecute gets that toleration for 300 s;
   - RuntimeClass (plugin/pkg/admission/runtimeclass/admission.go `setOverhead`, `setScheduling`):
     the class's `overhead.podFixed` becomes `spec.overhead`; its `scheduling.nodeSelector` is
     merged into the pod's (a key both give with different values rejects the pod) and its
     `scheduling.tolerations` into the pod's (pkg/util/tolerations `MergeTolerations`, redundant
     ones dropped); a class that does not exist rejects the pod;
3. then the mutating admission webhooks (this webhook among them: `policy.evaluate`, the caller's);
4. then the pod strategy (pkg/registry/core/pod/strategy.go `PrepareForCreate`,
   `mutatePodAffinity`, `applyMatchLabelKeysAndMismatchLabelKeys`): every pod (anti-)affinity
   term with a labelSelector gets `key In (value)` for each of its `matchLabelKeys` and
   `key NotIn (value)` for each of its `mismatchLabelKeys` the pod's labels have (the
   MatchLabelKeysInPodAffinity gate is GA and locked on since 1.33). Pods already stored carry
   the merged selectors; a template does not.

`before_webhooks` is steps 1 and 2, `on_create` step 4. Not modelled: the plugins' validation
(LimitRanger's min/max, ResourceQuota), other admission plugins that are off by default
(PodNodeSelector, PodTolerationRestriction, ExtendedResourceToleration), mutating admission
policies and other mutating webhooks: the API server's own dry run (`webhook.cluster`) answers
those, where the caller may use it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# pkg/apis/scheduling/types.go: SystemCriticalPriority = 2 * HighestUserDefinablePriority;
# pkg/apis/scheduling/v1/helpers.go: system-node-critical is 1000 above system-cluster-critical.
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"  # a PriorityClass's defaulted preemptionPolicy
# plugin/pkg/admission/defaulttolerationseconds: the kube-apiserver flags' defaults.
NOT_READY, UNREACHABLE = "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300
NO_EXECUTE = "NoExecute"
CONTAINER_KINDS = ("containers", "initContainers")


@dataclass(frozen=True)
class Objects:
    """What the admission plugins read: the LimitRanges of each namespace and the RuntimeClasses
    by name, as API JSON. None: not read (RBAC forbids it), so that step is not modelled."""

    limit_ranges: Mapping[str, Sequence[Mapping[str, Any]]] | None = None
    runtime_classes: Mapping[str, Mapping[str, Any]] | None = None

    @classmethod
    def of(
        cls, limit_ranges: Iterable[Mapping[str, Any]] | None, runtime_classes: Iterable[Mapping[str, Any]] | None
    ) -> Objects:
        """From the listed objects (None: their list is forbidden); LimitRanges in name order."""
        by_namespace: dict[str, list[Mapping[str, Any]]] | None = None
        if limit_ranges is not None:
            by_namespace = {}
            for item in sorted(limit_ranges, key=lambda o: _meta(o).get("name") or ""):
                by_namespace.setdefault(str(_meta(item).get("namespace") or ""), []).append(item)
        classes = None
        if runtime_classes is not None:
            classes = {str(_meta(c).get("name") or ""): c for c in runtime_classes}
        return cls(by_namespace, classes)


@dataclass(frozen=True)
class Admitted:
    """A pod after admission: `pod` as modelled; `rejected` says why the API server refuses to
    create it ("" when it does not); `unknown`, the steps left out for want of their objects."""

    pod: dict[str, Any]
    rejected: str = ""
    unknown: tuple[str, ...] = ()


def before_webhooks(pod: Mapping[str, Any], objects: Objects) -> Admitted:
    """The pod a controller sends (`pod`, in its namespace) as the mutating webhooks receive it:
    defaulted, then through LimitRanger, Priority, DefaultTolerationSeconds and RuntimeClass."""
    out = copy.deepcopy(dict(pod))
    spec = out.setdefault("spec", {})
    namespace = str(_meta(out).get("namespace") or "default")
    default_requests_to_limits(spec)
    unknown: list[str] = []
    if objects.limit_ranges is None:
        unknown.append("LimitRanger")
    else:
        for limit_range in objects.limit_ranges.get(namespace, ()):
            apply_limit_range(spec, limit_range)
    resolve_priority(spec)
    add_default_tolerations(spec)
    name = spec.get("runtimeClassName")
    if isinstance(name, str) and name:
        if objects.runtime_classes is None:
            unknown.append(f"RuntimeClass {name}")
        else:
            found = objects.runtime_classes.get(name)
            if found is None:
                return Admitted(out, f'pod rejected: RuntimeClass "{name}" not found', tuple(unknown))
            problem = apply_runtime_class(spec, found)
            if problem:
                return Admitted(out, problem, tuple(unknown))
    return Admitted(out, "", tuple(unknown))


def on_create(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The admitted pod as the pod strategy stores it: matchLabelKeys and mismatchLabelKeys merged
    into the labelSelectors of its pod (anti-)affinity terms."""
    out = copy.deepcopy(dict(pod))
    labels = _meta(out).get("labels") or {}
    affinity = (out.get("spec") or {}).get("affinity")
    if not isinstance(affinity, dict) or not isinstance(labels, Mapping):
        return out
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind)
        if not isinstance(terms, dict):
            continue
        for term in _list(terms.get("requiredDuringSchedulingIgnoredDuringExecution")):
            merge_label_keys(term, labels)
        for weighted in _list(terms.get("preferredDuringSchedulingIgnoredDuringExecution")):
            if isinstance(weighted, dict):
                merge_label_keys(weighted.get("podAffinityTerm"), labels)
    return out


# ---------------------------------------------------------------------------------------------
# The steps, each as its Go function does it


def default_requests_to_limits(spec: dict[str, Any]) -> None:
    """SetDefaults_Pod: a container's (and an init container's) missing request is its limit."""
    for container in _containers(spec):
        resources = container.get("resources")
        if not isinstance(resources, dict) or not isinstance(resources.get("limits"), dict):
            continue
        requests = resources.get("requests")
        requests = requests if isinstance(requests, dict) else {}
        resources["requests"] = {**resources["limits"], **requests}


def limit_range_defaults(limit_range: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(default requests, default limits) of a LimitRange's Container items, each item defaulted
    as the API server stores it (SetDefaults_LimitRangeItem: default from max, defaultRequest
    from default, then from min); a later item overwrites an earlier one's resource."""
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for item in _list((limit_range.get("spec") or {}).get("limits")):
        if not isinstance(item, Mapping) or item.get("type") != "Container":
            continue
        default = {**_map(item.get("max")), **_map(item.get("default"))}
        default_request = {**_map(item.get("min")), **default, **_map(item.get("defaultRequest"))}
        requests.update(default_request)
        limits.update(default)
    return requests, limits


def apply_limit_range(spec: dict[str, Any], limit_range: Mapping[str, Any]) -> None:
    """mergeContainerResources for every container and init container: what it does not give."""
    requests, limits = limit_range_defaults(limit_range)
    if not requests and not limits:
        return
    for container in _containers(spec):
        resources = container.get("resources")
        if not isinstance(resources, dict):
            resources = container["resources"] = {}
        for key, defaults in (("limits", limits), ("requests", requests)):
            given = resources.get(key)
            given = given if isinstance(given, dict) else {}
            resources[key] = {**defaults, **given}


def resolve_priority(spec: dict[str, Any]) -> None:
    """Priority admission for the built-in system classes; another class (or the global default
    class) is not known here, and its pod's priority is left as it is."""
    value = SYSTEM_PRIORITY_CLASSES.get(str(spec.get("priorityClassName") or ""))
    if value is not None:
        spec["priority"] = value
        spec["preemptionPolicy"] = PREEMPT_LOWER_PRIORITY


def add_default_tolerations(spec: dict[str, Any]) -> None:
    """DefaultTolerationSeconds: a toleration of not-ready and unreachable (NoExecute, 300 s) for
    a pod that tolerates neither (an empty key or effect tolerates every one)."""
    tolerations = [t for t in _list(spec.get("tolerations")) if isinstance(t, Mapping)]

    def tolerated(key: str) -> bool:
        return any(
            (t.get("key") or "") in (key, "") and (t.get("effect") or "") in (NO_EXECUTE, "") for t in tolerations
        )

    added = [
        {"key": key, "operator": "Exists", "effect": NO_EXECUTE, "tolerationSeconds": DEFAULT_TOLERATION_SECONDS}
        for key in (NOT_READY, UNREACHABLE)
        if not tolerated(key)
    ]
    if added:
        spec["tolerations"] = [*_list(spec.get("tolerations")), *added]


def apply_runtime_class(spec: dict[str, Any], runtime_class: Mapping[str, Any]) -> str:
    """setOverhead and setScheduling; why the pod is rejected ("" when it is not)."""
    overhead = _map(runtime_class.get("overhead")).get("podFixed")
    if isinstance(overhead, Mapping) and overhead:
        if spec.get("overhead") and dict(spec["overhead"]) != dict(overhead):
            return "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
        spec["overhead"] = dict(overhead)
    scheduling = runtime_class.get("scheduling")
    if not isinstance(scheduling, Mapping):
        return ""
    selector = dict(_map(spec.get("nodeSelector")))
    for key, value in _map(scheduling.get("nodeSelector")).items():
        if key in selector and selector[key] != value:
            return (
                f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value}; "
                f"pod.spec.nodeSelector[{key}] = {selector[key]}"
            )
        selector[key] = value
    if selector:
        spec["nodeSelector"] = selector
    merged = merge_tolerations(_list(spec.get("tolerations")), _list(scheduling.get("tolerations")))
    if merged:
        spec["tolerations"] = merged
    return ""


def merge_tolerations(first: Sequence[Any], second: Sequence[Any]) -> list[Any]:
    """pkg/util/tolerations MergeTolerations: both lists, without a toleration another one kept
    (or a later, different one) tolerates a superset of; of equal ones the first stays."""
    every = [t for t in (*first, *second) if isinstance(t, Mapping)]
    merged: list[Mapping[str, Any]] = []
    for i, t in enumerate(every):
        if any(_superset(kept, t) for kept in merged):
            continue
        if any(_toleration(t) != _toleration(later) and _superset(later, t) for later in every[i + 1 :]):
            continue
        merged.append(t)
    return [dict(t) for t in merged]


def _toleration(t: Mapping[str, Any]) -> tuple[str, str, str, str, Any]:
    return (
        str(t.get("key") or ""),
        str(t.get("operator") or ""),
        str(t.get("value") or ""),
        str(t.get("effect") or ""),
        t.get("tolerationSeconds"),
    )


def _superset(ss: Mapping[str, Any], t: Mapping[str, Any]) -> bool:
    """isSuperset: whether `ss` tolerates every taint `t` does."""
    s_key, s_op, s_value, s_effect, s_seconds = _toleration(ss)
    key, op, value, effect, seconds = _toleration(t)
    if _toleration(ss) == _toleration(t):
        return True
    if key != s_key and (s_key != "" or s_op != "Exists"):
        return False
    if effect != s_effect and s_effect != "":
        return False
    if s_effect == NO_EXECUTE and s_seconds is not None and (seconds is None or seconds > s_seconds):
        return False
    if s_op in ("Equal", ""):
        return op == "Equal" and value == s_value
    return s_op == "Exists"


def merge_label_keys(term: Any, labels: Mapping[str, Any]) -> None:
    """applyMatchLabelKeysAndMismatchLabelKeys: a term without a labelSelector selects no pod and
    stays so; otherwise each key the pod's labels have is added as `In` (matchLabelKeys) or
    `NotIn` (mismatchLabelKeys) its value."""
    if not isinstance(term, dict) or not isinstance(term.get("labelSelector"), dict):
        return
    selector = term["labelSelector"]
    added = [
        {"key": key, "operator": operator, "values": [labels[key]]}
        for field, operator in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn"))
        for key in _list(term.get(field))
        if isinstance(key, str) and key in labels
    ]
    if added:
        selector["matchExpressions"] = [*_list(selector.get("matchExpressions")), *added]


def _containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [c for kind in CONTAINER_KINDS for c in _list(spec.get(kind)) if isinstance(c, dict)]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(obj.get("metadata"))


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
