"""NodePorts: no host port of the pod conflicts with one in use on the node.

Sources: kubernetes/kubernetes v1.36 pkg/scheduler/framework/plugins/nodeports/node_ports.go
(Filter, ErrReason), pkg/scheduler/framework/types.go (HostPortInfo).
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook.resources import HostPort
from webhook.scheduler.framework import FilterPlugin, Reads
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile

NAME = "NodePorts"
REASON_NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"  # nodeports.ErrReason


def node_ports(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    """NodePorts: no host port of the pod conflicts with one in use on the node."""
    return () if ports_fit(pod.host_ports, usage.host_ports) else (REASON_NODE_PORTS,)


def ports_fit(wanted: Sequence[HostPort], used: Sequence[HostPort]) -> bool:
    """NodePorts.Filter: no wanted host port conflicts with one in use on the node."""
    return not any(w.conflicts(u) for w in wanted for u in used)


FILTER = FilterPlugin(NAME, node_ports, Reads.USAGE, lambda pod: pod.host_ports)
