"""What `rebalance --apply` keeps of the evictions it made, the `repeat` constraint that keeps it
from making a wasted one again, and the Events it records. Pure: ConfigMap data and what the
plan's fold saw in, records, verdicts and Event objects out; the command reads and writes them.

A **record** is kept per owner (namespace and top owner, as `owners` names it): the evicted pod
and its controller (among whose pods the replacement is found), the node it left, the `net=high`
node the plan predicted for its replacement, when, and the **world** the prediction was made in:
a digest of the `net=high` nodes as the scheduler filters and scores them (labels, taints,
unschedulable, allocatable) and of the pods bound to them (`Seen.world`). A later eviction of
the owner replaces its record; records older than `forget_after` are dropped, and at most
MAX_RECORDS are kept, the oldest dropped first, so the ConfigMap stays far below its 1 MiB.

Before a candidate is evicted, its owner's record is judged (`Seen.repeat`): the pods of the
recorded controller created since the eviction (less a few seconds of clock skew) and after the
newest pod it had when the plan was made are its replacements.

- one is bound to a `net=high` node: the prediction came true; nothing holds the candidate;
- one is not bound yet: the scheduler still places it; skipped;
- every one runs on a slower node and the world is the one the prediction was made in: the same
  prediction would be made and be as wrong; skipped until that world changes or the record is
  forgotten;
- none exists, or the world changed: planned as any other candidate.

A record of `rebalance --missing` (`mode` MISSING: the pod was recreated for the preference it
lacked) is judged by what that eviction was for: its replacements were created since, and every
one of them lacks the preference too (the webhook was not called for it, or failed open again):
skipped until the record is forgotten, as a recreation that cannot give the preference would be
made again on every run. Each mode judges its own records only.

The Events follow the descheduler's (kubernetes-sigs/descheduler
pkg/descheduler/evictions/evictions.go `PodEvictor.EvictPod`, which calls client-go's
`events.EventRecorder.Eventf` after a successful eviction): `events.k8s.io/v1`, type Normal, an
action, a reason, a note, `reportingController` and `reportingInstance` (the controller's name, a
dash and the host's name, as client-go v0.36.3 tools/events/event_broadcaster.go `NewRecorder`
makes it), named `<object>.<nanoseconds in hex>` as tools/record/util `GenerateEventName` names
them; limits from kubernetes v1.36.3 pkg/apis/core/validation/events.go `legacyValidateEvent`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.owners import Owner
from webhook.scheduler.model import Node

KEY = "evictions.json"  # the ConfigMap's one key: a JSON list of records, oldest first
MAX_RECORDS = 500  # a record is at most about 1 KiB of JSON
DEFAULT_FORGET_AFTER = dt.timedelta(hours=24)
# A replacement is created after the eviction; its creationTimestamp (the API server's clock, whole
# seconds) is compared with the eviction's time on this process's clock, with this much slack.
CLOCK_SKEW = dt.timedelta(seconds=5)
REPEAT = "repeat"
MISSING = "missing"  # a record's mode: made by `rebalance --missing` ("" for a move to a net=high node)

REPORTING_CONTROLLER = "netqos-webhook/rebalance"
EVENT_REASON = "NetQoSRebalanced"
EVENT_ACTION = "Evict"
NOTE_LIMIT = 1024  # NoteLengthLimit
REPORTING_INSTANCE_LIMIT = 128  # ReportingInstanceLengthLimit
NAME_LIMIT = 253  # a DNS-1123 subdomain
# apiVersion of each kind a rebalanced pod's owner can be (owners.TEMPLATED and their top owners)
API_VERSIONS = {
    "Pod": "v1",
    "ReplicationController": "v1",
    "ReplicaSet": "apps/v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
}


class RecordError(ValueError):
    """A record the ConfigMap holds that cannot be read."""


@dataclass(frozen=True)
class Record:
    """One eviction `rebalance --apply` made, for its owner."""

    namespace: str
    owner: Owner  # the top owner: the Deployment over its ReplicaSet
    controller: Owner  # the evicted pod's controller, with its uid: its pods include the replacement
    pod: str
    uid: str
    node: str  # where the pod ran
    target: str  # the net=high node predicted for its replacement
    evicted: dt.datetime
    world: str  # `Seen.world` when the plan was made
    # the newest creationTimestamp among the controller's pods when the plan was made ("": unknown):
    # a pod created within the clock skew before the eviction is no replacement
    newest: dt.datetime | None = None
    mode: str = ""  # MISSING for `rebalance --missing` (`target` is then where it was predicted, any node)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.owner.kind, self.owner.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "owner": {"kind": self.owner.kind, "name": self.owner.name},
            "controller": {"kind": self.controller.kind, "name": self.controller.name, "uid": self.controller.uid},
            "pod": {"name": self.pod, "uid": self.uid},
            "node": self.node,
            "target": self.target,
            "evicted": timestamp(self.evicted),
            "world": self.world,
            **({"newest": timestamp(self.newest)} if self.newest is not None else {}),
            **({"mode": self.mode} if self.mode else {}),
        }

    @classmethod
    def from_json(cls, data: Any) -> Record:
        """Raises `RecordError` for anything but what `to_json` writes."""
        try:
            owner, controller, pod = data["owner"], data["controller"], data["pod"]
            record = cls(
                namespace=_text(data["namespace"]),
                owner=Owner(_text(owner["kind"]), _text(owner["name"])),
                controller=Owner(_text(controller["kind"]), _text(controller["name"]), _text(controller["uid"])),
                pod=_text(pod["name"]),
                uid=_text(pod["uid"]),
                node=_text(data["node"]),
                target=_text(data["target"]),
                evicted=parse_time(_text(data["evicted"])),
                world=_text(data["world"]),
                newest=parse_time(_text(data["newest"])) if "newest" in data else None,
                mode=_text(data["mode"]) if "mode" in data else "",
            )
        except (KeyError, TypeError, ValueError) as err:
            raise RecordError(f"not a record ({err!r})") from None
        return record


@dataclass(frozen=True)
class History:
    """The records in force for one run: those younger than `forget_after` at `now`."""

    records: tuple[Record, ...] = ()
    forget_after: dt.timedelta = DEFAULT_FORGET_AFTER

    def of(self, namespace: str, owner: Owner) -> Record | None:
        return next((r for r in reversed(self.records) if r.key == (namespace, owner.kind, owner.name)), None)


NO_HISTORY = History()


def read(
    data: Mapping[str, Any] | None, now: dt.datetime, forget_after: dt.timedelta = DEFAULT_FORGET_AFTER
) -> tuple[History, list[str]]:
    """The records of a ConfigMap's `data` (None: no ConfigMap) still in force at `now`, and a
    note for each that cannot be read (left out, and dropped at the next write)."""
    text = (data or {}).get(KEY)
    if not text:
        return History((), forget_after), []
    notes: list[str] = []
    try:
        entries = json.loads(str(text))
    except ValueError as err:
        return History((), forget_after), [f"the eviction records are not JSON ({err}): they are left out"]
    if not isinstance(entries, list):
        return History((), forget_after), ["the eviction records are not a JSON list: they are left out"]
    records: list[Record] = []
    for i, entry in enumerate(entries):
        try:
            records.append(Record.from_json(entry))
        except RecordError as err:
            notes.append(f"eviction record {i} left out: {err}")
    return History(tuple(pruned(records, now, forget_after)), forget_after), notes


def pruned(records: Iterable[Record], now: dt.datetime, forget_after: dt.timedelta) -> list[Record]:
    """The newest record of each owner, none older than `forget_after`, at most MAX_RECORDS of
    them (the oldest dropped), oldest first."""
    latest: dict[tuple[str, str, str], Record] = {}
    for record in sorted(records, key=lambda r: r.evicted):
        if now - record.evicted <= forget_after:
            latest.pop(record.key, None)
            latest[record.key] = record
    return list(latest.values())[-MAX_RECORDS:]


def data(records: Sequence[Record]) -> dict[str, str]:
    """The ConfigMap's `data` for `records` (kept as given: `pruned` them first)."""
    return {KEY: json.dumps([r.to_json() for r in records], separators=(",", ":"))}


