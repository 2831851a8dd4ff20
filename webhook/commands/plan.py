"""What `rebalance` plans from, read from a cluster: every node, every pod bound to a node and not
finished (one paginated list: the prediction for a replacement scores every node, so it needs what
each holds), the candidates' controllers (a get each: the pod template their replacement is made
from, and a ReplicaSet's Deployment or a Job's CronJob), the PodDisruptionBudgets, and the live
registration (`clusterread.read_registration`, whose Namespaces' labels pod affinity's namespaceSelectors
match too), and the Services of the candidates' namespaces (with the controllers, what
PodTopologySpread's default constraints spread a replacement by). Shared by `rebalance`, which
acts on the plan, and `status`, which counts the pods it would move. The replacements are scored
as the cluster's Kubernetes version scores (its /version: `scheduler.registry.default_profile`),
each with the profile of its schedulerName: the default profile for `default-scheduler` unless
the given scheduler configurations name it, and the profiles of those configurations
(`SchedulerProfiles`) for the others.

Each replacement is predicted as the API server would admit it (`_admission`): where the
credentials may create pods in its namespace (a SelfSubjectAccessReview) and `dry_run` is asked
for, by the API server's own dry-run create (`dryRun=All`: every admission plugin and mutating
webhook, this webhook included), one per distinct replacement, at most MAX_DRY_RUNS and
DRY_RUN_SECONDS; otherwise, and where a dry run fails, by `webhook.admitted`'s model, from the
namespaces' LimitRanges and the RuntimeClasses (listed; RBAC-forbidden: that step is not modelled,
and a note says so). The plan's notes say which was used.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook import admitted, evictability, evictions, owners, rebalance, scope, status
from webhook.apidata import ShapeError
from webhook.commands import clusterread
from webhook.documents import read_document
from webhook.kubeversion import KubeVersion
from webhook.names import DEFAULT_SCHEDULER
from webhook.owners import Owner
from webhook.policy import Policy
from webhook.scheduler.config import SchedulerConfigError, profiles
from webhook.scheduler.model import Profile
from webhook.scheduler.read import Selectors, selectors_from_api
from webhook.scheduler.registry import DEFAULT_PROFILE, default_profile, for_version

MAX_DRY_RUNS = 20  # replacements the API server admits in dry run per plan; the others are modelled
DRY_RUN_SECONDS = 30.0  # and no dry run starts after this long
MODELLED = (
    "defaults, LimitRanger's default requests and limits, Priority of the system classes, "
    "DefaultTolerationSeconds, RuntimeClass overhead and scheduling, matchLabelKeys and mismatchLabelKeys "
    "merged into pod affinity"
)


@dataclass(frozen=True)
class SchedulerProfiles:
    """The schedulers' profiles the operator gave (`rebalance --scheduler-config FILE`, each a
    KubeSchedulerConfiguration), by schedulerName, and the files they came from. kube-scheduler's
    configuration is no API object: a cluster does not say which profiles its schedulers run, so
    those of other schedulers than `default-scheduler` are known only from such files."""

    profiles: Mapping[str, Profile] = field(default_factory=dict)
    files: tuple[str, ...] = ()

    @classmethod
    def read(cls, paths: Sequence[str], error: type[Exception]) -> SchedulerProfiles:
        """The profiles of the files at `paths`; `error` (exit 2) names the file and the field of one
        that cannot be used, or a schedulerName two files both give."""
        found: dict[str, Profile] = {}
        where: dict[str, str] = {}
        for path in paths:
            try:
                read = profiles(read_document(path, "scheduler configuration", error))
            except SchedulerConfigError as err:
                raise error(f"scheduler configuration {path}: {err}") from None
            for name, profile in read.items():
                if name in found:
                    raise error(
                        f"scheduler configurations {where[name]} and {path} both have a profile of schedulerName "
                        f"{name!r}: give each scheduler's configuration once"
                    )
                found[name], where[name] = profile, path
        return cls(found, tuple(paths))

    def for_cluster(self, version: KubeVersion) -> dict[str, Profile]:
        """Every known profile as the cluster's version scores it; `default-scheduler`'s is
        kube-scheduler's default profile unless a file gives it."""
        known = {DEFAULT_SCHEDULER: DEFAULT_PROFILE, **self.profiles}
        return {name: for_version(profile, version) for name, profile in known.items()}

    def unknown(self) -> str:
        """What to do about a pod whose scheduler none of the files names."""
        if not self.files:
            return evictability.UNKNOWN_SCHEDULER
        names = ", ".join(sorted({DEFAULT_SCHEDULER, *self.profiles}))
        return (
            f"--scheduler-config {' '.join(self.files)} has no profile of that name (only {names}); "
            "give that scheduler's KubeSchedulerConfiguration with another --scheduler-config FILE"
        )


