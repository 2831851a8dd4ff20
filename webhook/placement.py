"""Placement: which `net` class each node is, and why a pod is not on a `net=high` node. Pure.

`status` asks it for every selected pod off the fast network; a command that moves such pods
asks the same question. The answer is `webhook.scheduling`'s, exactly as `explain` ranks nodes:
the filter reasons of every `net=high` node for the pod as if it were scheduled again, given what
the pods bound to those nodes already take (NodeResourcesFit, NodePorts; `high_usage` folds them
one pod at a time, so memory holds one tally per high node, never the pods).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from webhook import apidata, scheduling
from webhook.affinity import REQUIRED
from webhook.apidata import ShapeError

NET_CLASSES = ("high", "other", "unlabelled", "low", "pending")
FEASIBLE_NOW = (
    "a net=high node is feasible now: the pod was placed when none was, "
    "or other score plugins outweighed the preference (run explain)"
)
FEASIBLE_WITHOUT_USAGE = (
    "a net=high node passes the filters that do not depend on the pods on it "
    "(resource fit and host ports not evaluated: the pods on net=high nodes could not be read)"
)
FEASIBLE_PENDING = (
    "a net=high node is feasible now: the scheduler has not bound the pod yet "
    "(kubectl describe pod shows its FailedScheduling events)"
)
USAGE_TEMPLATES = 4096  # distinct pod specs remembered while tallying the pods on net=high nodes


@dataclass
class Nodes:
    """Every node's `net` label, and the `net=high` nodes as the scheduler reads them."""

    net: dict[str, str | None]  # node name -> its net label
    high: list[scheduling.Node]

    def net_class(self, node_name: str) -> str:
        """The class of the node a pod is bound to ("pending" when it is bound to none)."""
        if not node_name:
            return "pending"
        net = self.net.get(node_name)
        return "unlabelled" if net is None else net if net in ("high", "low") else "other"


def read_nodes(items: Iterable[Mapping[str, Any]]) -> Nodes:
    """The nodes of a listing, read one at a time."""
    nodes = Nodes({}, [])
    for item in items:
        meta = apidata.obj(item, "metadata", "metadata")
        net = apidata.string_map(meta, "labels", "metadata.labels").get(scheduling.NETQOS_NODE_LABEL)
        nodes.net[apidata.text(meta, "name", "metadata.name")] = net
        if net == "high":
            try:
                nodes.high.append(scheduling.node_from_api(item))
            except ShapeError:  # a node the scheduler could not read either: it places nothing
                continue
    return nodes


def high_usage(pods: Iterable[Mapping[str, Any]], high: Sequence[scheduling.Node]) -> dict[str, scheduling.NodeUsage]:
    """Each net=high node's usage by the pods bound to it (NodeInfo.Requested, UsedPorts), folded
    one pod at a time: memory holds one tally per high node, never the pods. What a pod takes
    depends on its containers' resources, ports and restart policy, its overhead and pod-level
    resources only (`usage_key`), so pods that differ elsewhere (images, environment, names) are
    read once (at most USAGE_TEMPLATES of them are remembered), and then only those fields."""
    tallies = {node.name: scheduling.UsageTally() for node in high}
    views: dict[bytes, scheduling.PodView] = {}
    for pod in pods:
        try:
            spec, status = apidata.obj(pod, "spec", "spec"), apidata.obj(pod, "status", "status")
            tally = tallies.get(apidata.text(spec, "nodeName", "spec.nodeName"))
            finished = apidata.text(status, "phase", "status.phase") in ("Succeeded", "Failed")
        except ShapeError:  # the API server stores no such pod; one that slipped in takes nothing here
            continue
        if tally is None or finished:
            continue
        key = usage_key(spec)
        view = views.get(key)
        if view is None:
            try:
                view = scheduling.resource_view(pod)
            except ShapeError:
                continue
            if len(views) < USAGE_TEMPLATES:
                views[key] = view
        tally.add(view)
    return {name: tally.usage() for name, tally in tallies.items()}


