"""A `KubeSchedulerConfiguration` (kubescheduler.config.k8s.io/v1) read into the `Profile` that
scores a pod: the profile named by the pod's `schedulerName`. Pure: API data in, a Profile out.
The plugins it can evaluate, and the default profile it starts from, are `registry`'s.

What is read, with kube-scheduler's merge rules (kubernetes v1.36.3: pkg/scheduler/apis/config/v1/
default_plugins.go `getDefaultPlugins`, `mergePlugins`; pkg/scheduler/framework/runtime/framework.go
`expandMultiPointPlugins`):
- `profiles`: every profile by its `schedulerName` (`profiles`), or the one a pod names
  (`profile_for`); the Score plugins of the plugin table are evaluated, the NetQoS scheduler
  plugin (`NetQoS`, the project's Go plugin, a second profile in the test harness) among them;
  any other Score plugin is listed in `Profile.not_evaluated` (`unevaluated_scores` names those);
- `plugins.multiPoint` changes the default plugin set: `disabled` removes plugins (`*` all of
  them), `enabled` adds one or replaces a default with its new weight;
- `plugins.score` then decides the Score extension point: `disabled` removes plugins (`*` every
  multiPoint plugin), `enabled` adds or re-weighs; a weight of 0 or none counts 1;
- `plugins.filter` and `plugins.preFilter` likewise decide which of the table's Filter plugins
  run (`Profile.disabled_filters`) and whose PreFilter narrows the nodes
  (`Profile.disabled_prefilters`); a plugin they enable that the table does not know is listed
  in `Profile.not_evaluated`;
- `pluginConfig` args (pkg/scheduler/apis/config/types_pluginargs.go, defaulted as v1/defaults.go
  `SetDefaults_*Args` and checked as validation/validation_pluginargs.go `Validate*Args`):
  NodeResourcesFit's `scoringStrategy` (LeastAllocated, MostAllocated, RequestedToCapacityRatio
  with its `shape`, and `resources`), `ignoredResources` and `ignoredResourceGroups`;
  NodeResourcesBalancedAllocation's `resources`; NodeAffinity's `addedAffinity`;
  PodTopologySpread's `defaultingType` and `defaultConstraints`; InterPodAffinity's
  `hardPodAffinityWeight` and `ignorePreferredTermsOfExistingPods`;
- `percentageOfNodesToScore`, the profile's when set, else the configuration's
  (schedule_one.go `numFeasibleNodesToFind`).

What is not evaluated is named, never dropped (`Profile.settings_not_evaluated`): the args of
other plugins, the other extension points (preScore, reserve, permit, ...), a Filter that would
run without the PreFilter it needs, and `extenders`. The process settings (leaderElection,
clientConnection, parallelism, backoffs, profiling) do not decide where a pod goes. A value
kube-scheduler refuses (an unknown field of an args type, a value out of its range) is a
`SchedulerConfigError` naming the field and the value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook import apidata
from webhook.affinity import node_affinity_from_api
from webhook.apidata import InvalidValue, ShapeError, expect
from webhook.scheduler.model import DEFAULT_SCHEDULER, Profile, ScoringStrategy, SpreadConstraint
from webhook.scheduler.read import spread_constraint
from webhook.scheduler.registry import (
    BALANCED_ALLOCATION,
    DEFAULT_WEIGHTS,
    FILTER_PLUGINS,
    INTER_POD_AFFINITY,
    NODE_AFFINITY,
    NODE_DECLARED_FEATURES,
    NODE_NAME,
    NODE_PORTS,
    NODE_RESOURCES_FIT,
    NODE_UNSCHEDULABLE,
    NOT_EVALUATED,
    NOT_EVALUATED_SCORE,
    POD_TOPOLOGY_SPREAD,
    SCORE_ORDER,
    TAINT_TOLERATION,
)
from webhook.validation import is_qualified_name

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
# Every Score plugin of the table, by kube-scheduler's name: the default profile's and NetQoS.
EVALUATED = frozenset(SCORE_ORDER)
# The default multiPoint plugins (v1.36.3 default_plugins.go getDefaultPlugins, with the feature
# gates on by default: NodeDeclaredFeatures, DynamicResources).
DEFAULT_MULTIPOINT = (
    "SchedulingGates",
    "PrioritySort",
    NODE_UNSCHEDULABLE,
    NODE_NAME,
    TAINT_TOLERATION,
    NODE_AFFINITY,
    NODE_PORTS,
    NODE_RESOURCES_FIT,
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    POD_TOPOLOGY_SPREAD,
    INTER_POD_AFFINITY,
    "DefaultPreemption",
    BALANCED_ALLOCATION,
    "ImageLocality",
    "DefaultBinder",
    NODE_DECLARED_FEATURES,
    "DynamicResources",
)
# The Filter plugins of the table, and the in-tree plugins with a Filter it does not evaluate.
TABLE_FILTERS = frozenset(p.name for p in FILTER_PLUGINS)
FILTERS = TABLE_FILTERS | frozenset(NOT_EVALUATED)
# The table's plugins with a PreFilter (each plugin's PreFilter method, v1.36.3; NodeName's from
# v1.37), and those whose Filter works without it: NodeAffinity's computes the pod's required
# affinity itself (node_affinity.go Filter), NodeName's reads spec.nodeName. The others' Filter
# reads the state their PreFilter writes and fails every node without it.
TABLE_PREFILTERS = frozenset(
    {NODE_NAME, NODE_AFFINITY, NODE_PORTS, NODE_RESOURCES_FIT, POD_TOPOLOGY_SPREAD, INTER_POD_AFFINITY}
    | {NODE_DECLARED_FEATURES}
)
FILTER_WITHOUT_PREFILTER = frozenset({NODE_AFFINITY, NODE_NAME})
# Extension points whose plugin sets are not evaluated (taken as the default profile's).
OTHER_POINTS = (
    "preEnqueue",
    "queueSort",
    "postFilter",
    "preScore",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
    "placementGenerate",
    "placementScore",
)
SYSTEM, LIST = "System", "List"  # PodTopologySpreadArgs.defaultingType
WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
TYPE_META = frozenset({"apiVersion", "kind"})
# The fields of each args type read here (kube-scheduler v1 types_pluginargs.go); kube-scheduler
# decodes args strictly, so any other field makes it refuse the file.
ARGS_FIELDS: Mapping[str, frozenset[str]] = {
    NODE_RESOURCES_FIT: frozenset({"ignoredResources", "ignoredResourceGroups", "scoringStrategy"}),
    BALANCED_ALLOCATION: frozenset({"resources"}),
    NODE_AFFINITY: frozenset({"addedAffinity"}),
    POD_TOPOLOGY_SPREAD: frozenset({"defaultConstraints", "defaultingType"}),
    INTER_POD_AFFINITY: frozenset({"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"}),
}
MAX_HARD_POD_AFFINITY_WEIGHT = 100
MAX_RESOURCE_WEIGHT = 100
MAX_SHAPE_SCORE = 10  # config.MaxCustomPriorityScore


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
        raw_profiles = _raw_profiles(config)
        shared = _Shared.read(config)
        found: dict[str, Profile] = {}
        for i, (name, raw) in enumerate(raw_profiles):
            if name in found:
                raise SchedulerConfigError(
                    f"profiles[{i}].schedulerName {name!r} is a duplicate: each profile needs its own schedulerName"
                )
            found[name] = _profile(raw, f"profiles[{i}]", name, shared)
        return found
    except ShapeError as err:
        raise SchedulerConfigError(f"{err}; fix the field") from None


def unevaluated_scores(profile: Profile) -> tuple[str, ...]:
    """The profile's Score plugins that are not evaluated here and that kube-scheduler's default
    profile does not run either (a plugin of another project): where its scores would put a pod
    is not known."""
    return tuple(p for p in profile.not_evaluated if p not in NOT_EVALUATED)


def not_evaluated_summary(profile: Profile) -> str:
    """One line naming what the profile's configuration says that is not evaluated here ("" when
    nothing is): for explain's note and for status's and rebalance's notes alike."""
    if not profile.settings_not_evaluated:
        return ""
    return f"{profile.scheduler_name}'s configuration, not evaluated: {'; '.join(profile.settings_not_evaluated)}"


