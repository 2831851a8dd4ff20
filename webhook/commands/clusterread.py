"""The one place the commands read a live cluster, over one `cluster.Reader` (one connection) per run.

`explain`, `status`, `rebalance` and `manifests` open the cluster with `reader(args)` (their
`flags.ClusterArgs`) and read through the functions here, so each object is read one way, with
one answer to what RBAC hides:

- what the installed webhook serves: `policy_in_force` (its Deployment's --config, the ConfigMap
  mounted there) and `get_object`;
- the registration: `read_registration` (the MutatingWebhookConfiguration, its Services'
  EndpointSlices, `admission_policies` and their bindings, the Namespaces' labels);
- the release: `server_version` (its /version) and `release` (the nearest release modelled);
- what the scheduler reads: `nodes`, `bound_pods` and `fold_bound_pods` (every pod bound to a
  node and not finished), `pods_on_nodes`, `selected_pods` (by a policy's label selectors),
  `namespaces`, `spread_selectors` and `services` (what PodTopologySpread's default constraints
  read), `controllers` (a pod's controller and its own), `budgets` (PodDisruptionBudgets),
  `listed` for any other kind.

- what `monitor` keeps live: `list_pages` and `watch` (a list, then its events from the list's
  resourceVersion), each watch over its own `reader_of` the run's one `connect`;
- what `rebalance` predicts a replacement from: `unbound_pods` (Pending pods no node holds yet),
  `may_create_pods` (a SelfSubjectAccessReview) and `admitted_pod` (a dry-run create: nothing is
  stored); and the object a command is asked about by name (`named_object`).

What RBAC forbids is `status.Unknown` (naming what, for "cannot read ..."), never an empty list
and never an error: a reader that cannot see a thing does not know it is absent. Each caller
decides what an unknown means for it (status reports it; rebalance evicts nothing it cannot
judge). Every other failure is a `cluster.ClusterError`.

The commands that only read import this module, never `webhook.cluster` (an import contract in
pyproject.toml; tests/tools/test_import_contracts.py holds every read to this module): what they
need of it besides the reads is re-exported here, the errors they catch and the types they
annotate with. `rebalance` and `register`, which write, use `webhook.cluster` for their writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from webhook import apidata, cluster, scope, status
from webhook.cluster import ASSIGNED_NOT_FINISHED as ASSIGNED_NOT_FINISHED
from webhook.cluster import MAX_POD_PAGES as MAX_POD_PAGES
from webhook.cluster import ClusterError as ClusterError
from webhook.cluster import Connection as Connection
from webhook.cluster import Expired as Expired
from webhook.cluster import Forbidden as Forbidden
from webhook.cluster import Invalid as Invalid
from webhook.cluster import Reader as Reader
from webhook.cluster import default_kubeconfig_exists as default_kubeconfig_exists
from webhook.commands.flags import ClusterArgs
from webhook.kubeversion import NEWEST, KubeVersion, from_server, nearest
from webhook.names import CONFIGURATION_NAME, DEFAULT_SERVICE
from webhook.owners import Owner
from webhook.policy import Policy
from webhook.policy_file import PolicyError, default_policy, policy_from_bytes
from webhook.scheduler.read import Selectors, namespace_info, selectors_from_api
from webhook.selector import LabelSelector

Obj = TypeVar("Obj", bound=status.ObjectJSON)
Listed = list[dict[str, Any]] | status.Unknown
# pods running or about to: finished pods hold no node and need no preference
RUNNING = "status.phase!=Succeeded,status.phase!=Failed"
UNBOUND = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"  # Pending pods no node holds yet
# the kinds whose selector PodTopologySpread's default constraints spread a pod by (spread.go)
SPREAD_CONTROLLERS = ("ReplicationController", "ReplicaSet", "StatefulSet")


def connect(args: ClusterArgs) -> cluster.Connection:
    """The credentials for the cluster `args` names (`cluster.connect`: --kubeconfig, else
    $KUBECONFIG, else ~/.kube/config, else the in-cluster service account); `KubeconfigError`
    (exit 2) when they cannot be used."""
    return cluster.connect(args.kubeconfig, args.context)


def reader(args: ClusterArgs, max_pages: int = cluster.MAX_PAGES) -> cluster.Reader:
    """The cluster `args` names (`connect`), read through one connection pool: a context manager."""
    return reader_of(connect(args), max_pages)


def reader_of(connection: cluster.Connection, max_pages: int = cluster.MAX_PAGES) -> cluster.Reader:
    """Another reader over the credentials of `connection` (its own connection pool, as a thread
    that watches needs): a context manager."""
    return cluster.Reader(connection, max_pages=max_pages)


def where(args: ClusterArgs) -> str:
    """The cluster `args` names, for messages: `cluster of kubeconfig FILE, context NAME`."""
    context = f", context {args.context}" if args.context else ""
    return f"cluster of kubeconfig {cluster.kubeconfig_source(args.kubeconfig)}{context}"


# --- any object ---------------------------------------------------------------------------------


def get_object(
    reader: cluster.Reader, kind: str, shape: type[Obj], name: str, namespace: str | None = None
) -> status.Read[Obj]:
    """The object, None when it does not exist, or Unknown when RBAC forbids reading it; `shape`
    is the JSON the API server sends for `kind` (taken on trust: it decoded into Go types first)."""
    try:
        return cast(Obj | None, reader.get(kind, name, namespace))
    except cluster.Forbidden:
        in_namespace = f" in namespace {namespace}" if namespace else ""
        return status.Unknown(f"{kind} {name}{in_namespace}")


def named_object(reader: cluster.Reader, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    """The object the operator named, None when it does not exist; `Forbidden` (a ClusterError)
    when RBAC hides it: the command cannot go on without it, unlike what `get_object` reads."""
    return reader.get(kind, name, namespace)


def listed(reader: cluster.Reader, kind: str, namespace: str | None = None, **selectors: str) -> Listed:
    """Every object of `kind` (in `namespace`, else everywhere) the selectors select, or Unknown
    when RBAC forbids the list. The list is read whole: run it under `Reader.restarting`."""
    try:
        return list(reader.list(kind, namespace, **selectors))
    except cluster.Forbidden:
        in_namespace = f" in namespace {namespace}" if namespace else ""
        return status.Unknown(f"the {plural(kind)}{in_namespace}")


def plural(kind: str) -> str:
    """`MutatingAdmissionPolicies`, `Namespaces`: a kind as "cannot read the ..." names it."""
    return f"{kind[:-1]}ies" if kind.endswith("y") else f"{kind}es" if kind.endswith("s") else f"{kind}s"


# --- the release --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerVersion:
    """What the API server's /version says: the release (as it reports it, not the nearest
    modelled) and its gitVersion; `version` None when RBAC forbids /version."""

    version: KubeVersion | None
    git_version: str = "?"

    @property
    def said(self) -> str:
        """Where the version came from, for notes."""
        if self.version is None:
            return "cannot read the API server's /version (forbidden by RBAC)"
        return f"the API server's /version ({self.git_version})"


def server_version(reader: cluster.Reader) -> ServerVersion:
    """The cluster's /version. Every authenticated user may read it (system:public-info-viewer);
    a 403 is a locked-down cluster, said, not a failure."""
    try:
        info = reader.version()
    except cluster.Forbidden:
        return ServerVersion(None)
    return ServerVersion(from_server(info), str(info.get("gitVersion") or "?"))


def release(reader: cluster.Reader, notes: list[str]) -> KubeVersion:
    """The release to score as the cluster's scheduler does: the nearest modelled, with a note
    where /version is outside them or cannot be read (then the newest)."""
    found = server_version(reader)
    if found.version is None:
        notes.append(f"{found.said}: scored as Kubernetes {NEWEST}")
        return NEWEST
    known, outside = nearest(found.version)
    if outside:
        notes.append(outside)
    return known


# --- the policy in force ------------------------------------------------------------------------


def policy_in_force(
    reader: cluster.Reader, ns: str, override: Policy | None, config: str | None
) -> tuple[Policy, str, str | None]:
    """The policy the webhook in namespace `ns` serves (or `override`), where it came from, and why
    the cluster's could not be used. With `override`, nothing is read."""
    if override is not None:
        return override, str(config), None
    deployment = get_object(reader, "Deployment", status.DeploymentJSON, DEFAULT_SERVICE, ns)
    return policy_of(reader, deployment, ns, override, config)