# ---------------------------------------------------------------------------------------------
# What the plan's fold sees for the records


@dataclass(frozen=True)
class SeenPod:
    """A pod of a recorded controller: where it is ("" while no node is bound) and since when."""

    name: str
    uid: str
    node: str
    created: dt.datetime | None
    missing: bool = False  # created without the preference (the webhook would mutate it now)


class Seen:
    """Folded with the cluster (`rebalance.Inventory`): the `net=high` nodes and the pods bound to
    them, digested into `world`, and the pods of the recorded controllers."""

    def __init__(self, history: History = NO_HISTORY) -> None:
        self.history = history
        self.pods: dict[str, list[SeenPod]] = {}  # controller uid -> its pods
        self._nodes: list[str] = []
        self._on_fast = 0  # the pods bound to net=high nodes: a sum of their digests, in any order
        self._watched = frozenset(r.controller.uid for r in history.records if r.controller.uid)
        self._newest: dict[str, str] = {}  # controller uid -> the newest creationTimestamp of its pods

    def add_node(self, node: Node, fast: bool) -> None:
        if fast:
            taints = sorted(str(t) for t in node.taints)
            allocatable = sorted((node.allocatable or {}).items())
            fields = [node.name, sorted(node.labels.items()), taints, node.unschedulable, allocatable]
            self._nodes.append(json.dumps(fields, separators=(",", ":")))

    def watches(self, controller: Owner | None) -> bool:
        """Whether the pods of `controller` may be a record's replacements (what `add_pod` keeps)."""
        return controller is not None and controller.uid in self._watched

    def add_pod(
        self, meta: Mapping[str, Any], controller: Owner | None, node: str, fast: bool, missing: bool = False
    ) -> None:
        """A pod bound to `node` ("" for one no node holds yet), not finished; `fast`: a net=high node;
        `missing`: it was created without the preference (asked of the pods `watches` names)."""
        uid = str(meta.get("uid") or "")
        if fast:
            digest = hashlib.blake2b(f"{node}/{uid}".encode(), digest_size=8).digest()
            self._on_fast = (self._on_fast + int.from_bytes(digest)) % 2**64
        created = str(meta.get("creationTimestamp") or "")
        if controller is not None and created > self._newest.get(controller.uid, ""):
            self._newest[controller.uid] = created  # the API server writes one format: they sort as times
        if controller is not None and controller.uid in self._watched:
            seen = SeenPod(str(meta.get("name") or ""), uid, node, _maybe_time(created), missing)
            self.pods.setdefault(controller.uid, []).append(seen)

    def newest(self, controller_uid: str) -> dt.datetime | None:
        """When the newest pod of the controller seen was created (None: no pod, or no readable time)."""
        return _maybe_time(self._newest.get(controller_uid, ""))

    def world(self, target: str) -> str:
        """The digest of the net=high nodes (`target`: what makes one) and of the pods on them."""
        fields = [target, sorted(self._nodes), self._on_fast]
        return hashlib.sha256(json.dumps(fields, separators=(",", ":")).encode()).hexdigest()[:32]

    def repeat(self, namespace: str, owner: Owner | None, fast: set[str], world: str, mode: str = "") -> str:
        """Why a pod of `owner` must not be evicted now, its last eviction (of `mode`) having been
        wasted ("" when nothing holds it)."""
        record = self.history.of(namespace, owner) if owner is not None else None
        if record is None or record.mode != mode:
            return ""
        replacements = self._replacements(record)
        if mode == MISSING:
            return self._still_missing(record, replacements)
        if not replacements or any(p.node in fast for p in replacements):
            return ""
        evicted = f"evicted {minutes(record.evicted)}, predicted {record.target}"
        waiting = [p for p in replacements if not p.node]
        if waiting:
            return f"{evicted}, its replacement {waiting[0].name} is not scheduled yet: not evicted again until it is"
        if record.world != world:
            return ""
        nodes = sorted({p.node for p in replacements})
        forgotten = minutes(record.evicted + self.history.forget_after)
        return (
            f"{evicted}, its replacement went to {', '.join(nodes)}: not evicted again until the net=high nodes or "
            f"the pods on them change, or until {forgotten} (--forget-after)"
        )

    def _replacements(self, record: Record) -> list[SeenPod]:
        """The pods of the recorded controller created since the eviction, and after its newest
        pod when the plan was made."""
        since = record.evicted - CLOCK_SKEW
        return [
            p
            for p in self.pods.get(record.controller.uid, ())
            if p.uid != record.uid
            and p.created is not None
            and p.created >= since
            and (record.newest is None or p.created > record.newest)
        ]

    def _still_missing(self, record: Record, replacements: Sequence[SeenPod]) -> str:
        """For a recreation (`MISSING`): why not again, when every replacement lacks the preference too."""
        if not replacements or not all(p.missing for p in replacements):
            return ""
        forgotten = minutes(record.evicted + self.history.forget_after)
        return (
            f"recreated {minutes(record.evicted)}, its replacement {replacements[0].name} was created without the "
            f"preference too (the webhook was not called for it, or failed open): not recreated again until "
            f"{forgotten} (--forget-after)"
        )