def profile_notes(profiles: Iterable[Profile]) -> list[str]:
    """`not_evaluated_summary` of each profile that has one: the notes of status and rebalance."""
    return [note for note in map(not_evaluated_summary, profiles) if note]


@dataclass(frozen=True)
class _Shared:
    """What the configuration says for every profile: percentageOfNodesToScore, extenders."""

    percentage: int | None
    not_evaluated: tuple[str, ...]

    @classmethod
    def read(cls, config: Any) -> _Shared:
        expect(config, dict, "(document)", f"a {KIND}")
        extenders = apidata.items(config, "extenders", "extenders")
        named = (
            (f"extenders ({len(extenders)}: their filter, prioritize and bind calls; managedResources)",)
            if extenders
            else ()
        )
        return cls(_percentage(config, "percentageOfNodesToScore"), named)


def _percentage(raw: Mapping[str, Any], path: str) -> int | None:
    """percentageOfNodesToScore: None when unset; 0-100 (validation.go validatePercentageOfNodesToScore)."""
    if raw.get("percentageOfNodesToScore") is None:
        return None
    value = apidata.integer(raw, "percentageOfNodesToScore", path)
    if not 0 <= value <= 100:
        raise InvalidValue(path, "in the range 0-100", value)
    return value


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
            return _profile(raw, f"profiles[{i}]", name, _Shared.read(config))
    raise SchedulerConfigError(
        f"no profile has schedulerName {scheduler_name!r} (the pod's spec.schedulerName); profiles: "
        f"{', '.join(names)}; this scheduler would not schedule the pod"
    )