def policy_of(
    reader: cluster.Reader,
    deployment: status.Read[status.DeploymentJSON],
    ns: str,
    override: Policy | None,
    config: str | None,
) -> tuple[Policy, str, str | None]:
    """The policy to judge by, where it came from, and why the cluster's could not be used, given
    the webhook's Deployment as read (`status.policy_location`: the ConfigMap it mounts)."""
    if override is not None:
        return override, str(config), None
    builtin = "the built-in default policy"
    if deployment is None:
        return default_policy(), f"{builtin} (no Deployment {DEFAULT_SERVICE} in namespace {ns})", None
    if isinstance(deployment, status.Unknown):
        return default_policy(), f"{builtin} (the webhook's Deployment could not be read)", None
    location = status.policy_location(deployment)
    if location is None:
        return default_policy(), builtin, None
    if location.config_map is None:
        why = f"the webhook's --config {location.path}: {location.elsewhere}"
        return default_policy(), f"{builtin} ({why}; pass --config FILE)", None
    name, key = location.config_map, location.key
    found_at = f"ConfigMap {ns}/{name} key {key}"
    config_map = get_object(reader, "ConfigMap", status.ConfigMapJSON, name, ns)
    if isinstance(config_map, status.Unknown) or config_map is None:
        what = "forbidden" if config_map is not None else "missing"
        return default_policy(), f"{builtin} ({found_at} {what}; pass --config FILE)", None
    text = apidata.string_map(config_map, "data", "data").get(key)
    if text is None:
        return default_policy(), builtin, f"{found_at} does not exist: the webhook cannot load its policy"
    try:
        return policy_from_bytes(text.encode(), found_at), found_at, None
    except PolicyError as err:
        return default_policy(), builtin, f"the webhook's policy is invalid: {err}"


