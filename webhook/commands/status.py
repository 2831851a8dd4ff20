"""`netqos-webhook status`: read a cluster through `webhook.cluster`, judge it with `webhook.status`.

Read-only: gets and paginated lists, nothing else. Pods are listed once per rule with the rule's
podSelector as the server-side `labelSelector` and `status.phase` as `fieldSelector` (finished
pods hold no node and need no preference), so a cluster of 150,000 pods sends only the selected
ones, a page at a time. The pods that take the `net=high` nodes' resources are read only when a
selected pod is not on such a node (see `_pods_on_nodes`). What RBAC forbids is `status.Unknown`,
reported, not a failure.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from webhook import cluster, status
from webhook.names import CONFIGURATION_NAME, DEFAULT_NAMESPACE, DEFAULT_SERVICE, TLS_SECRET
from webhook.policy import Policy
from webhook.policy_file import PolicyError, default_policy, load_policy, policy_from_bytes
from webhook.selector import LabelSelector

RUNNING = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass(frozen=True)
class StatusArgs:
    kubeconfig: str | None = None
    context: str | None = None
    webhook_namespace: str = DEFAULT_NAMESPACE
    config: str | None = None  # a policy file instead of the one the webhook serves
    namespace: str | None = None  # None: every namespace
    output: str = "table"  # table | json


def run(args: StatusArgs, out: TextIO, now: dt.datetime | None = None) -> int:
    """Print the status of the cluster; the exit code: 0 all well, 3 problems or missing pods.

    Raises `PolicyError` for an unusable --config (exit 2) and `cluster.ClusterError` when the
    cluster cannot be read (its `exit_code`: 2 for unusable credentials, else 1).
    """
    override = load_policy(args.config) if args.config else None
    connection = cluster.connect(args.kubeconfig, args.context)
    with cluster.Reader(connection) as reader:
        report = status.analyse(_view(reader, args, override, now or dt.datetime.now(dt.UTC)))
        lookups = status.owner_lookups(report)
        status.with_owners(report, {key: _get(reader, key[1], key[2], key[0]) for key in sorted(lookups)})
    out.write(status.render_json(report) if args.output == "json" else status.render_table(report))
    return report.exit_code


def _view(reader: cluster.Reader, args: StatusArgs, override: Policy | None, now: dt.datetime) -> status.ClusterView:
    ns = args.webhook_namespace
    deployment = _get(reader, "Deployment", DEFAULT_SERVICE, ns)
    policy, source, problem = _policy(reader, deployment, ns, override, args.config)
    return status.ClusterView(
        webhook_namespace=ns,
        policy=policy,
        policy_source=source,
        configuration=_get(reader, "MutatingWebhookConfiguration", CONFIGURATION_NAME),
        deployment=deployment,
        endpoint_slices=_listed(
            reader, "EndpointSlice", ns, label_selector=f"kubernetes.io/service-name={DEFAULT_SERVICE}"
        ),
        secret=_get(reader, "Secret", TLS_SECRET, ns),
        namespaces=_namespaces(reader),
        nodes=_lazy(reader, "nodes", lambda: reader.list("Node")),
        pods=_lazy(reader, "pods", lambda: _selected_pods(reader, policy, args.namespace)),
        pods_on_nodes=lambda high, nodes: _pods_on_nodes(reader, high, nodes),
        now=now,
        policy_problem=problem,
    )


def _policy(
    reader: cluster.Reader, deployment: Any, ns: str, override: Policy | None, config: str | None
) -> tuple[Policy, str, str | None]:
    """The policy to judge by, where it came from, and why the cluster's could not be used."""
    if override is not None:
        return override, str(config), None
    builtin = "the built-in default policy"
    if not isinstance(deployment, dict):
        return default_policy(), f"{builtin} (the webhook's Deployment could not be read)", None
    location = status.policy_location(deployment)
    if location is None:
        return default_policy(), builtin, None
    name, key = location
    where = f"ConfigMap {ns}/{name} key {key}"
    config_map = _get(reader, "ConfigMap", name, ns)
    if isinstance(config_map, status.Unknown) or config_map is None:
        what = "forbidden" if config_map is not None else "missing"
        return default_policy(), f"{builtin} ({where} {what}; pass --config FILE)", None
    text = (config_map.get("data") or {}).get(key)
    if text is None:
        return default_policy(), builtin, f"{where} does not exist: the webhook cannot load its policy"
    try:
        return policy_from_bytes(text.encode(), where), where, None
    except PolicyError as err:
        return default_policy(), builtin, f"the webhook's policy is invalid: {err}"