def _profile(raw: Mapping[str, Any], path: str, name: str, shared: _Shared) -> Profile:
    plugins = apidata.obj(raw, "plugins", f"{path}.plugins")
    weights = _score_weights(plugins, f"{path}.plugins")
    points = _Points.read(plugins, f"{path}.plugins")
    args = _plugin_args(raw, f"{path}.pluginConfig")
    evaluated = {p: w for p, w in weights.items() if p in EVALUATED}
    unknown = tuple(p for p in weights if p not in EVALUATED and p not in NOT_EVALUATED_SCORE)
    unknown += tuple(p for p in points.unknown_filters if p not in unknown)
    running = points.multi | points.filters
    not_evaluated = tuple(p for p in NOT_EVALUATED if p in running or p in weights) + unknown
    fit_path, fit = args.get(NODE_RESOURCES_FIT, ("", {}))
    balanced_path, balanced = args.get(BALANCED_ALLOCATION, ("", {}))
    affinity_path, affinity = args.get(NODE_AFFINITY, ("", {}))
    spread_path, spread = args.get(POD_TOPOLOGY_SPREAD, ("", {}))
    pod_affinity_path, pod_affinity = args.get(INTER_POD_AFFINITY, ("", {}))
    added_path = f"{affinity_path}.addedAffinity"
    required, preferred = node_affinity_from_api(apidata.obj(affinity, "addedAffinity", added_path), added_path)
    own_percentage = _percentage(raw, f"{path}.percentageOfNodesToScore")
    return Profile(
        scheduler_name=name,
        weights=evaluated,
        scoring_strategy=_strategy(fit, fit_path),
        balanced_resources=_balanced_resources(balanced, f"{balanced_path}.resources") or ScoringStrategy().resources,
        added_required=required,
        added_preferred=preferred,
        spread_defaults=_spread_defaults(spread, spread_path),
        hard_pod_affinity_weight=_hard_weight(pod_affinity, f"{pod_affinity_path}.hardPodAffinityWeight"),
        ignore_preferred_terms_of_existing_pods=bool(
            apidata.boolean(
                pod_affinity,
                "ignorePreferredTermsOfExistingPods",
                f"{pod_affinity_path}.ignorePreferredTermsOfExistingPods",
            )
        ),
        ignored_resources=_ignored(fit, fit_path, "ignoredResources"),
        ignored_resource_groups=_ignored(fit, fit_path, "ignoredResourceGroups"),
        disabled_filters=TABLE_FILTERS - points.filters,
        disabled_prefilters=TABLE_PREFILTERS - points.prefilters,
        percentage_of_nodes_to_score=_first_set(own_percentage, shared.percentage),
        not_evaluated=not_evaluated,
        settings_not_evaluated=(
            *points.not_evaluated,
            *(f"{where} ({plugin})" for plugin, (where, _) in args.items() if plugin not in ARGS_FIELDS),
            *shared.not_evaluated,
        ),
    )


