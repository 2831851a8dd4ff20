"""`status`'s second and third questions: which selected pods have the preference, and where
they run (pure).

Coverage: each selected pod in an admitted namespace is classified by `webhook.policy.evaluate`,
the decision `/mutate` makes, never a second copy of the rules: terms already there (`injected`),
the pod's own affinity uses the rule's keys (`explicit`), `opted_out`, or the webhook would add
terms now (`missing`: the pod was created without the preference); a pod mutated under an earlier
policy, whose terms are in the way of the current ones or not them (`policy.injected_earlier`), is
`injected_earlier` instead of `explicit` or `missing`. A namespace is admitted by the
rule's registered entry's namespaceSelector, else its bound admission policy's, else the one
`webhook.manifests` ships: coverage counts the pods the policy means to cover even while the
registration is broken (which `webhook.status.registration` reports), so such pods show up as
`missing`.

Placement: the class of each selected pod's node by its rule's target (`placement.by_rule`: the
best class of its rule's own table, `net=high` by default; the class names stay "high", "low", ...
whatever the key: they are `status -o json`'s keys); for a pod not on a node of its target while
one exists, why: `webhook.placement`,
which ranks as `explain` does, given what the pods bound to the target nodes already take
(NodeResourcesFit, NodePorts), with the Filter plugins of the profile of the pod's
`spec.schedulerName`: a profile of `ClusterView.profiles` (`status --scheduler-config`), else
kube-scheduler's default profile, which for a pod of another scheduler is a guess the reasons say;
each as the cluster's release runs it (`ClusterView.version`).

Owners: the command reads what `owner_lookups` names, `with_owners` climbs one level.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook import apidata, owners, placement
from webhook.apidata import ShapeError
from webhook.names import DEFAULT_SCHEDULER, NAMESPACE_NAME_LABEL, WEBHOOK_DOMAIN
from webhook.policy import Decision, Rule, evaluate, injected_earlier
from webhook.scheduler.model import NodeUsage, Profile, Target
from webhook.scheduler.registry import DEFAULT_PROFILE
from webhook.selector import LabelSelector, label_selector_from_api
from webhook.status.model import (
    ClusterView,
    MissingPod,
    ObjectJSON,
    OffHigh,
    PodsOnNodes,
    Read,
    Registered,
    Report,
    Unknown,
)

COVERAGE = {
    Decision.UNCHANGED: "injected",
    Decision.SKIPPED_EXPLICIT: "explicit",
    Decision.SKIPPED_OPT_OUT: "opted_out",
    Decision.MUTATED: "missing",
}
# A pod the webhook mutated under an earlier policy (`policy.injected_earlier`): its terms are not
# the current ones, its replacement gets those.
EARLIER = "injected_earlier"


def check(view: ClusterView, report: Report, registered: Registered) -> None:
    """Classify the selected pods and where they run, into `report`."""
    nodes = None
    report.target = placement.Classes.of(view.policy).target
    classes_of = placement.by_rule(view.policy)
    if isinstance(view.nodes, Unknown):
        report.note_unknown(view.nodes)
    else:
        by_classes = placement.read_nodes_by_classes(view.nodes, placement.every_classes(view.policy))
        nodes = _Placement(by_classes, view.pods_on_nodes, view.profiles, view.unknown_scheduler)
        report.high_nodes = len({n.name for of in by_classes.values() for n in of.high})
    if view.pods_namespace is not None and not view.namespace_exists(view.pods_namespace):
        report.problems.append(
            f"namespace {view.pods_namespace} (-n) does not exist: it has no pods to check (kubectl get namespaces)"
        )
    if isinstance(view.pods, Unknown):
        report.note_unknown(view.pods)
        report.pods_unknown = True
        return
    admits = _namespace_admission(view, registered, report)
    for pod in view.pods:
        meta = apidata.obj(pod, "metadata", "metadata")
        if meta.get("deletionTimestamp") is not None:
            continue  # terminating (an evicted pod, among others): its replacement is what counts
        namespace = apidata.text(meta, "namespace", "metadata.namespace")
        labels = apidata.string_map(meta, "labels", "metadata.labels")
        if not any(r.pod_selector.matches(labels) and admits(r, namespace) for r in view.policy.rules):
            continue
        outcome = evaluate(view.policy, pod)
        coverage = EARLIER if injected_earlier(view.policy, pod, outcome) else COVERAGE.get(outcome.decision)
        if coverage is None:  # INVALID or ERROR: the webhook leaves such a pod alone
            report.problems.append(f"pod {namespace}/{meta.get('name')}: {'; '.join(outcome.warnings)}")
            continue
        report.pods["selected"] += 1
        report.pods[coverage] += 1
        if coverage == "missing":
            name, created = apidata.text(meta, "name", "metadata.name"), apidata.text(meta, "creationTimestamp", "")
            controller = owners.controller_of(pod)
            report.missing.append(MissingPod(namespace, name, str(controller) if controller else None, created))
        if nodes is not None:
            nodes.place(pod, classes_of(labels), report)
        elif not apidata.text(apidata.obj(pod, "spec", "spec"), "nodeName", "spec.nodeName"):
            report.placement["pending"] += 1  # no node to read: a pending pod is pending all the same
    for target in nodes.unplaceable() if nodes is not None else ():
        report.problems.append(
            f"no node is labelled {target}: selected pods cannot be placed on a fast network; "
            f"label the fast-network nodes (kubectl label node NAME {_one_label(target)})"
        )


@dataclass
class _Placement:
    """The nodes classed by each rule's table (`placement.by_rule`), and why pods are not on
    their rule's target: the pods on the target nodes are read on the first pod that needs them
    (none may)."""

    nodes: Mapping[placement.Classes, placement.Nodes]
    pods_on_nodes: PodsOnNodes
    profiles: Mapping[str, Profile]  # by schedulerName
    unknown_scheduler: str  # what to do for a pod whose scheduler has no profile there
    usage: Mapping[str, NodeUsage] | None | Unknown = None  # None: not read yet
    # by schedulerName and the target judged against
    why_not_high: dict[tuple[str, Target], placement.WhyNotHigh] = field(default_factory=dict)
    placed: set[Target] = field(default_factory=set)  # the targets of the pods placed

    def unplaceable(self) -> list[Target]:
        """The targets of placed pods that no node carries."""
        return [c.target for c, nodes in self.nodes.items() if c.target in self.placed and not nodes.high]

    def place(self, pod: Mapping[str, Any], classes: placement.Classes, report: Report) -> None:
        meta, spec = apidata.obj(pod, "metadata", "metadata"), apidata.obj(pod, "spec", "spec")
        nodes = self.nodes[classes]
        target = classes.target
        self.placed.add(target)
        node = apidata.text(spec, "nodeName", "spec.nodeName")
        net = nodes.net.get(node) if node else None
        net_class = nodes.net_class(node)
        report.placement[net_class] += 1
        if net_class == "high" or not nodes.high:
            return
        scheduler = apidata.text(spec, "schedulerName", "spec.schedulerName") or DEFAULT_SCHEDULER
        why = self._why_not_high(report, scheduler, nodes)(pod)
        if not node and why == (placement.feasible_now(target),):
            why = (placement.feasible_pending(target),)
        if scheduler != DEFAULT_SCHEDULER and scheduler not in self.profiles:
            why += (
                f"judged by kube-scheduler's default profile: the profile of the pod's scheduler, {scheduler}, is "
                f"not known; {self.unknown_scheduler}",
            )
        namespace, name = (
            apidata.text(meta, "namespace", "metadata.namespace"),
            apidata.text(meta, "name", "metadata.name"),
        )
        report.not_on_high.append(OffHigh(namespace, name, node, net, why, target))

    def _why_not_high(self, report: Report, scheduler: str, nodes: placement.Nodes) -> placement.WhyNotHigh:
        """The judge of `scheduler`'s pods against `nodes`' target; the pods on every target's
        nodes are read for the first."""
        target = nodes.classes.target
        judge = self.why_not_high.get((scheduler, target))
        if judge is None:
            if self.usage is None:
                high = list({n.name: n for of in self.nodes.values() for n in of.high}.values())
                pods = self.pods_on_nodes([n.name for n in high], len(nodes.net))
                if isinstance(pods, Unknown):
                    report.note_unknown(pods)
                    self.usage = pods
                else:
                    self.usage = placement.high_usage(pods, high)
            usage = None if isinstance(self.usage, Unknown) else self.usage
            profile = self.profiles.get(scheduler) or self.profiles.get(DEFAULT_SCHEDULER, DEFAULT_PROFILE)
            judge = placement.WhyNotHigh(nodes.high, usage, target, profile)
            self.why_not_high[(scheduler, target)] = judge
        return judge


def _one_label(target: Target) -> str:
    """A `kubectl label` argument that puts a node among `target`'s: key=value (the first value)."""
    return f"{target.key}={min(target.values)}"