# At most this many ready webhook pods are asked which policy they serve: they agree unless the
# ConfigMap changed twice while it was invalid, and a few answers show it.
SERVED_PODS = 3


def served_policies(reader: cluster.Reader, ns: str, slices: Listed) -> tuple[list[status.Served], str]:
    """What the webhook's ready pods (from the Service's EndpointSlices, up to SERVED_PODS) serve,
    each asked GET /policy through the API server's pod proxy; and why none was asked. A pod that
    cannot be asked (RBAC: get pods/proxy; a pod that does not answer) is a `Served` with its error."""
    if isinstance(slices, status.Unknown):
        return [], f"cannot read {slices.what}"
    ready: list[tuple[str, int]] = []
    for piece in slices:
        ports = [p.get("port") for p in piece.get("ports") or () if isinstance(p, dict)]
        port = next((p for p in ports if isinstance(p, int)), None)
        for endpoint in piece.get("endpoints") or ():
            ref = endpoint.get("targetRef") or {}
            if port and ref.get("kind") == "Pod" and (endpoint.get("conditions") or {}).get("ready") is not False:
                ready.append((str(ref.get("name")), port))
    served = []
    for pod, port in sorted(ready)[:SERVED_PODS]:
        try:
            served.append(status.Served.of(pod, reader.proxy_get(ns, pod, port, "/policy")))
        except cluster.Forbidden:
            served.append(status.Served(pod, error="forbidden by RBAC: needs get on pods/proxy"))
        except cluster.ClusterError as err:
            served.append(status.Served(pod, error=getattr(err, "detail", "") or str(err)))
    return served, "" if ready else "the webhook's Service has no ready pod"