@dataclass
class WhyNotHigh:
    """Why a pod is not on a net=high node, for pod after pod, given the `high` nodes and what
    the pods on them take (`usage`, None when it could not be read: the nodes count as empty).

    The filter work is shared as far as the filters allow, so that its cost follows the variety
    of the pods' scheduling fields, not their number: pods of one template share the answer
    (under `filter_key`); pods of several templates with the same tolerations, node selector,
    required affinity, requests and host ports share it too; and the node-only filters
    (`scheduling.node_only_filter`: cordons, taints, node affinity), the bulk of the work, run
    once per distinct tolerations, node selector and required affinity. What remains per
    distinct spec is `scheduling.usage_reasons` (host ports, resource fit) on the nodes that pass
    the others: a few comparisons a node.
    """

    high: Sequence[scheduling.Node]
    usage: Mapping[str, scheduling.NodeUsage] | None
    _by_template: dict[bytes, tuple[str, ...]] = field(default_factory=dict)
    _by_spec: dict[Hashable, tuple[str, ...]] = field(default_factory=dict)
    _node_only: dict[Hashable, tuple[Counter[str], list[scheduling.Node]]] = field(default_factory=dict)

    def __call__(self, pod: Mapping[str, Any]) -> tuple[str, ...]:
        """The filter reasons of every high node for `pod` now (as if it were scheduled again, so
        its own spec.nodeName is left out), as `explain`'s ranking filters. The pod in question
        is on no high node, so it is never counted in `usage`: as `node_filter_reasons`, it does
        not compete with itself. Reasons are counted per node as the scheduler's FitError does.
        """
        key = filter_key(pod)
        answer = self._by_template.get(key)
        if answer is None:
            try:
                view = dataclasses.replace(scheduling.pod_view(pod), node_name="")
            except ShapeError as err:  # not kept: the error may be in a field the key leaves out
                return (f"cannot evaluate the pod's scheduling fields: {err}",)
            answer = self._by_template[key] = self._answer(view)
        return answer

    def _answer(self, pod: scheduling.PodView) -> tuple[str, ...]:
        placement = (pod.tolerations, tuple(sorted(pod.node_selector.items())), pod.required)
        spec = (placement, tuple(sorted(pod.requests.items())), pod.host_ports)
        answer = self._by_spec.get(spec)
        if answer is None:
            answer = self._by_spec[spec] = self._judge(pod, placement)
        return answer

    def _judge(self, pod: scheduling.PodView, placement: Hashable) -> tuple[str, ...]:
        if placement not in self._node_only:
            _, reasons = scheduling.node_only_filter(pod, self.high)
            counts = Counter(r for why in reasons for r in why)
            self._node_only[placement] = (counts, [n for n, why in zip(self.high, reasons, strict=True) if not why])
        node_only_counts, passing = self._node_only[placement]
        usage = self.usage or {}
        counts = Counter(node_only_counts)
        for node in passing:
            why = scheduling.usage_reasons(pod, node, usage.get(node.name, scheduling.EMPTY_USAGE))
            if not why:
                return (FEASIBLE_NOW if self.usage is not None else FEASIBLE_WITHOUT_USAGE,)
            counts.update(why)
        total = len(self.high)
        return tuple(sorted(f"{c}/{total} net=high node(s): {r}" for r, c in counts.items()))


def usage_key(spec: Mapping[str, Any]) -> bytes:
    """The fields of a pod's spec that make what it takes of its node (`scheduling.resource_view`):
    each container's and init container's resources, ports and restart policy (a sidecar's
    requests add up), the overhead and the pod-level resources."""

    def taking(containers: Any) -> Any:
        if not isinstance(containers, list):
            return containers  # the reader refuses it; the key need only be a key
        fields = ("resources", "ports", "restartPolicy")
        return [[c.get(f) for f in fields] if isinstance(c, Mapping) else c for c in containers]

    parts = [taking(spec.get(f)) for f in ("containers", "initContainers")]
    parts += [spec.get("overhead"), spec.get("resources")]
    return orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)


def filter_key(pod: Mapping[str, Any]) -> bytes:
    """The pod fields PreFilter and Filter read (`scheduling.filter_reasons`): node selector,
    required node affinity, tolerations; the requests of containers, init containers, overhead and
    pod-level resources; host ports. Containers go in whole, a superset of what is read, so the key
    cannot go stale when the filters read another container field, and pods of one template still
    share it. spec.nodeName is left out: the pod is judged as if unbound."""
    spec = pod.get("spec") or {}
    if not isinstance(spec, Mapping):
        return orjson.dumps([spec])
    affinity = spec.get("affinity") or {}
    node_affinity = (affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else affinity) or {}
    required = node_affinity.get(REQUIRED) if isinstance(node_affinity, Mapping) else node_affinity
    fields = ("nodeSelector", "tolerations", "containers", "initContainers", "overhead", "resources")
    return orjson.dumps([required, *(spec.get(f) for f in fields)], option=orjson.OPT_SORT_KEYS)