def _namespace_admission(view: ClusterView, registered: Registered, report: Report) -> Callable[[Rule, str], bool]:
    """rule, namespace -> whether the API server would mutate the rule's pods there: the rule's
    registered entry's namespaceSelector, else its bound admission policy's, else the shipped one."""
    by_name = {w["name"]: w for w in registered.shipped}
    for rule_name, obj in registered.policies.items():
        constraints = apidata.obj(apidata.obj(obj, "spec", "spec"), "matchConstraints", "spec.matchConstraints")
        by_name[f"{rule_name}.{WEBHOOK_DOMAIN}"] = constraints
    by_name.update({w["name"]: w for w in registered.entries})
    selectors: dict[str, LabelSelector] = {}
    for rule in view.policy.rules:
        entry = by_name.get(f"{rule.name}.{WEBHOOK_DOMAIN}")
        raw = entry.get("namespaceSelector") if entry is not None else None
        try:
            selectors[rule.name] = label_selector_from_api(raw, "namespaceSelector")
        except ShapeError as err:
            report.problems.append(f"webhook entry {rule.name}.{WEBHOOK_DOMAIN}: {err}")
            selectors[rule.name] = LabelSelector()
    namespaces = view.namespaces
    known: Mapping[str, Mapping[str, str]] = {}
    if isinstance(namespaces, Unknown):
        report.note_unknown(namespaces)
    else:
        known = namespaces

    def admits(rule: Rule, namespace: str) -> bool:
        # Every namespace carries its name as a label (Kubernetes 1.21+): enough without list rights.
        labels = known.get(namespace) or {NAMESPACE_NAME_LABEL: namespace}
        return selectors[rule.name].matches(labels)

    return admits