def _first_set(*values: int | None) -> int:
    """The first value set; 0 (kube-scheduler's adaptive default) when none is."""
    return next((v for v in values if v is not None), 0)


# ---------------------------------------------------------------------------------------------
# Plugin sets


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


@dataclass(frozen=True)
class _Points:
    """The profile's plugins at the multiPoint, Filter and PreFilter extension points, by name,
    and what the other extension points say (not evaluated)."""

    multi: frozenset[str]
    filters: frozenset[str]
    prefilters: frozenset[str]
    unknown_filters: tuple[str, ...]
    not_evaluated: tuple[str, ...]

    @classmethod
    def read(cls, plugins: Mapping[str, Any], path: str) -> _Points:
        multi_weights = dict.fromkeys(DEFAULT_MULTIPOINT, 0)
        _merge(multi_weights, apidata.obj(plugins, "multiPoint", f"{path}.multiPoint"), f"{path}.multiPoint")
        multi = frozenset(multi_weights)
        filters, enabled_filters = _point(plugins, "filter", path, multi & FILTERS)
        prefilters, enabled_prefilters = _point(plugins, "preFilter", path, multi & TABLE_PREFILTERS)
        unknown = tuple(p for p in (*enabled_filters, *enabled_prefilters) if p not in FILTERS | TABLE_PREFILTERS)
        named = [
            f"{path}.preFilter: {p}'s Filter runs without its PreFilter (kube-scheduler fails every node there)"
            for p in sorted((filters & TABLE_PREFILTERS) - prefilters - FILTER_WITHOUT_PREFILTER)
        ]
        for point in OTHER_POINTS:
            where = f"{path}.{point}"
            listed = _listed(apidata.obj(plugins, point, where), where)
            if listed:
                named.append(f"{where} ({listed}): taken as the default profile's")
        return cls(multi, filters, prefilters, tuple(dict.fromkeys(unknown)), tuple(named))


def _point(
    plugins: Mapping[str, Any], point: str, path: str, from_multi: frozenset[str]
) -> tuple[frozenset[str], tuple[str, ...]]:
    """The plugins of one extension point (expandMultiPointPlugins): the multiPoint plugins that
    have it, less those it disables (`*`: all of them), plus those it enables; and those."""
    where = f"{path}.{point}"
    plugin_set = apidata.obj(plugins, point, where)
    disabled = {
        _plugin_name(p, f"{where}.disabled[{i}]")
        for i, p in enumerate(apidata.items(plugin_set, "disabled", f"{where}.disabled"))
    }
    enabled = tuple(
        _plugin_name(p, f"{where}.enabled[{i}]")
        for i, p in enumerate(apidata.items(plugin_set, "enabled", f"{where}.enabled"))
    )
    kept = frozenset() if "*" in disabled else from_multi - disabled
    return kept | frozenset(enabled), enabled


def _listed(plugin_set: Mapping[str, Any], path: str) -> str:
    """An extension point's entries as "enabled: A, B; disabled: C" ("" when it has none)."""
    parts = []
    for kind in ("enabled", "disabled"):
        where = f"{path}.{kind}"
        names = [_plugin_name(p, f"{where}[{i}]") for i, p in enumerate(apidata.items(plugin_set, kind, where))]
        if names:
            parts.append(f"{kind}: {', '.join(names)}")
    return "; ".join(parts)


def _plugin_name(plugin: Any, path: str) -> str:
    expect(plugin, dict, path, "an object with a name")
    name = apidata.text(plugin, "name", f"{path}.name")
    if not name:
        raise ShapeError(f"{path}.name", "a plugin name", plugin.get("name"))
    return name


# ---------------------------------------------------------------------------------------------
# Plugin args


