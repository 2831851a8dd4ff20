"""Placement: which class each node is, and why a pod is not on a node of its target: the best
class of the rule that places it (`by_rule`, `netqos.rule_target`: the key of that rule's score
table and its top-scoring values, `net=high` by default), each rule against its own. Pure.

The classes keep the NetQoS plugin's names whatever the policy's key, since `status -o json`'s
keys are an API: "high" (a target node), "low" (the table's lowest-scoring values, below the
unlisted ones: `netqos.slow_values`), "other" (any other value), "unlabelled" (no such label),
"pending" (bound to no node).

`status` asks it for every selected pod off the fast network; a command that moves such pods
asks the same question. The answer is `webhook.scheduler.cycle`'s, exactly as `explain` ranks nodes:
the filter reasons of every `net=high` node for the pod as if it were scheduled again, given what
the pods bound to those nodes already take (NodeResourcesFit, NodePorts; `high_usage` folds them
one pod at a time, so memory holds one tally per high node, never the pods). The Filter plugins
that read every node's pods (PodTopologySpread, InterPodAffinity: `framework.Reads.CLUSTER`) are
not run here, since only the pods of the `net=high` nodes are read; `status`'s count of pods that
would move comes from the rebalance plan, which runs them, and where that plan finds that no
`net=high` node passes them for a pod called feasible here, status gives the plan's reasons
instead (`status.with_unfit`): the two commands never disagree on a pod.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook import apidata
from webhook.apidata import ShapeError
from webhook.policy import Policy, Rule
from webhook.scheduler import cycle, keys, read
from webhook.scheduler.model import EMPTY_USAGE, Node, NodeUsage, PodInfo, Profile, Target
from webhook.scheduler.plugins.netqos import (
    NETQOS_SLOW,
    NETQOS_TARGET,
    fast_target,
    judging_rule,
    rule_slow_values,
    rule_target,
    slow_values,
)
from webhook.scheduler.registry import DEFAULT_PROFILE

# The class names are `status -o json`'s keys (an API): named after the default policy's values.
NET_CLASSES = ("high", "other", "unlabelled", "low", "pending")


def feasible_now(target: Target) -> str:
    return (
        f"a {target} node is feasible now: the pod was placed when none was, "
        "or other score plugins outweighed the preference (run explain)"
    )


def feasible_without_usage(target: Target) -> str:
    return (
        f"a {target} node passes the filters that do not depend on the pods on it "
        f"(resource fit and host ports not evaluated: the pods on {target} nodes could not be read)"
    )


def feasible_pending(target: Target) -> str:
    return (
        f"a {target} node is feasible now: the scheduler has not bound the pod yet "
        "(kubectl describe pod shows its FailedScheduling events)"
    )


# The default policy's texts (net=high).
FEASIBLE_NOW = feasible_now(NETQOS_TARGET)
FEASIBLE_WITHOUT_USAGE = feasible_without_usage(NETQOS_TARGET)
FEASIBLE_PENDING = feasible_pending(NETQOS_TARGET)


@dataclass(frozen=True)
class Classes:
    """How nodes are classed: by the target's key, "high" for its values, "low" for `low`'s."""

    target: Target
    low: frozenset[str]

    @classmethod
    def of(cls, policy: Policy) -> Classes:
        return cls(fast_target(policy), slow_values(policy))

    @classmethod
    def of_rule(cls, policy: Policy, rule: Rule | None) -> Classes:
        """The classes of `rule`'s own table (`netqos.rule_target`); the policy's for None."""
        if rule is None:
            return cls.of(policy)
        return cls(rule_target(policy, rule), rule_slow_values(policy, rule))

    def of_value(self, value: str | None) -> str:
        """The class of a node whose label `target.key` is `value` (None: no such label)."""
        if value is None:
            return "unlabelled"
        if value in self.target.values:
            return "high"
        return "low" if value in self.low else "other"


DEFAULT_CLASSES = Classes(NETQOS_TARGET, NETQOS_SLOW)


@dataclass
class Nodes:
    """Every node's value of the target's key, and the target nodes ("high") as the scheduler
    reads them."""

    net: dict[str, str | None]  # node name -> its label of the target's key (`net` by default)
    high: list[Node]
    classes: Classes = DEFAULT_CLASSES

    def net_class(self, node_name: str) -> str:
        """The class of the node a pod is bound to ("pending" when it is bound to none)."""
        if not node_name:
            return "pending"
        return self.classes.of_value(self.net.get(node_name))


def read_nodes(items: Iterable[Mapping[str, Any]], classes: Classes = DEFAULT_CLASSES) -> Nodes:
    """The nodes of a listing, read one at a time."""
    return read_nodes_by_classes(items, (classes,))[classes]


def read_nodes_by_classes(items: Iterable[Mapping[str, Any]], several: Sequence[Classes]) -> dict[Classes, Nodes]:
    """The nodes of a listing, read once, classed by each of `several` (a policy's rules each have
    their own: `by_rule`)."""
    found = {classes: Nodes({}, [], classes) for classes in several}
    for item in items:
        meta = apidata.obj(item, "metadata", "metadata")
        labels = apidata.string_map(meta, "labels", "metadata.labels")
        name = apidata.text(meta, "name", "metadata.name")
        info: Node | None | ShapeError = None
        for classes, nodes in found.items():
            net = labels.get(classes.target.key)
            nodes.net[name] = net
            if classes.of_value(net) != "high":
                continue
            if info is None:
                try:
                    info = read.node_info(item)
                except ShapeError as err:  # a node the scheduler could not read either: it places nothing
                    info = err
            if isinstance(info, Node):
                nodes.high.append(info)
    return found


def by_rule(policy: Policy) -> Callable[[Mapping[str, str]], Classes]:
    """pod labels -> the classes its rule judges its placement by (`netqos.judging_rule`): each
    rule against its own best class, `net=high` for the default policy."""
    classes = {rule.name: Classes.of_rule(policy, rule) for rule in policy.rules}
    default = Classes.of(policy)
    if set(classes.values()) <= {default}:
        return lambda labels: default  # one target for every rule: no selector to match

    def of(labels: Mapping[str, str]) -> Classes:
        rule = judging_rule(policy, labels)
        return default if rule is None else classes[rule.name]

    return of


def every_classes(policy: Policy) -> list[Classes]:
    """The distinct classes of the policy's rules (`by_rule`), the policy's own first."""
    return list(dict.fromkeys([Classes.of(policy), *(Classes.of_rule(policy, rule) for rule in policy.rules)]))


def high_usage(pods: Iterable[Mapping[str, Any]], high: Sequence[Node]) -> dict[str, NodeUsage]:
    """Each net=high node's usage by the pods bound to it (NodeInfo.Requested, UsedPorts), folded
    one pod at a time: memory holds one tally per high node, never the pods. What a pod takes
    depends on its containers' resources, ports and restart policy, its overhead and pod-level
    resources only (`keys.usage_template_key`), so pods that differ elsewhere (images, environment,
    names, a StatefulSet's per-pod labels) are read once (`keys.UsageViews`, at most `keys.TEMPLATES`
    of them remembered), and then only those fields."""
    fold = keys.UsageFold(node.name for node in high)
    for pod in pods:
        try:
            fold.add(pod)
        except ShapeError:  # the API server stores no such pod; one that slipped in takes nothing here
            continue
    return fold.usage()


@dataclass
class WhyNotHigh:
    """Why a pod is not on a net=high node, for pod after pod, given the `high` nodes and what
    the pods on them take (`usage`, None when it could not be read: the nodes count as empty),
    filtered by the Filter plugins of `profile` (and their arguments: NodeAffinity's
    `addedAffinity`), the profile of the pods' scheduler: one instance per profile.

    The filter work is shared as far as the filters allow, so that its cost follows the variety
    of the pods' scheduling fields, not their number: pods of one template share the answer
    (under `keys.pod_filter_key`); pods of several templates with the same tolerations, node selector,
    required affinity, requests and host ports share it too; and the node-only filters
    (`cycle.FilterChain.node_only`: cordons, taints, node affinity), the bulk of the work, run
    once per `keys.node_filter_key`. What remains per `keys.filter_key` is the chain's usage
    stage (host ports, resource fit) and its late node checks on the nodes that pass the others:
    a few comparisons a node.
    """

    high: Sequence[Node]
    usage: Mapping[str, NodeUsage] | None
    target: Target = NETQOS_TARGET  # what the `high` nodes are, as the reasons name them
    profile: Profile = DEFAULT_PROFILE
    _by_template: keys.Memo[bytes, tuple[str, ...]] = field(default_factory=keys.Memo)
    _by_spec: keys.Memo[Hashable, tuple[str, ...]] = field(default_factory=keys.Memo)
    _node_only: keys.Memo[Hashable, tuple[Counter[str], list[Node]]] = field(default_factory=keys.Memo)

    def __call__(self, pod: Mapping[str, Any]) -> tuple[str, ...]:
        """The filter reasons of every high node for `pod` now (as if it were scheduled again, so
        its own spec.nodeName is left out), as `explain`'s ranking filters. The pod in question
        is on no high node, so it is never counted in `usage`: it does not compete with itself.
        Reasons are counted per node as the scheduler's FitError does.
        """
        try:
            return self._by_template.get(keys.pod_filter_key(pod), lambda: self._answer(pod))
        except ShapeError as err:  # not kept: the error may be in a field the key leaves out
            return (f"cannot evaluate the pod's scheduling fields: {err}",)

    def _answer(self, obj: Mapping[str, Any]) -> tuple[str, ...]:
        pod = dataclasses.replace(read.pod_info(obj), node_name="")
        return self._by_spec.get(keys.filter_key(pod, self.profile), lambda: self._judge(pod))

    def _judge(self, pod: PodInfo) -> tuple[str, ...]:
        node_key = keys.node_filter_key(pod, self.profile)
        node_only_counts, passing = self._node_only.get(node_key, lambda: self._node_only_pass(pod))
        usage = self.usage or {}
        counts = Counter(node_only_counts)
        chain = cycle.FilterChain.over(pod, self.profile)  # no snapshot: the late node-only checks
        for node in passing:
            why = chain.through_cluster(node, chain.through_usage(node, usage.get(node.name, EMPTY_USAGE), ()))
            if not why:
                return (feasible_now(self.target) if self.usage is not None else feasible_without_usage(self.target),)
            counts.update(why)
        total = len(self.high)
        return tuple(sorted(f"{c}/{total} {self.target} node(s): {r}" for r, c in counts.items()))

    def _node_only_pass(self, pod: PodInfo) -> tuple[Counter[str], list[Node]]:
        """The node-only filters' reasons, counted, and the high nodes that pass them."""
        _, reasons = cycle.FilterChain(pod, self.profile).node_only(self.high)
        counts = Counter(r for why in reasons for r in why)
        return counts, [n for n, why in zip(self.high, reasons, strict=True) if not why]
