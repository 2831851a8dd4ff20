"""Which pods `rebalance` may evict: a list of small named constraints, each a pure function that
answers with the reason a pod is never evicted ("" when it allows it), judged in order and the
first reason reported, as the descheduler's DefaultEvictor composes its constraints
(kubernetes-sigs/descheduler, pkg/framework/plugins/defaultevictor/defaultevictor.go,
`addAllConstraints` and `applyEffectivePodProtections`, and constraints.go; commit 0127a7bb).

The constraints (`CONSTRAINTS`), and where each follows the descheduler:

- `terminating`: a pod being deleted (`IsPodTerminating`);
- `mirror`: the mirror of a static pod: the kubelet runs it from a file (`IsMirrorPod`);
- `no-controller`: nothing would re-create it (the FailedBarePods protection);
- `daemonset`: its replacement is bound to the same node (the DaemonSetPods protection);
- `priority`: system-critical priority, `spec.priority` >= 2000000000 (`utils.IsCriticalPriorityPod`
  with `SystemCriticalPriority`, the SystemCriticalPods protection) or priorityClassName
  system-cluster-critical / system-node-critical, which the API server's Priority admission
  resolves to such a priority (a pod read from a file may lack `spec.priority`);
- `scope`: the live registration would not call the webhook for its replacement (the
  MutatingWebhookConfiguration's or bound admission policies' namespaceSelector, objectSelector and
  matchConditions, and whether any is active: `webhook.scope`), so it would come back without the
  terms, and be evicted again on every run: the descheduler's namespace and label filters, read
  from the webhook's own registration;
- `local-storage`: an emptyDir or hostPath volume is lost on eviction (the PodsWithLocalStorage
  protection; `--include-local-storage` lifts it);
- `min-age`: younger than `--min-age` (`evictionConstraintsForMinPodAge`);
- `replicas`: its controller has fewer ready pods than `--min-replicas`
  (`evictionConstraintsForMinReplicas`);
- `scheduler`: its replacement is scheduled by a scheduler whose profile is not known (the
  default scheduler's is; others' come from `rebalance --scheduler-config`), or whose profile
  runs a Score plugin not evaluated here: where it would land is not known. A replacement of a
  known profile is predicted with that profile's plugins and weights;
- `pdb`: a PodDisruptionBudget that selects it allows no disruption now (its
  `status.disruptionsAllowed`, less the evictions planned before it in this run), or is still being
  processed, or more than one selects it (the Eviction API refuses those): planned as blocked, and
  no room is reserved for it. The descheduler leaves this to the Eviction API's 429; reading the
  budgets first keeps a blocked pod from taking a fast node's room in the plan.

`rebalance` adds its own after these (see `webhook.rebalance`): the replacement the webhook would
make, PodDisruptionBudgets, one pod per owner, the prediction. `rebalance --missing` judges by
`MISSING_CONSTRAINTS`: all of these but `scheduler` (its prediction is information only).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from webhook import apidata, owners
from webhook.names import DEFAULT_SCHEDULER
from webhook.owners import Owner
from webhook.selector import LabelSelector, label_selector_from_api

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"  # set by the kubelet on a static pod's mirror
# k8s.io/api/scheduling/v1 (v1.36.3): SystemCriticalPriority = 2 * HighestUserDefinablePriority,
# and the two classes the API server creates with it (system-node-critical one more).
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
SYSTEM_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")
LOCAL_VOLUMES = ("emptyDir", "hostPath")
DEFAULT_MIN_REPLICAS = 2
DEFAULT_MIN_AGE = dt.timedelta(minutes=10)
UNKNOWN_SCHEDULER = "give that scheduler's KubeSchedulerConfiguration with --scheduler-config FILE"


@dataclass(frozen=True)
class Options:
    now: dt.datetime
    min_replicas: int = DEFAULT_MIN_REPLICAS
    min_age: dt.timedelta = DEFAULT_MIN_AGE
    include_local_storage: bool = False


@dataclass(frozen=True)
class Facts:
    """What the constraints read of one pod, taken from its API object once, as pods stream by."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    terminating: bool
    mirror: bool
    controller: Owner | None
    priority: int | None  # spec.priority; None when unset
    priority_class: str
    local_volume: str  # "emptyDir volume NAME" or ""
    created: str  # RFC 3339
    scheduler_name: str = DEFAULT_SCHEDULER  # the replacement's (its controller's template's, once read)
    replacement_labels: Mapping[str, str] | None = None  # the replacement's labels, once its template is read

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> Facts:
        meta, spec = apidata.obj(pod, "metadata", "metadata"), apidata.obj(pod, "spec", "spec")
        annotations = apidata.string_map(meta, "annotations", "metadata.annotations")
        priority = spec.get("priority")
        return cls(
            namespace=apidata.text(meta, "namespace", "metadata.namespace"),
            name=apidata.text(meta, "name", "metadata.name"),
            labels=apidata.string_map(meta, "labels", "metadata.labels"),
            terminating=meta.get("deletionTimestamp") is not None,
            mirror=MIRROR_ANNOTATION in annotations,
            controller=owners.controller_of(pod),
            priority=None if priority is None else apidata.integer(spec, "priority", "spec.priority"),
            priority_class=apidata.text(spec, "priorityClassName", "spec.priorityClassName"),
            local_volume=_local_volume(spec),
            created=apidata.text(meta, "creationTimestamp", "metadata.creationTimestamp"),
            scheduler_name=apidata.text(spec, "schedulerName", "spec.schedulerName") or DEFAULT_SCHEDULER,
        )