def read_plan(
    reader: clusterread.Reader,
    policy: Policy,
    options: rebalance.Options,
    schedulers: SchedulerProfiles | None = None,
    read: rebalance.Inventory | None = None,
    version: KubeVersion | None = None,
    dry_run: bool = False,
    history: evictions.History = evictions.NO_HISTORY,
) -> rebalance.Plan:
    """The plan for the cluster `reader` reads: every node, every bound pod, the candidates' owners,
    the registration; each replacement predicted with its scheduler's profile among `schedulers`.
    `status` asks it too, for how many pods would move now, passing the inventory it already
    folded every node and every bound pod into (`read`, of `policy` and `options`): those are not
    read again, and a list that expires is then the caller's to restart (it started `read`);
    `version`, the cluster's release when the caller read it already (else /version is read).
    `dry_run`: have the API server admit the replacements in dry run where RBAC allows it
    (`rebalance`; `status` only reads, and models them). `history`: the evictions `rebalance
    --apply` made before (`evictions.read`), whose wasted ones are not made again (`repeat`)."""
    schedulers = schedulers or SchedulerProfiles()
    if read is None:
        state, registration = reader.restarting(lambda: _state(reader, policy, options, history=history))
    else:
        state, registration = _state(reader, policy, options, read)
    controllers = _controllers(reader, state)
    found = {
        key: owners.top_owner(Owner(key[1], key[2]), obj)
        for key in state.owner_lookups()
        if isinstance(obj := controllers.get(key), dict)
    }
    budgets = _budgets(reader)
    selectors = _selectors(reader, state, controllers)
    _admission(reader, state, controllers, dry_run)
    version = version if version is not None else clusterread.release(reader, state.notes)
    return rebalance.plan(
        state,
        registration,
        controllers,
        found,
        profile=default_profile(version),
        budgets=budgets,
        selectors=selectors,
        profiles=schedulers.for_cluster(version),
        unknown_scheduler=schedulers.unknown(),
    )


def _selectors(
    reader: clusterread.Reader,
    state: rebalance.Inventory,
    controllers: dict[tuple[str, str, str], dict[str, Any] | str],
) -> Selectors:
    """The Services of the candidates' namespaces, and their controllers read for the plan: what
    PodTopologySpread's default constraints spread a replacement by. Services RBAC hides are left
    out, with a note: those replacements are then spread by their controller's selector only."""
    services = clusterread.services(reader, (p.namespace for p in state.pending), state.notes)
    objects = [{**obj, "kind": key[1]} for key, obj in controllers.items() if isinstance(obj, dict)]
    return selectors_from_api(services, objects)


def _admission(
    reader: clusterread.Reader,
    state: rebalance.Inventory,
    controllers: Mapping[tuple[str, str, str], dict[str, Any] | str],
    dry_run: bool,
) -> None:
    """How the replacements are admitted: the LimitRanges and RuntimeClasses the model reads, and
    with `dry_run` the API server's own answers where RBAC allows them; a note says which."""
    pods = state.replacement_pods(controllers)
    if not pods:
        return
    state.admission = admitted.Objects.of(
        _listed(reader, "LimitRange", state.notes, "replacements are predicted without LimitRanger's defaults"),
        _listed(reader, "RuntimeClass", state.notes, "a replacement's RuntimeClass is not modelled"),
    )
    answered: dict[bytes, rebalance.DryRun] = {}
    why = "dry runs are not asked for (status only reads)"
    if dry_run:
        answered, why = _dry_runs(reader, pods, state.notes)
        state.dry_runs = answered
    if len(answered) == len(pods):
        state.notes.append(
            "replacements are predicted as the API server admits them: a dry-run create (dryRun=All) runs every "
            "admission plugin and mutating webhook"
        )
    else:
        done = f"{len(answered)} of {len(pods)} by the API server's dry run, the others" if answered else "all"
        state.notes.append(f"replacements are predicted as admitted by the model ({done}: {MODELLED}): {why}")


def _listed(reader: clusterread.Reader, kind: str, notes: list[str], unread: str) -> list[dict[str, Any]] | None:
    """Every object of `kind` (in every namespace), or None with a note when RBAC forbids it."""
    found = reader.restarting(lambda: clusterread.listed(reader, kind))
    if isinstance(found, status.Unknown):
        notes.append(f"cannot list {kind}s (forbidden by RBAC): {unread}")
        return None
    return found


