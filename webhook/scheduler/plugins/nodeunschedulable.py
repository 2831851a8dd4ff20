"""NodeUnschedulable: a cordoned node (spec.unschedulable) takes no pod, unless the pod tolerates the
`node.kubernetes.io/unschedulable` NoSchedule taint.

Source: kubernetes/kubernetes v1.36 pkg/scheduler/framework/plugins/nodeunschedulable/
node_unschedulable.go (Filter, ErrReasonUnschedulable).
"""

from __future__ import annotations

from webhook.scheduler.framework import FilterPlugin, Reads
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile, Taint

NAME = "NodeUnschedulable"
# Reasons, verbatim from kube-scheduler (the Filter statuses that make up "0/N nodes are available").
REASON_UNSCHEDULABLE = "node(s) were unschedulable"  # nodeunschedulable.ErrReasonUnschedulable
# NodeUnschedulable lets a pod onto a cordoned node if it tolerates this taint.
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"


def node_unschedulable(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    """NodeUnschedulable: a cordoned node, unless the pod tolerates the unschedulable taint."""
    taint = Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")
    if node.unschedulable and not any(t.tolerates(taint) for t in pod.tolerations):
        return (REASON_UNSCHEDULABLE,)
    return ()


FILTER = FilterPlugin(NAME, node_unschedulable, Reads.NODE, lambda pod: pod.tolerations)