@dataclass(frozen=True)
class Context:
    """What the constraints read beyond the pod: the options, the ready pods per controller uid, and
    the registration's scope (namespace, labels of the replacement -> why the API server would not
    call the webhook for it, "" when it would: `scope.Registration.why_not_called`)."""

    options: Options
    ready: Mapping[str, int]
    scope: Callable[[str, Mapping[str, str]], str]
    budgets: Budgets | None = None  # None: the PodDisruptionBudgets could not be read
    # schedulerName -> "" when the prediction knows its profile and can evaluate it, else why not
    schedulers: Mapping[str, str] = field(default_factory=lambda: {DEFAULT_SCHEDULER: ""})
    unknown_scheduler: str = UNKNOWN_SCHEDULER  # what to do for a scheduler not in `schedulers`


class Constraint(NamedTuple):
    name: str
    check: Callable[[Facts, Context], str]  # the reason the pod is never evicted, "" when allowed


class Verdict(NamedTuple):
    constraint: str
    reason: str


def terminating(pod: Facts, _: Context) -> str:
    return "terminating" if pod.terminating else ""


def mirror(pod: Facts, _: Context) -> str:
    if pod.mirror:
        return "a mirror pod of a static pod: the kubelet runs it from a file, the API cannot move it"
    return ""


def no_controller(pod: Facts, _: Context) -> str:
    return "" if pod.controller is not None else "no controller: nothing would re-create it after an eviction"


def daemonset(pod: Facts, _: Context) -> str:
    if pod.controller is not None and pod.controller.kind == "DaemonSet":
        return f"a DaemonSet pod ({pod.controller}): its replacement is bound to the same node"
    return ""


def priority(pod: Facts, _: Context) -> str:
    critical = pod.priority is not None and pod.priority >= SYSTEM_CRITICAL_PRIORITY
    if not critical and pod.priority_class not in SYSTEM_PRIORITY_CLASSES:
        return ""
    named = ", ".join(str(p) for p in (pod.priority, pod.priority_class) if p not in (None, ""))
    return f"system-critical priority ({named}): never evicted, as the descheduler protects such pods"


def local_storage(pod: Facts, context: Context) -> str:
    if pod.local_volume and not context.options.include_local_storage:
        return f"uses {pod.local_volume}, lost on eviction (--include-local-storage moves it anyway)"
    return ""


def min_age(pod: Facts, context: Context) -> str:
    options = context.options
    age = _age(pod.created, options.now)
    if age is not None and age < options.min_age:
        return f"created {duration(age)} ago, less than --min-age {duration(options.min_age)}"
    return ""


def replicas(pod: Facts, context: Context) -> str:
    controller, wanted = pod.controller, context.options.min_replicas
    if controller is None:
        return ""
    ready = context.ready.get(controller.uid, 0)
    if ready < wanted:
        return f"its {controller.kind} {controller.name} has {ready} ready pod(s), fewer than --min-replicas {wanted}"
    return ""


def scope(pod: Facts, context: Context) -> str:
    labels = pod.replacement_labels if pod.replacement_labels is not None else pod.labels
    why = context.scope(pod.namespace, labels)
    return f"its replacement would not be mutated: {why}" if why else ""


def scheduler(pod: Facts, context: Context) -> str:
    why = context.schedulers.get(pod.scheduler_name)
    if why is None:
        return (
            f"its replacement is scheduled by {pod.scheduler_name}, whose profile is not known: where it would land "
            f"cannot be predicted; {context.unknown_scheduler}"
        )
    return f"its replacement is scheduled by {pod.scheduler_name}: {why}" if why else ""


