"""A `KubeSchedulerConfiguration` (kubescheduler.config.k8s.io/v1) read into the `Profile` that
scores a pod: the profile named by the pod's `schedulerName`. Pure: API data in, a Profile out.
The plugins it can evaluate, and the default profile it starts from, are `plugins`'.

What is read, with kube-scheduler's merge rules (kubernetes v1.36: pkg/scheduler/apis/config/v1/
default_plugins.go `mergePlugins`, pkg/scheduler/framework/runtime/framework.go
`expandMultiPointPlugins`):
- `profiles`: every profile by its `schedulerName` (`profiles`), or the one a pod names
  (`profile_for`); the Score plugins of the plugin table are evaluated, the NetQoS scheduler
  plugin (`NetQoS`, the project's Go plugin, a second profile in the test harness) among them;
  any other Score plugin is listed in `Profile.not_evaluated` (`unevaluated_scores` names those);
- `plugins.multiPoint` changes the default plugin set: `disabled` removes plugins (`*` all of
  them), `enabled` adds one or replaces a default with its new weight;
- `plugins.score` then decides the Score extension point: `disabled` removes plugins (`*` every
  multiPoint plugin), `enabled` adds or re-weighs; a weight of 0 or none counts 1;
- `pluginConfig` args of NodeResourcesFit (`scoringStrategy`: LeastAllocated, MostAllocated,
  RequestedToCapacityRatio with its `shape`, and `resources`), NodeResourcesBalancedAllocation
  (`resources`) and NodeAffinity (`addedAffinity`).
Other extension points (filter, preScore) are taken as the defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook import apidata
from webhook.affinity import node_affinity_from_api
from webhook.apidata import ShapeError, expect
from webhook.scheduler.model import DEFAULT_SCHEDULER, Profile, ScoringStrategy
from webhook.scheduler.plugins import (
    BALANCED_ALLOCATION,
    DEFAULT_WEIGHTS,
    NODE_AFFINITY,
    NODE_RESOURCES_FIT,
    NOT_EVALUATED,
    NOT_EVALUATED_SCORE,
    SCORE_ORDER,
)

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
# Every Score plugin of the table, by kube-scheduler's name: the default profile's and NetQoS.
EVALUATED = frozenset(SCORE_ORDER)


class SchedulerConfigError(ValueError):
    """A scheduler configuration that cannot be used; the message names the field and the fix."""


def profile_for(config: Any, scheduler_name: str) -> Profile:
    """The Profile `scheduler_name` runs under in `config` (a decoded KubeSchedulerConfiguration)."""
    try:
        return _profile_for(config, scheduler_name)
    except ShapeError as err:
        raise SchedulerConfigError(f"{err}; fix the field") from None


def profiles(config: Any) -> dict[str, Profile]:
    """Every profile of `config` (a decoded KubeSchedulerConfiguration) by its schedulerName, in
    the file's order; a name two profiles share is refused, as kube-scheduler refuses it
    (pkg/scheduler/apis/config/validation/validation.go, "Duplicate value")."""
    try:
        found: dict[str, Profile] = {}
        for i, (name, raw) in enumerate(_raw_profiles(config)):
            if name in found:
                raise SchedulerConfigError(
                    f"profiles[{i}].schedulerName {name!r} is a duplicate: each profile needs its own schedulerName"
                )
            found[name] = _profile(raw, f"profiles[{i}]", name)
        return found
    except ShapeError as err:
        raise SchedulerConfigError(f"{err}; fix the field") from None


def unevaluated_scores(profile: Profile) -> tuple[str, ...]:
    """The profile's Score plugins that are not evaluated here and that kube-scheduler's default
    profile does not run either (a plugin of another project): where its scores would put a pod
    is not known."""
    return tuple(p for p in profile.not_evaluated if p not in NOT_EVALUATED)


def _raw_profiles(config: Any) -> list[tuple[str, dict[str, Any]]]:
    expect(config, dict, "(document)", f"a {KIND}")
    if config.get("kind") != KIND or config.get("apiVersion") != API_VERSION:
        raise SchedulerConfigError(
            f"kind is {config.get('kind')!r} and apiVersion {config.get('apiVersion')!r}; "
            f"give a {KIND} of apiVersion {API_VERSION}"
        )
    found = []
    for i, raw in enumerate(apidata.items(config, "profiles", "profiles") or [{}]):  # none: one default profile
        path = f"profiles[{i}]"
        expect(raw, dict, path, "an object")
        found.append((apidata.text(raw, "schedulerName", f"{path}.schedulerName") or DEFAULT_SCHEDULER, raw))
    return found


def _profile_for(config: Any, scheduler_name: str) -> Profile:
    names = []
    for i, (name, raw) in enumerate(_raw_profiles(config)):
        names.append(name)
        if name == scheduler_name:
            return _profile(raw, f"profiles[{i}]", name)
    raise SchedulerConfigError(
        f"no profile has schedulerName {scheduler_name!r} (the pod's spec.schedulerName); profiles: "
        f"{', '.join(names)}; this scheduler would not schedule the pod"
    )


def _profile(raw: Mapping[str, Any], path: str, name: str) -> Profile:
    plugins = apidata.obj(raw, "plugins", f"{path}.plugins")
    weights = _score_weights(plugins, f"{path}.plugins")
    args = _plugin_args(raw, f"{path}.pluginConfig")
    evaluated = {p: w for p, w in weights.items() if p in EVALUATED}
    unknown = tuple(p for p in weights if p not in EVALUATED and p not in NOT_EVALUATED_SCORE)
    not_evaluated = tuple(p for p in NOT_EVALUATED if p not in NOT_EVALUATED_SCORE or p in weights) + unknown
    fit_path, fit = args.get(NODE_RESOURCES_FIT, ("", {}))
    balanced_path, balanced = args.get(BALANCED_ALLOCATION, ("", {}))
    affinity_path, affinity = args.get(NODE_AFFINITY, ("", {}))
    added_path = f"{affinity_path}.addedAffinity"
    required, preferred = node_affinity_from_api(apidata.obj(affinity, "addedAffinity", added_path), added_path)
    return Profile(
        scheduler_name=name,
        weights=evaluated,
        scoring_strategy=_strategy(fit, fit_path),
        balanced_resources=_resources(balanced, "resources", f"{balanced_path}.resources")
        or ScoringStrategy().resources,
        added_required=required,
        added_preferred=preferred,
        not_evaluated=not_evaluated,
    )


def _score_weights(plugins: Mapping[str, Any], path: str) -> dict[str, int]:
    """The Score extension point's plugins and weights after both merges."""
    multi: dict[str, int] = {**DEFAULT_WEIGHTS, **NOT_EVALUATED_SCORE}
    _merge(multi, apidata.obj(plugins, "multiPoint", f"{path}.multiPoint"), f"{path}.multiPoint")
    score = dict(multi)
    _merge(score, apidata.obj(plugins, "score", f"{path}.score"), f"{path}.score")
    return {name: weight or 1 for name, weight in score.items()}


