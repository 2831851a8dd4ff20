"""What `rebalance` plans from, read from a cluster: every node, every pod bound to a node and not
finished (one paginated list: the prediction for a replacement scores every node, so it needs what
each holds), the candidates' ReplicaSets and Jobs for their Deployment or CronJob, and the live
registration (`read_registration`). Shared by `rebalance`, which acts on the plan, and `status`,
which counts the pods it would move.
"""

from __future__ import annotations

from typing import Any

from webhook import cluster, owners, rebalance, scope
from webhook.apidata import ShapeError
from webhook.names import CONFIGURATION_NAME
from webhook.owners import Owner
from webhook.policy import Policy


def read_plan(reader: cluster.Reader, policy: Policy, options: rebalance.Options) -> rebalance.Plan:
    """The plan for the cluster `reader` reads: every node, every bound pod, the candidates' owners,
    the registration. `status` asks it too, for how many pods would move now."""
    state = rebalance.Cluster(policy, options)
    try:
        registration = scope.Registration.read(read_registration(reader))
        for node in reader.list("Node"):
            state.add_node(node)
        for pod in reader.list("Pod", field_selector=cluster.ASSIGNED_NOT_FINISHED):
            state.add_pod(pod)
    except ShapeError as err:  # no API server stores such an object: a proxy or a stand-in sent it
        raise cluster.ClusterError(
            f"the API server at {reader.cluster.host} sent an object no Kubernetes stores: {err}"
        ) from None
    return rebalance.plan(state, registration, _owners(reader, state))


def read_registration(reader: cluster.Reader) -> scope.Live:
    """The objects the live registration is read from: the MutatingWebhookConfiguration, the
    EndpointSlices of the Services its entries call, our admission policies and their bindings,
    the Namespaces' labels. What RBAC forbids is left out and named."""
    unreadable: list[str] = []
    try:
        configuration = reader.get("MutatingWebhookConfiguration", CONFIGURATION_NAME)
    except cluster.Forbidden:
        configuration = None
        unreadable.append(f"the MutatingWebhookConfiguration {CONFIGURATION_NAME}")
    slices = {}
    for namespace, name in sorted(scope.services(configuration)):
        try:
            selector = f"{scope.SERVICE_NAME_LABEL}={name}"
            slices[(namespace, name)] = list(reader.list("EndpointSlice", namespace, label_selector=selector))
        except cluster.Forbidden:
            unreadable.append(f"the EndpointSlices in namespace {namespace}")
    policies = _admission_listed(reader, "MutatingAdmissionPolicy", unreadable)
    bindings = _admission_listed(reader, "MutatingAdmissionPolicyBinding", unreadable)
    namespaces: dict[str, Any] = {}
    try:
        for obj in reader.list("Namespace"):
            meta = obj.get("metadata") or {}
            namespaces[str(meta.get("name") or "")] = meta.get("labels") or {}
    except cluster.Forbidden:
        return scope.Live(configuration, slices, policies, bindings, None, tuple(unreadable))
    return scope.Live(configuration, slices, policies, bindings, namespaces, tuple(unreadable))


def _admission_listed(reader: cluster.Reader, kind: str, unreadable: list[str]) -> list[dict[str, Any]]:
    """Every object of an admission policy kind; none where the API server predates the v1 API
    (Kubernetes before 1.36 answers 404) or the client does (kubernetes < 36)."""
    try:
        return list(reader.list(kind))
    except cluster.NotFound:
        return []
    except cluster.Forbidden:
        unreadable.append(f"the {kind}s")
        return []
    except AttributeError:
        return []


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