def disruption_budget(pod: Facts, context: Context) -> str:
    if context.budgets is None:
        return ""
    found = context.budgets.selecting(pod)
    if len(found) > 1:
        names = ", ".join(b.name for b in found)
        return f"more than one PodDisruptionBudget selects it ({names}): the Eviction API refuses to evict such a pod"
    for budget in found:
        if budget.processing:
            return f"blocked: PodDisruptionBudget {budget.name} is still being processed by the disruption controller"
        if budget.allowed <= 0:
            return f"blocked: PodDisruptionBudget {budget.name} allows no disruption now ({budget.allowed} allowed)"
    return ""


CONSTRAINTS: tuple[Constraint, ...] = (
    Constraint("terminating", terminating),
    Constraint("mirror", mirror),
    Constraint("no-controller", no_controller),
    Constraint("daemonset", daemonset),
    Constraint("priority", priority),
    Constraint("scope", scope),
    Constraint("local-storage", local_storage),
    Constraint("min-age", min_age),
    Constraint("replicas", replicas),
    Constraint("scheduler", scheduler),
    Constraint("pdb", disruption_budget),
)
# `rebalance --missing` recreates a pod for the preference its replacement gets, wherever that
# lands: where it lands is information, not a condition, so a scheduler whose profile is not
# known keeps no pod. Every other constraint holds.
MISSING_CONSTRAINTS: tuple[Constraint, ...] = tuple(c for c in CONSTRAINTS if c.name != "scheduler")


@dataclass
class Budget:
    """A PodDisruptionBudget as the Eviction API checks it (pkg/registry/core/pod/storage/eviction.go,
    v1.36.3): the pods its selector selects in its namespace, and the disruptions it allows now."""

    namespace: str
    name: str
    selector: LabelSelector | None  # None (no selector) selects no pod
    allowed: int  # status.disruptionsAllowed, less the evictions planned in this run
    processing: bool  # status.observedGeneration behind metadata.generation: the API server answers 429

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Budget:
        meta, spec, status = (apidata.obj(obj, key, key) for key in ("metadata", "spec", "status"))
        raw = spec.get("selector")
        return cls(
            namespace=apidata.text(meta, "namespace", "metadata.namespace"),
            name=apidata.text(meta, "name", "metadata.name"),
            selector=None if raw is None else label_selector_from_api(raw, "spec.selector"),
            allowed=apidata.integer(status, "disruptionsAllowed", "status.disruptionsAllowed"),
            processing=apidata.integer(status, "observedGeneration", "status.observedGeneration")
            < apidata.integer(meta, "generation", "metadata.generation"),
        )


class Budgets:
    """The cluster's PodDisruptionBudgets during planning: each planned eviction takes one
    disruption from the budgets that select the pod, so the next pod they cover is blocked once
    none is left, as the Eviction API would answer."""

    def __init__(self, objs: Iterable[Mapping[str, Any]]) -> None:
        self._by_namespace: dict[str, list[Budget]] = {}
        for obj in objs:
            budget = Budget.of(obj)
            self._by_namespace.setdefault(budget.namespace, []).append(budget)

    def selecting(self, pod: Facts) -> list[Budget]:
        return [
            b
            for b in self._by_namespace.get(pod.namespace, ())
            if b.selector is not None and b.selector.matches(pod.labels)
        ]

    def take(self, pod: Facts) -> None:
        for budget in self.selecting(pod):
            budget.allowed -= 1


def judge(pod: Facts, context: Context, constraints: tuple[Constraint, ...] = CONSTRAINTS) -> Verdict | None:
    """The first constraint that protects the pod, and its reason; None when every one allows it."""
    for constraint in constraints:
        reason = constraint.check(pod, context)
        if reason:
            return Verdict(constraint.name, reason)
    return None


# ---------------------------------------------------------------------------------------------
# Small readers


def _local_volume(spec: Mapping[str, Any]) -> str:
    for volume in apidata.items(spec, "volumes", "spec.volumes"):
        if isinstance(volume, Mapping):
            for kind in LOCAL_VOLUMES:
                if volume.get(kind) is not None:
                    return f"{kind} volume {volume.get('name')}"
    return ""


def _age(created: str, now: dt.datetime) -> dt.timedelta | None:
    try:
        when = dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return now - when


def duration(delta: dt.timedelta) -> str:
    """Like Go's time.Duration.String, to the second: 1h2m3s, 10m0s, 45s."""
    seconds = max(int(delta.total_seconds()), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