# --- the registration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AdmissionPolicies:
    """Every MutatingAdmissionPolicy and every binding of one, each Unknown where unreadable."""

    policies: Listed
    bindings: Listed


def admission_policies(reader: cluster.Reader) -> AdmissionPolicies:
    """The MutatingAdmissionPolicies and their bindings (every one: the caller picks ours)."""
    return AdmissionPolicies(
        _admission_listed(reader, "MutatingAdmissionPolicy", cluster.BETA_MUTATING_ADMISSION_POLICY),
        _admission_listed(reader, "MutatingAdmissionPolicyBinding", cluster.BETA_MUTATING_ADMISSION_POLICY_BINDING),
    )


def _admission_listed(reader: cluster.Reader, kind: str, beta: str) -> Listed:
    """Every object of an admission policy kind, from its v1 API (Kubernetes 1.36+), else from
    its v1beta1 API (1.34 and 1.35 with the feature enabled); none where the API server serves
    neither (both answer 404).

    Unknown, not none, where RBAC forbids the list, and where this kubernetes client predates the
    API (< 36): a registration that cannot be seen may still call the webhook's mutation, so
    `status` reports it as unknown and `rebalance`, which must not evict a pod whose replacement
    nothing would mutate, treats it as not active and names it (`scope.Live.unreadable`). Reading
    it as "none" would say a bound admission policy is absent. RBAC authorizes a resource, not a
    version, before the API server routes the request: a 403 on v1 holds for v1beta1 too, so it
    is not asked again."""
    for which in (kind, beta):
        try:
            return listed(reader, which)
        except cluster.NotFound:
            continue
        except AttributeError:
            return status.Unknown(f"the {plural(kind)} (this kubernetes client predates their API: upgrade it)")
    return []


def read_registration(reader: cluster.Reader) -> scope.Live:
    """The objects the live registration is read from: the MutatingWebhookConfiguration, the
    EndpointSlices of the Services its entries call, our admission policies and their bindings,
    the Namespaces' labels. What RBAC forbids is left out and named."""
    unreadable: list[str] = []
    configuration = get_object(reader, "MutatingWebhookConfiguration", status.ObjectJSON, CONFIGURATION_NAME)
    if isinstance(configuration, status.Unknown):
        unreadable.append(f"the {configuration.what}")
        configuration = None
    slices = {}
    for namespace, name in sorted(scope.services(configuration)):
        found = listed(reader, "EndpointSlice", namespace, label_selector=f"{scope.SERVICE_NAME_LABEL}={name}")
        if isinstance(found, status.Unknown):
            unreadable.append(found.what)
        else:
            slices[(namespace, name)] = found
    admission = admission_policies(reader)
    policies, bindings = (_known(found, unreadable) for found in (admission.policies, admission.bindings))
    labels = namespaces(reader)
    known_labels = None if isinstance(labels, status.Unknown) else labels
    return scope.Live(configuration, slices, policies, bindings, known_labels, tuple(unreadable))


def _known(found: Listed, unreadable: list[str]) -> list[dict[str, Any]]:
    if isinstance(found, status.Unknown):
        unreadable.append(found.what)
        return []
    return found


def namespaces(reader: cluster.Reader) -> dict[str, dict[str, str]] | status.Unknown:
    """Each Namespace's labels by name (pod affinity's namespaceSelectors and the registration's
    match them), or Unknown. ShapeError for a Namespace no API server stores."""
    found = listed(reader, "Namespace")
    if isinstance(found, status.Unknown):
        return found
    return dict(namespace_info(item) for item in found)


# --- nodes and pods -----------------------------------------------------------------------------


def nodes(reader: cluster.Reader) -> Iterator[dict[str, Any]]:
    """Every Node, a page at a time."""
    return reader.list("Node")