def owner_lookups(report: Report) -> set[tuple[str, str, str]]:
    """(namespace, kind, name) of each controller that may itself be owned (ReplicaSet, Job)."""
    out = set()
    for pod in report.missing:
        if pod.owner:
            controller = owners.parse(pod.owner)
            if owners.climbs(controller):
                out.add((pod.namespace, controller.kind, controller.name))
    return out


def with_plan(report: Report, placements: Mapping[tuple[str, str], tuple[str, ...]]) -> None:
    """Correct the placement of each pod `placement.WhyNotHigh` found a net=high node feasible for
    where the rebalance plan says otherwise of its replacement (`placements`: (namespace, name) ->
    what it says): the plan judges by every Filter plugin over every node's pods, where the cheaper
    judge reads the pods of the target nodes alone and so leaves out the plugins that read the
    whole cluster (PodTopologySpread, InterPodAffinity); and it weighs how often the scheduler's
    sample of nodes holds a target node. Status then says what rebalance says."""
    if not placements:
        return
    report.not_on_high = [
        dataclasses.replace(p, why=placements[(p.namespace, p.name)])
        if could_fit(p) and placements.get((p.namespace, p.name))
        else p
        for p in report.not_on_high
    ]


def could_fit(pod: OffHigh) -> bool:
    """Whether status's own judge found a node of the pod's target feasible for it."""
    return pod.why in ((placement.feasible_now(pod.target),), (placement.feasible_without_usage(pod.target),))


def with_owners(report: Report, found: Mapping[tuple[str, str, str], Read[ObjectJSON]]) -> None:
    """Replace each missing pod's controller by its top owner, from the objects `found` read."""
    top: dict[tuple[str, str, str], str] = {}
    for (namespace, kind, name), obj in found.items():
        if isinstance(obj, Mapping):
            top[(namespace, kind, name)] = str(owners.top_owner(owners.Owner(kind, name), obj))
    report.missing = [
        dataclasses.replace(p, owner=top.get((p.namespace, *p.owner.partition("/")[::2]), p.owner)) if p.owner else p
        for p in report.missing
    ]