def _selected_pods(reader: cluster.Reader, policy: Policy, namespace: str | None) -> Iterator[dict[str, Any]]:
    """Every running pod some rule selects, each once, listed with the rules' label selectors."""
    seen: set[str] | None = set() if len(policy.rules) > 1 else None  # pods several rules select
    for rule in policy.rules:
        for pod in reader.list(
            "Pod", namespace, label_selector=label_selector(rule.pod_selector), field_selector=RUNNING
        ):
            if seen is not None:
                meta = pod.get("metadata") or {}
                uid = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
                if uid in seen:
                    continue
                seen.add(uid)
            yield pod


def _pods_on_nodes(reader: cluster.Reader, high: Sequence[str], nodes: int) -> Any:
    """The pods bound to the `high` nodes and not finished, in every namespace, streamed.

    While the high nodes are at most half of the `nodes`, one list per high node with the field
    selector `kubectl describe node` sends (`spec.nodeName=NAME`, which the API server answers from
    an index): only the pods on high nodes cross the wire, at the cost of one request per node.
    Beyond that, one paginated list of every bound pod moves fewer requests for little more data.
    """
    if len(high) * 2 <= nodes:

        def items() -> Iterable[dict[str, Any]]:
            for name in high:
                yield from reader.list("Pod", field_selector=f"spec.nodeName={name},{RUNNING}")
    else:

        def items() -> Iterable[dict[str, Any]]:
            return reader.list("Pod", field_selector=cluster.ASSIGNED_NOT_FINISHED)

    return _lazy(reader, "pods on net=high nodes", items)


def label_selector(selector: LabelSelector) -> str:
    """A LabelSelector as the `labelSelector` query parameter (kubectl's -l syntax)."""
    parts = [f"{k}={v}" for k, v in selector.match_labels]
    for r in selector.match_expressions:
        values = ",".join(r.values)
        parts.append(
            {
                "In": f"{r.key} in ({values})",
                "NotIn": f"{r.key} notin ({values})",
                "Exists": r.key,
                "DoesNotExist": f"!{r.key}",
            }[r.operator]
        )
    return ",".join(parts)


def _namespaces(reader: cluster.Reader) -> dict[str, dict[str, str]] | status.Unknown:
    listed = _listed(reader, "Namespace", None)
    if isinstance(listed, status.Unknown):
        return listed
    return {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in listed}


def _get(reader: cluster.Reader, kind: str, name: str, namespace: str | None = None) -> Any:
    try:
        return reader.get(kind, name, namespace)
    except cluster.Forbidden:
        where = f" in namespace {namespace}" if namespace else ""
        return status.Unknown(f"{kind} {name}{where}")


def _listed(reader: cluster.Reader, kind: str, namespace: str | None, **selectors: str) -> Any:
    try:
        return list(reader.list(kind, namespace, **selectors))
    except cluster.Forbidden:
        where = f" in namespace {namespace}" if namespace else ""
        return status.Unknown(f"the {kind}s{where}")


def _lazy(reader: cluster.Reader, what: str, items: Callable[[], Iterable[dict[str, Any]]]) -> Any:
    """`items()` as an iterator whose first page is read now, so a 403 becomes Unknown here and
    the rest streams into the analysis page by page."""
    iterator = iter(items())
    try:
        first = next(iterator, None)
    except cluster.Forbidden:
        return status.Unknown(f"the {what}")
    return iter(()) if first is None else itertools.chain((first,), iterator)
