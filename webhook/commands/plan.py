"""What `rebalance` plans from, read from a cluster: every node, every pod bound to a node and not
finished (one paginated list: the prediction for a replacement scores every node, so it needs what
each holds), and the candidates' ReplicaSets and Jobs for their Deployment or CronJob. Shared by
`rebalance`, which acts on the plan, and `status`, which counts the pods it would move.
"""

from __future__ import annotations

from webhook import cluster, owners, rebalance
from webhook.apidata import ShapeError
from webhook.owners import Owner
from webhook.policy import Policy


def read_plan(reader: cluster.Reader, policy: Policy, options: rebalance.Options) -> rebalance.Plan:
    """The plan for the cluster `reader` reads: every node, every bound pod, the candidates' owners.
    `status` asks it too, for how many pods would move now."""
    state = reader.restarting(lambda: _state(reader, policy, options))
    return rebalance.plan(state, _owners(reader, state))


def _state(reader: cluster.Reader, policy: Policy, options: rebalance.Options) -> rebalance.Cluster:
    """Every node and every bound pod, read into a new state (a restart after an expired list
    starts from an empty one)."""
    state = rebalance.Cluster(policy, options)
    try:
        for node in reader.list("Node"):
            state.add_node(node)
        for pod in reader.list("Pod", field_selector=cluster.ASSIGNED_NOT_FINISHED):
            state.add_pod(pod)
    except ShapeError as err:  # no API server stores such an object: a proxy or a stand-in sent it
        raise cluster.ClusterError(
            f"the API server at {reader.cluster.host} sent an object no Kubernetes stores: {err}"
        ) from None
    return state


def _owners(reader: cluster.Reader, state: rebalance.Cluster) -> dict[tuple[str, str, str], Owner]:
    """The Deployment or CronJob of each candidate's ReplicaSet or Job. A controller RBAC hides
    (or that is gone) stays the owner: one pod per ReplicaSet instead of per Deployment."""
    found = {}
    forbidden: set[str] = set()
    for namespace, kind, name in sorted(state.owner_lookups()):
        if kind in forbidden:
            continue
        try:
            obj = reader.get(kind, name, namespace)
        except cluster.Forbidden:
            forbidden.add(kind)
            state.notes.append(
                f"cannot read {kind}s (forbidden by RBAC): one pod per {kind} moves in a run, "
                f"not one per {owners.CLIMB[kind]}"
            )
            continue
        found[(namespace, kind, name)] = owners.top_owner(Owner(kind, name), obj)
    return found
