"""The world `monitor` keeps between events, judged as `status` judges it (pure).

`World` holds what the watches delivered, reduced to the fields the judgement reads (`slim_pod`,
`slim_node`: memory grows with the number of selected pods and nodes, not with the size of their
JSON): the selected pods (one store per rule's watch, a pod several rules select held by each),
every Node, and the pods bound to a target ("fast") node, whose requests take its room.

The judgement is `status`'s own, never a second copy:

- each selected pod's coverage (injected, explicit, opted out, missing, injected_earlier) is
  `coverage.check` run on that pod alone, again on every event of the pod (and for every pod when
  the policy, the registration or the namespaces change); its rule is the one that places it
  (`netqos.judging_rule`);
- the placement is the class of each counted pod's node by its rule's classes
  (`placement.by_rule`, `placement.Nodes.net_class`, as coverage places it), counted by `gauges()`,
  which the command calls at most once a second while events arrive; the pods off their target
  while a target node exists then go through one `coverage.check`, for why: a pod is stranded when
  it is bound to a node that is not one of its target's while status's judge finds a target node
  feasible for it now (`status.could_fit`: `placement.WhyNotHigh` given what the pods on the target
  nodes take);
- the room left on the fast nodes is their allocatable less what the pods bound to them request
  (`placement.high_usage`, as status's judge reads it).

So `gauges()` equals what `status` reports of the same objects: the counts of `pods`, `placement`
and the pods `not_on_high` that could fit, before the rebalance plan's corrections (`status`'s
`movable` runs the plan; the monitor does not).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook import apidata, placement
from webhook.scheduler.plugins.netqos import judging_rule
from webhook.status import coverage, registration
from webhook.status.model import ClusterView, Registered, Report, Unknown

# The node classes as the monitor names them (`status -o json` keeps "high" and "low", an API).
NODE_CLASSES = {"high": "fast", "low": "slow", "other": "other", "unlabelled": "unlabelled", "pending": "pending"}
STATES = ("injected", "explicit", "opted_out", "missing", coverage.EARLIER)
# Node resources whose room on the fast nodes is exported: (allocatable key, unit divisor).
ROOM = {"cpu": ("cpu", 1000), "memory": ("memory", 1), "pods": ("pods", 1)}

_CONTAINER_FIELDS = ("name", "image", "resources", "ports", "restartPolicy", "resizePolicy")
_POD_SPEC_DROPPED = frozenset({"volumes", "hostAliases", "imagePullSecrets", "readinessGates", "dnsConfig"})
_META_FIELDS = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "labels",
    "deletionTimestamp",
    "creationTimestamp",
    "ownerReferences",
    "generateName",
)
_NODE_STATUS_FIELDS = ("allocatable", "declaredFeatures")


def slim_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a Pod that coverage and the filters read: metadata but managedFields and
    annotations other than NetQoS's own; the spec without volumes and without the containers'
    commands, environment and probes; of the status, the phase."""
    meta = apidata.obj(pod, "metadata", "metadata")
    spec = dict(apidata.obj(pod, "spec", "spec"))
    for key in ("containers", "initContainers"):
        if key in spec:
            spec[key] = [{k: c[k] for k in _CONTAINER_FIELDS if k in c} for c in spec[key] or () if isinstance(c, dict)]
    spec = {k: v for k, v in spec.items() if k not in _POD_SPEC_DROPPED and k != "ephemeralContainers"}
    slim_meta = {k: meta[k] for k in _META_FIELDS if k in meta}
    annotations = apidata.string_map(meta, "annotations", "metadata.annotations")
    ours = {k: v for k, v in annotations.items() if "netqos" in k}
    if ours:
        slim_meta["annotations"] = ours
    status = apidata.obj(pod, "status", "status")
    out: dict[str, Any] = {"metadata": slim_meta, "spec": spec}
    if "phase" in status:
        out["status"] = {"phase": status["phase"]}
    return out