def bound_pods(reader: cluster.Reader) -> Iterator[dict[str, Any]]:
    """Every Pod bound to a node and not Succeeded or Failed, in every namespace, a page at a time:
    the pods the scheduler's cache counts on the nodes."""
    return reader.list("Pod", field_selector=cluster.ASSIGNED_NOT_FINISHED)


def unbound_pods(reader: cluster.Reader) -> Iterator[dict[str, Any]]:
    """Every Pod no node holds yet and not Succeeded or Failed (Pending), in every namespace, a
    page at a time."""
    return reader.list("Pod", field_selector=UNBOUND)


def pods_on_nodes(reader: cluster.Reader, names: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The pods bound to each of the nodes `names` and not finished: one list per node, with the
    field selector `kubectl describe node` sends (`spec.nodeName=NAME`, answered from an index)."""
    for name in names:
        yield from reader.list("Pod", field_selector=f"spec.nodeName={name},{RUNNING}")


class PodFold(Protocol):
    def add(self, index: int, pod: dict[str, Any]) -> None: ...


F = TypeVar("F", bound=PodFold)


def fold_bound_pods(reader: cluster.Reader, new: Callable[[], F], too_many: str) -> F:
    """Every bound pod (`bound_pods`) added to `new()` as its page arrives (`add(index, pod)`), so
    memory holds one page of API JSON and what the fold keeps. A list that expires between pages
    is read again into a fresh `new()`: nothing of the expired snapshot is counted twice. A list
    longer than the reader's page bound is a `ClusterError` ending with `too_many`."""

    def read() -> F:
        fold = new()
        for i, pod in enumerate(bound_pods(reader)):
            fold.add(i, pod)
        return fold

    try:
        return reader.restarting(read)
    except cluster.TooMany as err:
        raise cluster.ClusterError(f"{err}; {too_many}") from None


def selected_pods(reader: cluster.Reader, policy: Policy, namespace: str | None) -> Iterator[dict[str, Any]]:
    """Every running pod (in `namespace`, else everywhere) some rule of `policy` selects, each
    once, listed with the rules' podSelectors as the server-side label selector."""
    seen: set[str] | None = set() if len(policy.rules) > 1 else None  # pods several rules select
    for rule in policy.rules:
        for pod in reader.list(
            "Pod", namespace, label_selector=label_selector(rule.pod_selector), field_selector=RUNNING
        ):
            if seen is not None:
                meta = apidata.obj(pod, "metadata", "metadata")
                uid = apidata.text(meta, "uid", "metadata.uid") or "/".join(
                    apidata.text(meta, key, f"metadata.{key}") for key in ("namespace", "name")
                )
                if uid in seen:
                    continue
                seen.add(uid)
            yield pod


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


# --- what spreads and owns the pods -------------------------------------------------------------


def spread_selectors(reader: cluster.Reader, namespace: str, controller: Owner | None) -> Selectors:
    """What PodTopologySpread's default constraints read for a pod of `namespace`: the Services
    of that namespace, and its `controller` when it is a ReplicationController, ReplicaSet or
    StatefulSet that exists (pkg/scheduler/framework/plugins/helper/spread.go, DefaultSelector)."""
    found = reader.restarting(lambda: list(reader.list("Service", namespace)))
    objects: list[dict[str, Any]] = []
    if controller is not None and controller.kind in SPREAD_CONTROLLERS:
        obj = reader.get(controller.kind, controller.name, namespace)
        if obj is not None:  # an object read alone carries its kind; a list's items do not
            objects.append({**obj, "kind": controller.kind})
    return selectors_from_api(found, objects)


def services(reader: cluster.Reader, namespaces: Iterable[str], notes: list[str]) -> list[dict[str, Any]]:
    """The Services of `namespaces`: one list across every namespace when they are many, else one
    list per namespace (as where RBAC grants a Role per namespace). Those RBAC hides are left out,
    with a note: their pods are then spread by their controller's selector only."""
    wanted = sorted(set(namespaces))
    if len(wanted) > cluster.GETS_BEFORE_LIST:  # one list across namespaces, not one per namespace
        everywhere = reader.restarting(lambda: listed(reader, "Service"))
        if not isinstance(everywhere, status.Unknown):
            keep = set(wanted)
            return [s for s in everywhere if (s.get("metadata") or {}).get("namespace") in keep]
    found: list[dict[str, Any]] = []
    for namespace in wanted:
        some = _services_in(reader, namespace)
        if isinstance(some, status.Unknown):
            notes.append(
                f"cannot list Services in namespace {namespace} (forbidden by RBAC): PodTopologySpread's "
                "default spreading of its replacements counts their controller's pods only"
            )
        else:
            found += some
    return found


def _services_in(reader: cluster.Reader, namespace: str) -> Listed:
    return reader.restarting(lambda: listed(reader, "Service", namespace))


def controllers(
    reader: cluster.Reader, lookups: Iterable[tuple[str, str, str]]
) -> dict[tuple[str, str, str], dict[str, Any] | None | status.Unknown]:
    """The objects at `lookups` ((namespace, kind, name): pods' controllers, and theirs), None where
    one no longer exists, Unknown where RBAC hides it: up to GETS_BEFORE_LIST of a kind a get each
    (RBAC judged per namespace), more with one list of the kind (`Reader.get_many`)."""
    by_kind: dict[str, list[tuple[str, str]]] = {}
    for namespace, kind, name in sorted(set(lookups)):
        by_kind.setdefault(kind, []).append((namespace, name))
    found: dict[tuple[str, str, str], dict[str, Any] | None | status.Unknown] = {}
    for kind, keys in by_kind.items():
        if len(keys) <= cluster.GETS_BEFORE_LIST:
            for ns, name in keys:
                try:
                    found[(ns, kind, name)] = reader.get(kind, name, ns)
                except cluster.Forbidden:
                    found[(ns, kind, name)] = status.Unknown(f"{kind} {name} in namespace {ns}")
            continue
        try:
            found.update({(ns, kind, name): obj for (ns, name), obj in reader.get_many(kind, keys).items()})
        except cluster.Forbidden:
            found.update({(ns, kind, name): status.Unknown(f"{kind} {name} in namespace {ns}") for ns, name in keys})
    return found


def budgets(reader: cluster.Reader) -> Listed:
    """Every PodDisruptionBudget, or Unknown."""
    return reader.restarting(lambda: listed(reader, "PodDisruptionBudget"))


# --- what the API server would admit ------------------------------------------------------------


def may_create_pods(reader: cluster.Reader, namespace: str) -> bool:
    """Whether these credentials may create pods in `namespace` (a SelfSubjectAccessReview), as a
    dry-run create needs."""
    return reader.may("create", "pods", namespace)


def admitted_pod(reader: cluster.Reader, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
    """`pod` as the API server admits it: a dry-run create (dryRun=All), every admission plugin and
    mutating webhook run, nothing stored. `Forbidden` or `Invalid` when admission refuses it."""
    return reader.admit_pod(namespace, pod)


# --- lists and watches that `monitor` keeps live -------------------------------------------------


def list_pages(
    reader: cluster.Reader, kind: str, label_selector: str | None = None, field_selector: str | None = None
) -> Iterator[dict[str, Any]]:
    """Each page of the list of `kind` in every namespace (`cluster.list_pages`): its `items`, and
    on the last page `metadata.resourceVersion`, where a `watch` starts."""
    return cluster.list_pages(reader, kind, label_selector, field_selector)


def watch(
    reader: cluster.Reader,
    kind: str,
    resource_version: str,
    label_selector: str | None = None,
    field_selector: str | None = None,
    timeout_seconds: int = cluster.WATCH_SECONDS,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The events (type, object) of one watch of `kind` in every namespace from `resource_version`
    (`cluster.watch`: bookmarks asked for; `Expired` after a 410 Gone) until the API server ends it
    after `timeout_seconds`."""
    return cluster.watch(reader, kind, resource_version, label_selector, field_selector, timeout_seconds)
