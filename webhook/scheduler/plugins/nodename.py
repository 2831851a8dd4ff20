"""NodeName: a pod with spec.nodeName fits that node only. From Kubernetes 1.37 the plugin runs first
and has a PreFilter naming spec.nodeName, so the other nodes are "node(s) didn't satisfy plugin(s)
[NodeName]"; up to 1.36 it runs after NodeUnschedulable, without one (`NAME_BEFORE_137`).

Sources: kubernetes/kubernetes pkg/scheduler/framework/plugins/nodename/node_name.go (v1.36.3,
v1.37.2), pkg/scheduler/apis/config/v1/default_plugins.go getDefaultPlugins.
"""

from __future__ import annotations

from webhook.scheduler.framework import FilterPlugin, Reads
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile

NAME = "NodeName"
NAME_BEFORE_137 = "NodeName (before 1.37)"  # no PreFilter; after NodeUnschedulable
REASON_NODE_NAME = "node(s) didn't match the requested node name"  # nodename.ErrReason


def named_node(pod: PodInfo) -> frozenset[str] | None:
    """NodeName.PreFilter from Kubernetes 1.37 (plugins/nodename/node_name.go, v1.37.2): a pod
    with spec.nodeName is filtered on that node only."""
    return frozenset({pod.node_name}) if pod.node_name else None


def node_name(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    """NodeName: a pod with spec.nodeName fits that node only."""
    return (REASON_NODE_NAME,) if pod.node_name and pod.node_name != node.name else ()


FILTER = FilterPlugin(NAME, node_name, Reads.NODE, lambda pod: pod.node_name, node_names=named_node)
FILTER_BEFORE_137 = FilterPlugin(NAME, node_name, Reads.NODE, lambda pod: pod.node_name, variant=NAME_BEFORE_137)