def slim_node(node: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a Node that the classes and the filters read: name, labels, creation time,
    taints and cordon, allocatable and declared features (not its images, conditions or addresses)."""
    meta = apidata.obj(node, "metadata", "metadata")
    spec = apidata.obj(node, "spec", "spec")
    status = apidata.obj(node, "status", "status")
    return {
        "metadata": {k: meta[k] for k in ("name", "labels", "creationTimestamp") if k in meta},
        "spec": {k: spec[k] for k in ("taints", "unschedulable") if k in spec},
        "status": {k: status[k] for k in _NODE_STATUS_FIELDS if k in status},
    }


def key_of(obj: Mapping[str, Any]) -> str:
    """An object's identity in a store: its uid, else namespace/name."""
    meta = apidata.obj(obj, "metadata", "metadata")
    uid = meta.get("uid")
    return str(uid) if uid else f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


@dataclass(frozen=True)
class Judged:
    """A selected pod's coverage as status classes it; `state` None when status does not count it
    (terminating, not admitted in its namespace, or a pod the webhook leaves alone)."""

    namespace: str
    rule: str
    state: str | None
    node: str = ""  # spec.nodeName ("" while pending)
    classes: placement.Classes = placement.DEFAULT_CLASSES  # its rule's classes (`placement.by_rule`)


@dataclass(frozen=True)
class Gauges:
    """What the monitor exports, the same numbers `status` reports of the same objects."""

    selected: Mapping[tuple[str, str, str], int]  # (namespace, rule, state) -> pods
    node_class: Mapping[str, int]  # fast | slow | other | unlabelled | pending -> selected pods
    stranded: Mapping[str, int]  # namespace -> pods bound off their target while one fits now
    fast_nodes: int | None  # None: the nodes are not known yet
    fast_room: Mapping[str, float]  # cpu (cores) | memory (bytes) | pods -> free on the fast nodes

    @property
    def pods(self) -> Counter[str]:
        """Selected pods by state, over namespaces and rules (status's `pods` without "selected")."""
        total: Counter[str] = Counter()
        for (_, _, state), n in self.selected.items():
            total[state] += n
        return total


@dataclass
class World:
    """The objects the watches delivered, slim, and each selected pod's judgement. `frame` is the
    rest of what status reads (the policy in force, the registration, the namespaces: read by the
    command, refreshed with `reframe`); its `pods` and `nodes` are ignored."""

    frame: ClusterView
    pods: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # store -> key -> pod
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> node
    bound: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> pod on a target node
    judged: dict[str, Judged] = field(default_factory=dict)  # key -> judgement of a selected pod
    _registered: Registered | None = None
    _fast: frozenset[str] | None = None  # `fast_names`, until the nodes or the policy change
    _by_rule: Callable[[Mapping[str, str]], placement.Classes] | None = None  # the frame's `placement.by_rule`

    def reframe(self, frame: ClusterView) -> None:
        """A new policy, registration or namespaces: every pod is judged again."""
        self.frame, self._registered, self._fast, self._by_rule = frame, None, None, None
        self.judged = {key: self._judge(pod) for key, pod in self._selected().items()}

    # --- the watches' events ---------------------------------------------------------------------

    def replace_pods(self, store: str, items: Iterable[Mapping[str, Any]]) -> None:
        """A selected-pods store listed anew (at start, after a 410): its pods are these."""
        old = self.pods.get(store, {})
        self.pods[store] = {key_of(p): slim_pod(p) for p in items}
        for key in old.keys() - self.pods[store].keys():
            self._forget(key)
        for key, pod in self.pods[store].items():
            self.judged[key] = self._judge(pod)

    def pod_event(self, store: str, kind: str, pod: Mapping[str, Any]) -> None:
        key = key_of(pod)
        held = self.pods.setdefault(store, {})
        if kind == "DELETED":
            held.pop(key, None)
            self._forget(key)
            return
        held[key] = slim = slim_pod(pod)
        self.judged[key] = self._judge(slim)

    def replace_nodes(self, items: Iterable[Mapping[str, Any]]) -> None:
        self.nodes = {apidata.text(apidata.obj(n, "metadata", ""), "name", ""): slim_node(n) for n in items}
        self._fast = None

    def node_event(self, kind: str, node: Mapping[str, Any]) -> bool:
        """Apply a Node event; True when a node became a target node (its pods were not held:
        the bound pods must be listed again)."""
        name = apidata.text(apidata.obj(node, "metadata", "metadata"), "name", "metadata.name")
        before = self.fast_names()
        if kind == "DELETED":
            self.nodes.pop(name, None)
        else:
            self.nodes[name] = slim_node(node)
        self._fast = None
        after = self.fast_names()
        if before - after:  # no longer a target node: its pods take no target node's room
            self.bound = {key: p for key, p in self.bound.items() if _node_of(p) in after}
        return bool(after - before)

    def replace_bound(self, items: Iterable[Mapping[str, Any]]) -> None:
        """The pods bound to nodes, listed anew: those on target nodes are kept."""
        fast = self.fast_names()
        self.bound = {key_of(p): slim_pod(p) for p in items if _node_of(p) in fast}

    def bound_event(self, kind: str, pod: Mapping[str, Any]) -> None:
        key = key_of(pod)
        if kind == "DELETED" or _node_of(pod) not in self.fast_names():
            self.bound.pop(key, None)
        else:
            self.bound[key] = slim_pod(pod)

    def fast_names(self) -> frozenset[str]:
        """The nodes some rule's table calls the best class."""
        if self._fast is None:
            classes = placement.every_classes(self.frame.policy)
            self._fast = frozenset(
                name
                for name, node in self.nodes.items()
                if any(
                    c.of_value(apidata.string_map(node["metadata"], "labels", "").get(c.target.key)) == "high"
                    for c in classes
                )
            )
        return self._fast

    # --- the judgement ---------------------------------------------------------------------------

    def gauges(self) -> Gauges:
        """status's coverage check over the held objects, and the room on the fast nodes."""
        selected: Counter[tuple[str, str, str]] = Counter(
            (j.namespace, j.rule, j.state) for j in self.judged.values() if j.state is not None
        )
        every = placement.read_nodes_by_classes(self.nodes.values(), placement.every_classes(self.frame.policy))
        # The class of each counted pod's node, as coverage places it; only the pods off their
        # target while a target node exists go through coverage again, for why (the judge of
        # `placement.WhyNotHigh`): the class of a node is a lookup, its filters are not.
        node_class: Counter[str] = Counter()
        off: list[dict[str, Any]] = []
        selected_pods = self._selected()
        for key, judged in self.judged.items():
            if judged.state is None:
                continue
            nodes = every[judged.classes]
            net_class = nodes.net_class(judged.node)
            node_class[NODE_CLASSES[net_class]] += 1
            if net_class != "high" and nodes.high and key in selected_pods:
                off.append(selected_pods[key])
        report = Report()
        view = dataclasses.replace(
            self.frame,
            nodes=list(self.nodes.values()),
            pods=off,
            pods_on_nodes=lambda high, count: list(self.bound.values()),
        )
        coverage.check(view, report, self._registration())
        stranded = Counter(p.namespace for p in report.not_on_high if p.node and coverage.could_fit(p))
        high_nodes = len({n.name for of in every.values() for n in of.high})
        return Gauges(selected, node_class, stranded, high_nodes, self._room(every))

    def _room(self, every: Mapping[placement.Classes, placement.Nodes]) -> dict[str, float]:
        high = list({n.name: n for of in every.values() for n in of.high}.values())
        usage = placement.high_usage(self.bound.values(), high)
        room = dict.fromkeys(ROOM, 0.0)
        for node in high:
            took = usage.get(node.name)
            for name, (resource, unit) in ROOM.items():
                have = (node.allocatable or {}).get(resource, 0)
                used = (
                    (took.pods if took else 0) if name == "pods" else (took.requested.get(resource, 0) if took else 0)
                )
                room[name] += max(0, have - used) / unit
        return room

    def _judge(self, pod: Mapping[str, Any]) -> Judged:
        """status's coverage of this one pod (nodes left out: placement is `gauges`' work)."""
        meta = apidata.obj(pod, "metadata", "metadata")
        namespace = apidata.text(meta, "namespace", "metadata.namespace")
        labels = apidata.string_map(meta, "labels", "metadata.labels")
        rule = judging_rule(self.frame.policy, labels)
        report = Report()
        view = dataclasses.replace(self.frame, nodes=Unknown("nodes"), pods=[pod])
        coverage.check(view, report, self._registration())
        state = next((s for s in STATES if report.pods[s]), None)
        node = apidata.text(apidata.obj(pod, "spec", "spec"), "nodeName", "spec.nodeName")
        return Judged(namespace, rule.name if rule else "", state, node, self._classes_of(labels))

    def _classes_of(self, labels: Mapping[str, str]) -> placement.Classes:
        if self._by_rule is None:
            self._by_rule = placement.by_rule(self.frame.policy)
        return self._by_rule(labels)

    def _registration(self) -> Registered:
        """What coverage needs of the registration, from the frame (once per frame)."""
        if self._registered is None:
            self._registered = registration.check(self.frame, Report())
        return self._registered

    def _selected(self) -> dict[str, dict[str, Any]]:
        """Every selected pod once, over the stores of each rule."""
        return {key: pod for held in self.pods.values() for key, pod in held.items()}

    def _forget(self, key: str) -> None:
        if not any(key in held for held in self.pods.values()):
            self.judged.pop(key, None)


def _node_of(pod: Mapping[str, Any]) -> str:
    return apidata.text(apidata.obj(pod, "spec", "spec"), "nodeName", "spec.nodeName")
