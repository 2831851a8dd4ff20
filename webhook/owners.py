"""Owners: the one vocabulary `status` and `rebalance` use for who runs a pod.

- the **controller** of an object is its ownerReference with `controller: true` (at most one, as
  apimachinery's `metav1.GetControllerOf` finds it);
- the **top owner** is the workload a person knows: the controller's own controller where that
  is the kind that manages it (a Deployment over its ReplicaSet, a CronJob over its Job), else
  the controller itself. One level is climbed, as `kubectl rollout` and the descheduler do.

Objects are read through `webhook.apidata`: the API server sends well-formed objects, so a
`ShapeError` here means a stand-in that sent something no Kubernetes stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook import apidata

# A controller kind -> the kind that manages it, whose name a person knows the workload by.
CLIMB = {"ReplicaSet": "Deployment", "Job": "CronJob"}
# Controllers whose `spec.template` is what they create a replacement pod from.
TEMPLATED = ("ReplicaSet", "StatefulSet", "Job", "ReplicationController")


@dataclass(frozen=True)
class Owner:
    """An owner of a pod or of a controller: `Kind/name` (the uid does not take part in equality)."""

    kind: str
    name: str
    uid: str = field(default="", compare=False)

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


def controller_of(obj: Mapping[str, Any]) -> Owner | None:
    """The controller of `obj` (any API object), None without one."""
    meta = apidata.obj(obj, "metadata", "metadata")
    for ref in apidata.items(meta, "ownerReferences", "metadata.ownerReferences"):
        if apidata.boolean(ref, "controller", "metadata.ownerReferences[].controller"):
            return Owner(
                apidata.text(ref, "kind", "metadata.ownerReferences[].kind"),
                apidata.text(ref, "name", "metadata.ownerReferences[].name"),
                apidata.text(ref, "uid", "metadata.ownerReferences[].uid"),
            )
    return None


def climbs(controller: Owner) -> bool:
    """Whether the controller may itself be managed by a workload a person knows (read it to find out)."""
    return controller.kind in CLIMB


def top_owner(controller: Owner, controller_object: Mapping[str, Any] | None) -> Owner:
    """The workload `controller` belongs to: its own controller when that is the kind that manages
    it (`CLIMB`), read from `controller_object` (None when unreadable or gone: the controller)."""
    if controller_object is None or not climbs(controller):
        return controller
    above = controller_of(controller_object)
    if above is not None and above.kind == CLIMB[controller.kind]:
        return above
    return controller


def parse(text: str) -> Owner:
    """`Kind/name`, as `str(Owner)` writes it."""
    kind, _, name = text.partition("/")
    return Owner(kind, name)