def _plugin_args(raw: Mapping[str, Any], path: str) -> dict[str, tuple[str, Mapping[str, Any]]]:
    """Each pluginConfig entry's args by plugin name, with its path; a name given twice is refused
    (validation.go validatePluginConfig, "Duplicate value"), and so is a field the plugin's args
    type does not have."""
    args: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for i, entry in enumerate(apidata.items(raw, "pluginConfig", path)):
        expect(entry, dict, f"{path}[{i}]", "an object with name and args")
        name = apidata.text(entry, "name", f"{path}[{i}].name")
        if name in args:
            raise InvalidValue(f"{path}[{i}].name", f"unique (it is also {args[name][0]})", name)
        where = f"{path}[{i}].args"
        found = apidata.obj(entry, "args", where)
        known = ARGS_FIELDS.get(name)
        extra = sorted(set(found) - known - TYPE_META) if known is not None else []
        if extra:
            raise InvalidValue(
                f"{where}.{extra[0]}",
                f"absent: {name}Args has no such field (kube-scheduler refuses unknown fields); its fields are "
                + ", ".join(sorted(known or ())),
                found[extra[0]],
            )
        args[name] = (where, found)
    return args


def _strategy(args: Mapping[str, Any], path: str) -> ScoringStrategy:
    """NodeResourcesFitArgs.scoringStrategy, defaulted (SetDefaults_NodeResourcesFitArgs: none is
    LeastAllocated over cpu and memory) and checked (ValidateNodeResourcesFitArgs)."""
    if args.get("scoringStrategy") is None:
        return ScoringStrategy()
    raw = apidata.obj(args, "scoringStrategy", f"{path}.scoringStrategy")
    path = f"{path}.scoringStrategy"
    kind = apidata.text(raw, "type", f"{path}.type")
    if kind not in STRATEGIES:
        raise SchedulerConfigError(f"{path}.type is {kind!r}; use one of {', '.join(STRATEGIES)}")
    resources = _resources(raw, "resources", f"{path}.resources") or ScoringStrategy().resources
    ratio_path = f"{path}.requestedToCapacityRatio"
    if kind != "RequestedToCapacityRatio":
        if raw.get("requestedToCapacityRatio") is not None:
            raise InvalidValue(ratio_path, f"absent for type {kind}", raw["requestedToCapacityRatio"])
        return ScoringStrategy(kind, resources, ())
    ratio = apidata.obj(raw, "requestedToCapacityRatio", ratio_path)
    return ScoringStrategy(kind, resources, _shape(apidata.items(ratio, "shape", f"{ratio_path}.shape"), ratio_path))


def _shape(points: list[Any], path: str) -> tuple[tuple[int, int], ...]:
    """requestedToCapacityRatio.shape (validation_pluginargs.go validateFunctionShape)."""
    where = f"{path}.shape"
    if not points:
        raise SchedulerConfigError(f"{where} must have at least one point")
    pairs = []
    for i, point in enumerate(points):
        expect(point, dict, f"{where}[{i}]", "an object with utilization and score")
        utilization = apidata.integer(point, "utilization", f"{where}[{i}].utilization")
        score = apidata.integer(point, "score", f"{where}[{i}].score")
        if not 0 <= utilization <= 100:
            raise InvalidValue(f"{where}[{i}].utilization", "in the range 0-100", utilization)
        if not 0 <= score <= MAX_SHAPE_SCORE:
            raise InvalidValue(f"{where}[{i}].score", f"in the range 0-{MAX_SHAPE_SCORE}", score)
        pairs.append((utilization, score))
    if any(a[0] >= b[0] for a, b in zip(pairs, pairs[1:], strict=False)):
        raise SchedulerConfigError(f"{where}: utilization values must increase from point to point")
    return tuple(pairs)


def _resources(raw: Mapping[str, Any], key: str, path: str) -> tuple[tuple[str, int], ...]:
    """A ResourceSpec list: a weight of 0 or none counts 1, any other must be 1-100."""
    out = []
    for i, entry in enumerate(apidata.items(raw, key, path)):
        expect(entry, dict, f"{path}[{i}]", "an object with name and weight")
        name = apidata.text(entry, "name", f"{path}[{i}].name")
        weight = apidata.integer(entry, "weight", f"{path}[{i}].weight") or 1
        if not 0 < weight <= MAX_RESOURCE_WEIGHT:
            raise InvalidValue(f"{path}[{i}].weight", f"in the range 1-{MAX_RESOURCE_WEIGHT}", weight)
        out.append((name, weight))
    return tuple(out)