# ---------------------------------------------------------------------------------------------
# Events


@dataclass(frozen=True)
class Reference:
    """The object an Event is about (`regarding`) or names beside it (`related`)."""

    kind: str
    namespace: str
    name: str
    uid: str

    def to_json(self) -> dict[str, str]:
        ref = {"apiVersion": API_VERSIONS.get(self.kind, "v1"), "kind": self.kind}
        ref |= {"namespace": self.namespace, "name": self.name}
        return ref | ({"uid": self.uid} if self.uid else {})


def event(
    regarding: Reference, related: Reference | None, note: str, when: dt.datetime, host: str, unique: str
) -> dict[str, Any]:
    """The `events.k8s.io/v1` Event of an eviction, as the descheduler's recorder makes one: in
    the namespace of the object it regards, named `<its name>.<nanoseconds in hex>`, or `unique`
    (a random UUID, as client-go falls back to) where that is no valid name."""
    nanos = int(when.timestamp()) * 10**9 + when.microsecond * 1000
    name = f"{regarding.name}.{nanos:x}"
    body: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name if len(name) <= NAME_LIMIT else unique, "namespace": regarding.namespace},
        "eventTime": when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": f"{REPORTING_CONTROLLER}-{host}"[:REPORTING_INSTANCE_LIMIT],
        "action": EVENT_ACTION,
        "reason": EVENT_REASON,
        "regarding": regarding.to_json(),
        "note": note if len(note) <= NOTE_LIMIT else note[: NOTE_LIMIT - 3] + "...",
        "type": "Normal",
    }
    if related is not None:
        body["related"] = related.to_json()
    return body


# ---------------------------------------------------------------------------------------------
# Time


def timestamp(when: dt.datetime) -> str:
    """RFC 3339 in UTC, to the second, as the API server writes times."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def minutes(when: dt.datetime) -> str:
    """To the minute, for reasons people read: 2026-12-07T04:10Z."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%MZ")


def parse_time(text: str) -> dt.datetime:
    """RFC 3339 (`Z` or an offset); a time without a zone is UTC. Raises ValueError."""
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def _maybe_time(text: str) -> dt.datetime | None:
    try:
        return parse_time(text)
    except ValueError:
        return None


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value