def _merge(into: dict[str, int], plugin_set: Mapping[str, Any], path: str) -> None:
    for i, plugin in enumerate(apidata.items(plugin_set, "disabled", f"{path}.disabled")):
        name = _plugin_name(plugin, f"{path}.disabled[{i}]")
        if name == "*":
            into.clear()
        else:
            into.pop(name, None)
    for i, plugin in enumerate(apidata.items(plugin_set, "enabled", f"{path}.enabled")):
        name = _plugin_name(plugin, f"{path}.enabled[{i}]")
        into[name] = apidata.integer(plugin, "weight", f"{path}.enabled[{i}].weight")


def _plugin_name(plugin: Any, path: str) -> str:
    expect(plugin, dict, path, "an object with a name")
    name = apidata.text(plugin, "name", f"{path}.name")
    if not name:
        raise ShapeError(f"{path}.name", "a plugin name", plugin.get("name"))
    return name


def _plugin_args(raw: Mapping[str, Any], path: str) -> dict[str, tuple[str, Mapping[str, Any]]]:
    args: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for i, entry in enumerate(apidata.items(raw, "pluginConfig", path)):
        expect(entry, dict, f"{path}[{i}]", "an object with name and args")
        name = apidata.text(entry, "name", f"{path}[{i}].name")
        args[name] = (f"{path}[{i}].args", apidata.obj(entry, "args", f"{path}[{i}].args"))
    return args


def _strategy(args: Mapping[str, Any], path: str) -> ScoringStrategy:
    raw = apidata.obj(args, "scoringStrategy", f"{path}.scoringStrategy")
    if not raw:
        return ScoringStrategy()
    path = f"{path}.scoringStrategy"
    kind = apidata.text(raw, "type", f"{path}.type") or "LeastAllocated"
    if kind not in STRATEGIES:
        raise SchedulerConfigError(f"{path}.type is {kind!r}; use one of {', '.join(STRATEGIES)}")
    resources = _resources(raw, "resources", f"{path}.resources") or ScoringStrategy().resources
    shape: tuple[tuple[int, int], ...] = ()
    if kind == "RequestedToCapacityRatio":
        ratio = apidata.obj(raw, "requestedToCapacityRatio", f"{path}.requestedToCapacityRatio")
        points = apidata.items(ratio, "shape", f"{path}.requestedToCapacityRatio.shape")
        where = f"{path}.requestedToCapacityRatio.shape"
        pairs = []
        for i, point in enumerate(points):
            expect(point, dict, f"{where}[{i}]", "an object with utilization and score")
            pairs.append(
                (
                    apidata.integer(point, "utilization", f"{where}[{i}].utilization"),
                    apidata.integer(point, "score", f"{where}[{i}].score"),
                )
            )
        shape = tuple(pairs)
        if any(a[0] >= b[0] for a, b in zip(shape, shape[1:], strict=False)):
            raise SchedulerConfigError(f"{where}: utilization values must increase from point to point")
        if not shape:
            raise SchedulerConfigError(f"{path}.requestedToCapacityRatio.shape must have at least one point")
    return ScoringStrategy(kind, resources, shape)


def _resources(raw: Mapping[str, Any], key: str, path: str) -> tuple[tuple[str, int], ...]:
    out = []
    for i, entry in enumerate(apidata.items(raw, key, path)):
        expect(entry, dict, f"{path}[{i}]", "an object with name and weight")
        name = apidata.text(entry, "name", f"{path}[{i}].name")
        out.append((name, apidata.integer(entry, "weight", f"{path}[{i}].weight") or 1))
    return tuple(out)