def _balanced_resources(raw: Mapping[str, Any], path: str) -> tuple[tuple[str, int], ...]:
    """NodeResourcesBalancedAllocationArgs.resources: each once, each of weight 1
    (ValidateNodeResourcesBalancedAllocationArgs)."""
    resources = _resources(raw, "resources", path)
    seen: set[str] = set()
    for i, (name, weight) in enumerate(resources):
        if name in seen:
            raise InvalidValue(f"{path}[{i}].name", "named once", name)
        if weight != 1:
            raise InvalidValue(f"{path}[{i}].weight", "1", weight)
        seen.add(name)
    return resources


def _ignored(raw: Mapping[str, Any], path: str, key: str) -> frozenset[str]:
    """ignoredResources / ignoredResourceGroups: qualified names, a group without "/"."""
    path, groups = f"{path}.{key}", key == "ignoredResourceGroups"
    names = []
    for i, name in enumerate(apidata.items(raw, key, path)):
        expect(name, str, f"{path}[{i}]", "a resource name")
        if groups and "/" in name:
            raise InvalidValue(f"{path}[{i}]", "a resource group, without '/'", name)
        problems = is_qualified_name(name)
        if problems:
            raise InvalidValue(f"{path}[{i}]", f"a qualified name ({problems[0]})", name)
        names.append(name)
    return frozenset(names)


def _hard_weight(raw: Mapping[str, Any], path: str) -> int:
    """InterPodAffinityArgs.hardPodAffinityWeight: 1 when unset, else 0-100."""
    weight = apidata.integer(raw, "hardPodAffinityWeight", path, default=1)
    if not 0 <= weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
        raise InvalidValue(path, f"in the range 0-{MAX_HARD_POD_AFFINITY_WEIGHT}", weight)
    return weight


def _spread_defaults(raw: Mapping[str, Any], path: str) -> tuple[SpreadConstraint, ...] | None:
    """PodTopologySpreadArgs: None for defaultingType System (the default when unset), the
    defaultConstraints for List (ValidatePodTopologySpreadArgs: System takes no constraints; each
    has a maxSkew above 0, a topologyKey, a whenUnsatisfiable, no labelSelector, and no two share
    a topologyKey and whenUnsatisfiable)."""
    kind = apidata.text(raw, "defaultingType", f"{path}.defaultingType") or SYSTEM
    if kind not in (SYSTEM, LIST):
        raise InvalidValue(f"{path}.defaultingType", f"{SYSTEM} or {LIST}", kind)
    where = f"{path}.defaultConstraints"
    listed = apidata.items(raw, "defaultConstraints", where)
    if kind == SYSTEM:
        if listed:
            raise InvalidValue(f"{path}.defaultingType", f"{LIST} when defaultConstraints are given", kind)
        return None
    found: list[SpreadConstraint] = []
    for i, entry in enumerate(listed):
        constraint = spread_constraint(entry, f"{where}[{i}]")
        _check_default_constraint(entry, constraint, found, f"{where}[{i}]")
        found.append(constraint)
    return tuple(found)


def _check_default_constraint(
    raw: Mapping[str, Any], constraint: SpreadConstraint, before: list[SpreadConstraint], path: str
) -> None:
    if constraint.max_skew <= 0:
        raise InvalidValue(f"{path}.maxSkew", "above 0", constraint.max_skew)
    problems = is_qualified_name(constraint.topology_key)
    if problems:
        raise InvalidValue(f"{path}.topologyKey", f"a label key ({problems[0]})", constraint.topology_key)
    if constraint.when_unsatisfiable not in WHEN_UNSATISFIABLE:
        raise InvalidValue(f"{path}.whenUnsatisfiable", " or ".join(WHEN_UNSATISFIABLE), constraint.when_unsatisfiable)
    if raw.get("labelSelector") is not None:
        raise InvalidValue(
            f"{path}.labelSelector",
            "absent: the selector is each pod's Services' and controller's",
            raw["labelSelector"],
        )
    pair = (constraint.topology_key, constraint.when_unsatisfiable)
    if any((c.topology_key, c.when_unsatisfiable) == pair for c in before):
        raise InvalidValue(f"{path}.topologyKey", f"not repeated with {constraint.when_unsatisfiable}", pair[0])