def _dry_runs(
    reader: clusterread.Reader, pods: Mapping[bytes, dict[str, Any]], notes: list[str]
) -> tuple[dict[bytes, rebalance.DryRun], str]:
    """The API server's dry-run answer for each replacement in a namespace where the credentials
    may create pods, in plan order, at most MAX_DRY_RUNS and none started after DRY_RUN_SECONDS;
    and why the others are modelled. A refusal (403 from an admission plugin or webhook once RBAC
    allowed it, 422) is the answer: the controller's create would be refused too. Any other failure
    leaves that replacement to the model, with a note."""
    answers: dict[bytes, rebalance.DryRun] = {}
    allowed: dict[str, bool] = {}
    deadline = time.monotonic() + DRY_RUN_SECONDS
    why: list[str] = []
    for key, pod in pods.items():
        namespace = str(pod["metadata"]["namespace"])
        if len(answers) >= MAX_DRY_RUNS or time.monotonic() > deadline:
            why.append(f"at most {MAX_DRY_RUNS} dry runs in {DRY_RUN_SECONDS:g} s are asked")
            break
        if namespace not in allowed:
            try:
                allowed[namespace] = clusterread.may_create_pods(reader, namespace)
            except clusterread.ClusterError:
                allowed[namespace] = False
        if not allowed[namespace]:
            why.append(f"RBAC does not let these credentials create pods in namespace {namespace} (a dry run is one)")
            continue
        meta = pod["metadata"]
        # an ownerReference needs its owner's uid (a controller read from the API server has one)
        refs = [r for r in meta.get("ownerReferences") or () if r.get("uid")]
        sent = {**pod, "metadata": {**meta, "ownerReferences": refs}}
        try:
            answers[key] = rebalance.DryRun(clusterread.admitted_pod(reader, namespace, sent))
        except (clusterread.Forbidden, clusterread.Invalid) as err:
            answers[key] = rebalance.DryRun(refused=err.detail or str(err))
        except clusterread.ClusterError as err:
            notes.append(f"the dry run of a replacement in namespace {namespace} failed ({err.detail or err})")
            why.append("a dry run failed")
    said = "; ".join(dict.fromkeys(why))
    if any("RBAC" in w for w in why):
        said += "; granting create on pods lets the API server answer (docs/operations.md, Rebalancing)"
    return answers, said


def _state(
    reader: clusterread.Reader,
    policy: Policy,
    options: rebalance.Options,
    read: rebalance.Inventory | None = None,
    history: evictions.History = evictions.NO_HISTORY,
) -> tuple[rebalance.Inventory, scope.Registration]:
    """The registration, every node and every bound pod, read into a new state (a restart after
    a list expired between two pages starts from an empty one), or into `read`, which holds every
    node and bound pod already."""
    state = read or rebalance.Inventory(policy, options, history=history)
    try:
        live = clusterread.read_registration(reader)
        if live.namespaces is not None and options.webhook_namespace not in live.namespaces:
            state.notes.append(
                f"namespace {options.webhook_namespace} (--webhook-namespace) does not exist: no webhook runs there; "
                "name the namespace it runs in"
            )
        registration = scope.Registration.read(live)
        if live.namespaces is not None:  # pod affinity's namespaceSelectors match their labels too
            state.add_namespaces(live.namespaces)
        if read is None:
            for node in clusterread.nodes(reader):
                state.add_node(node)
            for pod in clusterread.bound_pods(reader):
                state.add_pod(pod)
        for pod in clusterread.unbound_pods(reader):
            state.add_unbound_pod(pod)
    except ShapeError as err:  # no API server stores such an object: a proxy or a stand-in sent it
        raise clusterread.ClusterError(
            f"the API server at {reader.cluster.host} sent an object no Kubernetes stores: {err}"
        ) from None
    return state, registration


def _budgets(reader: clusterread.Reader) -> evictability.Budgets | None:
    found = clusterread.budgets(reader)
    return None if isinstance(found, status.Unknown) else evictability.Budgets(found)


def _controllers(
    reader: clusterread.Reader, state: rebalance.Inventory
) -> dict[tuple[str, str, str], dict[str, Any] | str]:
    """Each candidate's controller (its pod template; a ReplicaSet's or Job's own controller), or
    why it could not be read (`clusterread.controllers`)."""
    found: dict[tuple[str, str, str], dict[str, Any] | str] = {}
    hidden: set[str] = set()
    read = clusterread.controllers(reader, state.controller_lookups() | state.owner_lookups())
    for (namespace, kind, name), obj in read.items():
        if isinstance(obj, status.Unknown):
            found[(namespace, kind, name)] = "forbidden by RBAC"
            hidden.add(kind)
        else:
            found[(namespace, kind, name)] = obj if obj is not None else "it no longer exists"
    for kind in sorted(hidden):
        state.notes.append(
            f"cannot read {kind}s (forbidden by RBAC): their pods' replacements cannot be predicted, and are "
            "not evicted"
        )
    return found
