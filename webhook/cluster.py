"""The only user of the `kubernetes` client: everything netqos-webhook does with a live cluster.

- `connect` finds the credentials as kubectl does: `--kubeconfig`, else $KUBECONFIG, else
  ~/.kube/config; with none of them, in a pod, the pod's service account.
- `Reader` gets and lists any of the objects the commands read, read-only, as the API's JSON (the
  data `kubectl get -o json` prints, so parsing, filtering and scoring stay in pure code that the
  file mode shares), through one connection pool; `webhook.commands.clusterread` is the one
  place the commands read through it. Lists go page by page (`limit`/`continue`) with the label and field
  selectors the caller derives, so the server filters and memory holds one page at a time; what
  RBAC forbids raises `Forbidden`, for the caller to report as unknown. A continue token that
  expired (410: etcd compacted past the list's snapshot) raises `Expired`, and
  `Reader.restarting` runs the whole read again from the first page, once.
- `Reader.may` asks the API server whether RBAC allows a request (a SelfSubjectAccessReview);
  `Reader.admit_pod` creates a pod in dry run (`dryRun=All`) and returns it as the API server would
  store it, every admission plugin and webhook applied, nothing written (for `rebalance`).
- `Evictor` (for `rebalance --apply`) evicts pods through the Eviction API, records
  `events.k8s.io/v1` Events and writes the ConfigMap of the evictions made.
- `apply` (for `register`) sends each object by server-side apply under the field manager
  `netqos-webhook`. Server-side apply creates what is missing and changes only the fields in the
  object we send: labels, annotations or other webhook entries added by anyone else stay as they
  are, and a webhook entry of a rule that was removed from the policy is removed, because we
  owned it.

Every failure is a `ClusterError`: one line that names the kubeconfig and context (or the service
account) and the API server, and says what went wrong and what to check. Its `exit_code` is the exit
code: a `KubeconfigError` (2) means the credentials cannot be used at all; any other
`ClusterError` (1) is the cluster failing at run time, unreachable or refusing a request.

`kubernetes` is imported inside the functions, so importing this module costs nothing and the
webhook server, which never calls them, never loads the client.
"""

from __future__ import annotations

import json
import logging
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from webhook import apidata
from webhook.errors import NetqosError
from webhook.names import ADMISSION_API_VERSION, FIELD_MANAGER

# Seconds: connect (the TLS handshake included), and read (each wait for bytes of the answer).
# With one retry of a failed connect and none of a read, a cluster that never answers is one line
# within 10 s: 2 x 4 s when connections go nowhere, 8 s when it accepts and stays silent.
REQUEST_TIMEOUT = (4, 8)
# A dry-run create passes through every mutating and validating webhook, each allowed up to its
# timeoutSeconds (at most 30 s; 10 s by default): its answer may take that long.
DRY_RUN_TIMEOUT = (4, 32)
PAGE_SIZE = 500  # objects per list request: kubectl's chunk size; bounds the memory of one page
MAX_POD_PAGES = 1000  # explain holds every pod: at most 500,000, far above Kubernetes' tested 150,000
MAX_PAGES = 10_000  # any other list is read a page at a time: a bound on a list that never ends
# The pods that take a node's resources: bound to a node, not finished (as the scheduler's cache).
ASSIGNED_NOT_FINISHED = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/strategic-merge-patch+json"
IN_CLUSTER = "the in-cluster service account"
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
T = TypeVar("T")


class ClusterError(NetqosError, RuntimeError):
    """The cluster failed at run time: unreachable, or it refused a request (exit code 1)."""

    exit_code = 1
    detail = ""  # the API server's own answer (`HTTP 429 Too Many Requests: <its message>`) when it gave one


class Forbidden(ClusterError):
    """The API server answered 403: RBAC does not let these credentials read or change this."""


class NotFound(ClusterError):
    """The API server answered 404: the object (or its namespace) does not exist."""


class TooMany(ClusterError):
    """A list went on past the reader's page bound."""


class Invalid(ClusterError):
    """The API server answered 422: the object fails its validation."""


class Conflict(ClusterError):
    """The API server answered 409: the object changed since it was read (its resourceVersion), or
    one of that name exists already."""


class Expired(ClusterError):
    """The API server answered 410 to a page of a list: its continue token is older than etcd's
    last compaction, so the rest of that consistent snapshot is gone. `Reader.restarting` reads
    again from the first page."""


class TooManyRequests(ClusterError):
    """The API server answered 429. For an eviction, a PodDisruptionBudget that allows no disruption
    now says so in its Status: a cause of type `DisruptionBudget` (k8s.io/api/policy/v1
    DisruptionBudgetCause; pkg/registry/core/pod/storage/eviction.go, v1.36.3). API Priority and
    Fairness answers 429 too, without that cause and with a Retry-After header."""

    causes: tuple[str, ...] = ()  # the types of the Status's details.causes
    retry_after: float | None = None  # seconds, from the Retry-After header

    @property
    def disruption_budget(self) -> bool:
        return DISRUPTION_BUDGET_CAUSE in self.causes


class KubeconfigError(ClusterError):
    """No usable credentials: the kubeconfig (or the service account) cannot be loaded (exit code 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Connection:
    """A cluster to talk to: the client configuration, and where it came from for messages."""

    configuration: Any  # kubernetes.client.Configuration
    where: str  # "kubeconfig FILE[, context NAME]" or IN_CLUSTER
    namespace: str = "default"  # the context's namespace (the service account's in a pod): kubectl's default -n

    @property
    def host(self) -> str:
        return str(self.configuration.host)


def connect(kubeconfig: str | None = None, context: str | None = None) -> Connection:
    """The cluster of `kubeconfig` (else $KUBECONFIG or ~/.kube/config) and `context`, or, when
    there is no kubeconfig and this runs in a pod, of the pod's service account.

    Raises `KubeconfigError` naming the file (or the service account) and what to do.
    """
    from kubernetes import client  # lazy on purpose, see the module doc
    from kubernetes import config as untyped_config

    config: Any = untyped_config  # its loaders carry no annotations
    configuration = client.Configuration()
    if (
        kubeconfig is None
        and context is None
        and os.environ.get("KUBERNETES_SERVICE_HOST")
        and not default_kubeconfig_exists()
    ):
        where = IN_CLUSTER
        hint = "check that the pod mounts its service account token (automountServiceAccountToken)"

        def load() -> None:
            config.load_incluster_config(client_configuration=configuration)

        def namespace() -> str:
            return _service_account_namespace()
    else:
        source = kubeconfig_source(kubeconfig)
        _check_readable(kubeconfig)
        _check_shape(source)
        where = f"kubeconfig {source}" + (f", context {context}" if context else "")
        hint = (
            "check the file and the context name (kubectl"
            + (f" --kubeconfig {kubeconfig}" if kubeconfig else "")
            + " config get-contexts)"
        )

        def load() -> None:
            # The file is named here, not left to the client: it reads $KUBECONFIG once, at import.
            config.load_kube_config(config_file=source, context=context, client_configuration=configuration)

        def namespace() -> str:
            contexts, current = config.list_kube_config_contexts(config_file=source)
            chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
            return str(((chosen or {}).get("context") or {}).get("namespace") or "default")

    # The client reports some failures only as log lines and goes on without credentials (an exec
    # credential plugin that is missing or fails: `logging.error`); urllib3 logs each retry. Both
    # are caught here and said in our one line, never printed as library log lines.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    with _LibraryErrors() as library:
        try:
            load()
        except Exception as err:  # ConfigException, YAML errors, unreadable certificate files...
            raise KubeconfigError(f"cannot use {where}: {_first_line(err)}; {hint}") from None
    if library.errors:
        raise KubeconfigError(
            f"cannot use {where}: its credential plugin (user.exec) failed: {_first_line(library.errors[0])}; "
            "install the command it names or put it on the PATH, and check that it runs (kubectl"
            + (f" --kubeconfig {kubeconfig}" if kubeconfig else "")
            + " get --raw /version)"
        )
    _check_server(str(configuration.host or ""), where)
    configuration.retries = _retries()
    if not configuration.verify_ssl:  # insecure-skip-tls-verify: kubectl says nothing of it on each request
        import urllib3

        warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
    try:
        default_namespace = namespace()
    except Exception:  # loaded already: a namespace it cannot tell is kubectl's default
        default_namespace = "default"
    return Connection(configuration, where, default_namespace)


def _service_account_namespace() -> str:
    """The pod's own namespace, which kubectl in a pod uses by default (rest.InClusterConfig)."""
    try:
        return Path(SERVICE_ACCOUNT_NAMESPACE).read_text().strip() or "default"
    except OSError:
        return "default"


class _LibraryErrors(logging.Handler):
    """Collects the ERROR records logged while it is installed on the root logger (instead of
    Python printing them on stderr for want of a handler)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.errors: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.errors.append(record.getMessage())

    def __enter__(self) -> _LibraryErrors:
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger().removeHandler(self)


def _check_shape(source: str) -> None:
    """Each kubeconfig file is one YAML mapping (`apiVersion: v1`, `kind: Config`, ...), read by
    the one document reader (its line and column, its depth limit): the client would index into a
    list or a string, or recurse through a document nested thousands deep, in Python's words."""
    from webhook.documents import OBJECT_LIMIT, document_from_bytes, read_bytes

    for path in (p for p in source.split(os.pathsep) if p):
        if not os.path.exists(os.path.expanduser(path)):
            continue  # missing files of a $KUBECONFIG list are skipped, as kubectl skips them
        try:  # at most OBJECT_LIMIT bytes: /dev/zero ends here, not in the client
            data = read_bytes(os.path.expanduser(path), "kubeconfig", KubeconfigError, OBJECT_LIMIT)
            document = document_from_bytes(data, path, "kubeconfig", KubeconfigError)
        except KubeconfigError as err:
            raise KubeconfigError(f"cannot use {err}") from None
        if document is not None and not isinstance(document, dict):
            raise KubeconfigError(
                f"kubeconfig {path} is {apidata.describe(document)}, not a kubeconfig (a mapping with apiVersion: v1, "
                "kind: Config, clusters, users and contexts); check the path (kubectl config view)"
            )


def _check_server(host: str, where: str) -> None:
    """The API server's address, as the kubeconfig's cluster gives it: an http(s) URL with a host."""
    url = urlsplit(host)
    if url.scheme not in ("http", "https") or not url.hostname:
        said = f"{host!r}" if host else "empty"
        raise KubeconfigError(
            f"cannot use {where}: the cluster's server (clusters[].cluster.server) is {said}, not an https URL "
            "of an API server; set it, e.g. https://203.0.113.10:6443"
        )


def _retries() -> Any:
    """One more try for a connection that failed to open (a refused one; urllib3 would try three
    times more), none for an answer that did not come in time: timeouts must not add up."""
    from urllib3.util.retry import Retry  # the client's transport, as lazy as the client

    return Retry(total=1, connect=1, read=0, status=0, other=0, redirect=0, raise_on_redirect=False)


def kubeconfig_source(kubeconfig: str | None) -> str:
    """The kubeconfig `connect` reads: `kubeconfig`, else $KUBECONFIG, else ~/.kube/config."""
    return kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"


def _check_readable(kubeconfig: str | None) -> None:
    if kubeconfig is None:
        if not default_kubeconfig_exists():
            looked = f"$KUBECONFIG ({os.environ['KUBECONFIG']})" if os.environ.get("KUBECONFIG") else "~/.kube/config"
            raise KubeconfigError(
                f"no kubeconfig: {looked} does not exist, and this is not a pod in a cluster; pass --kubeconfig FILE"
            )
        return
    try:
        with open(kubeconfig, "rb"):
            pass
    except OSError as err:
        raise KubeconfigError(f"cannot read kubeconfig {kubeconfig}: {err.strerror}; check the path") from None


def default_kubeconfig_exists() -> bool:
    """Whether a kubeconfig is there without --kubeconfig: a file $KUBECONFIG names, else ~/.kube/config."""
    paths = os.environ.get("KUBECONFIG")
    if paths:
        return any(Path(p).expanduser().exists() for p in paths.split(os.pathsep) if p)
    return Path("~/.kube/config").expanduser().exists()


# The beta API's names for the kinds whose GA version has the plain name.
BETA_MUTATING_ADMISSION_POLICY = "MutatingAdmissionPolicy (v1beta1)"
BETA_MUTATING_ADMISSION_POLICY_BINDING = "MutatingAdmissionPolicyBinding (v1beta1)"
# kind -> (API class, read method, list method, cluster-scoped, plural for RBAC hints)
_READ = {
    "Namespace": ("CoreV1Api", "read_namespace", "list_namespace", True, "namespaces"),
    "Node": ("CoreV1Api", "read_node", "list_node", True, "nodes"),
    "Pod": ("CoreV1Api", "read_namespaced_pod", "list_namespaced_pod", False, "pods"),
    "ConfigMap": ("CoreV1Api", "read_namespaced_config_map", "list_namespaced_config_map", False, "configmaps"),
    "Secret": ("CoreV1Api", "read_namespaced_secret", "list_namespaced_secret", False, "secrets"),
    "Service": ("CoreV1Api", "read_namespaced_service", "list_namespaced_service", False, "services"),
    "Deployment": ("AppsV1Api", "read_namespaced_deployment", "list_namespaced_deployment", False, "deployments"),
    "ReplicaSet": ("AppsV1Api", "read_namespaced_replica_set", "list_namespaced_replica_set", False, "replicasets"),
    "StatefulSet": ("AppsV1Api", "read_namespaced_stateful_set", "list_namespaced_stateful_set", False, "statefulsets"),
    "DaemonSet": ("AppsV1Api", "read_namespaced_daemon_set", "list_namespaced_daemon_set", False, "daemonsets"),
    "ReplicationController": (
        "CoreV1Api",
        "read_namespaced_replication_controller",
        "list_namespaced_replication_controller",
        False,
        "replicationcontrollers",
    ),
    "Job": ("BatchV1Api", "read_namespaced_job", "list_namespaced_job", False, "jobs"),
    "CronJob": ("BatchV1Api", "read_namespaced_cron_job", "list_namespaced_cron_job", False, "cronjobs"),
    "LimitRange": ("CoreV1Api", "read_namespaced_limit_range", "list_namespaced_limit_range", False, "limitranges"),
    "RuntimeClass": ("NodeV1Api", "read_runtime_class", "list_runtime_class", True, "runtimeclasses"),
    "PodDisruptionBudget": (
        "PolicyV1Api",
        "read_namespaced_pod_disruption_budget",
        "list_namespaced_pod_disruption_budget",
        False,
        "poddisruptionbudgets",
    ),
    "EndpointSlice": (
        "DiscoveryV1Api",
        "read_namespaced_endpoint_slice",
        "list_namespaced_endpoint_slice",
        False,
        "endpointslices",
    ),
    "MutatingWebhookConfiguration": (
        "AdmissionregistrationV1Api",
        "read_mutating_webhook_configuration",
        "list_mutating_webhook_configuration",
        True,
        "mutatingwebhookconfigurations",
    ),
    # GA in Kubernetes 1.36 (admissionregistration.k8s.io/v1); the client has them from v36.
    "MutatingAdmissionPolicy": (
        "AdmissionregistrationV1Api",
        "read_mutating_admission_policy",
        "list_mutating_admission_policy",
        True,
        "mutatingadmissionpolicies",
    ),
    "MutatingAdmissionPolicyBinding": (
        "AdmissionregistrationV1Api",
        "read_mutating_admission_policy_binding",
        "list_mutating_admission_policy_binding",
        True,
        "mutatingadmissionpolicybindings",
    ),
    # Beta on Kubernetes 1.34 and 1.35 (admissionregistration.k8s.io/v1beta1, behind a feature gate).
    BETA_MUTATING_ADMISSION_POLICY: (
        "AdmissionregistrationV1beta1Api",
        "read_mutating_admission_policy",
        "list_mutating_admission_policy",
        True,
        "mutatingadmissionpolicies",
    ),
    BETA_MUTATING_ADMISSION_POLICY_BINDING: (
        "AdmissionregistrationV1beta1Api",
        "read_mutating_admission_policy_binding",
        "list_mutating_admission_policy_binding",
        True,
        "mutatingadmissionpolicybindings",
    ),
}
# Namespaced kinds listed across every namespace when no namespace is given.
_LIST_ALL = {
    "Pod": "list_pod_for_all_namespaces",
    "PodDisruptionBudget": "list_pod_disruption_budget_for_all_namespaces",
    "LimitRange": "list_limit_range_for_all_namespaces",
    "Service": "list_service_for_all_namespaces",
    "Deployment": "list_deployment_for_all_namespaces",
    "ReplicaSet": "list_replica_set_for_all_namespaces",
    "StatefulSet": "list_stateful_set_for_all_namespaces",
    "DaemonSet": "list_daemon_set_for_all_namespaces",
    "ReplicationController": "list_replication_controller_for_all_namespaces",
    "Job": "list_job_for_all_namespaces",
    "CronJob": "list_cron_job_for_all_namespaces",
}
# `Reader.get_many`: up to this many objects of a kind, one get each; past it, the kind is listed in
# every namespace while the list is at most one page per GETS_PER_PAGE objects wanted (a page of
# 500 objects costs the API server and the client about as much as that many gets).
GETS_BEFORE_LIST = 20
GETS_PER_PAGE = 10


class Reader:
    """Read-only access to one cluster: `get` one object, `list` objects page by page.

    Every answer is the API server's JSON decoded into plain data (the client's model objects
    are never built: they cost several times the memory and time). Use it as a context manager;
    it holds one connection pool.
    """

    def __init__(self, cluster: Connection, page_size: int = PAGE_SIZE, max_pages: int = MAX_PAGES) -> None:
        from kubernetes import client

        self.cluster = cluster
        self.page_size = page_size
        self.max_pages = max_pages  # a list that never ends (a broken continue token) still ends here
        self._api: Any = client.ApiClient(cluster.configuration)
        self._apis: dict[str, Any] = {}
        self.requests = 0  # requests sent: gets and pages
        self.restarts = 0  # reads `restarting` began again after a list expired

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._api.close()

    def restarting(self, read: Callable[[], T]) -> T:
        """`read()`, and once more from the start when a list it makes expires between two pages.

        The API server answers 410 Expired to a continue token older than etcd's last compaction
        (its own compactor runs every 5 minutes). client-go's pager (k8s.io/client-go/tools/pager,
        `FullListIfExpired`) then lists again without pages; here the pages stay (memory holds one
        at a time) and the whole `read` starts over: whatever it built from the expired snapshot is
        dropped, never mixed with the new one. A second expiry is a `ClusterError`."""
        try:
            return read()
        except Expired:
            self.restarts += 1
        try:
            return read()
        except Expired as err:
            raise ClusterError(
                f"{err}; it expired again after one restart: etcd is compacted faster than the list can be "
                "read, try again when the cluster is less busy"
            ) from None

    def version(self) -> dict[str, Any]:
        """The API server's /version (gitVersion, major, minor, ...): which release it is."""
        response = _request(
            self.cluster,
            "say its version",
            lambda: self._client("VersionApi").get_code(_preload_content=False, _request_timeout=REQUEST_TIMEOUT).data,
            forbidden="check that your user may get /version (kubectl get --raw /version)",
        )
        return self._decode(response, "/version")

    def proxy_get(self, namespace: str, pod: str, port: int, path: str) -> dict[str, Any]:
        """GET `path` of a pod's HTTPS `port` through the API server's pod proxy
        (GET /api/v1/namespaces/NS/pods/https:POD:PORT/proxy/PATH, the verb get on pods/proxy),
        decoded as a JSON object. `Forbidden` without the right; `ClusterError` when the pod does
        not answer (the API server says why, e.g. 503)."""
        self.requests += 1
        proxy = self._client("CoreV1Api").connect_get_namespaced_pod_proxy_with_path
        response = _request(
            self.cluster,
            f"proxy GET {path} to pod {pod} in namespace {namespace}",
            lambda: (
                proxy(
                    f"https:{pod}:{port}",
                    namespace,
                    path.lstrip("/"),
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                ).data
            ),
            forbidden=_can_i("get", "pods/proxy", namespace),
        )
        return self._decode(response, f"{path} of pod {pod}")

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it does not exist; `Forbidden` when RBAC hides it."""
        api_class, read, _, cluster_scoped, plural = _READ[kind]
        method = getattr(self._client(api_class), read)
        args = (name,) if cluster_scoped else (name, namespace)
        where = f" in namespace {namespace}" if namespace else ""
        self.requests += 1
        try:
            response = _request(
                self.cluster,
                f"get {kind.lower()} {name}{where}",
                lambda: method(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT).data,
                forbidden=_can_i("get", plural, namespace),
            )
        except NotFound:
            return None
        return self._decode(response, f"{kind} {name}")

    def get_many(self, kind: str, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any] | None]:
        """The objects of `kind` at `keys` ((namespace, name) each), None where one does not exist;
        `Forbidden` when RBAC hides them. A few are read with a get each; many with one paginated
        list of the kind in every namespace (GETS_BEFORE_LIST), as long as the list is short beside
        them: its first page says how many objects remain (`remainingItemCount`), and a list that
        would take more than one page per GETS_PER_PAGE objects wanted stops there for gets. Where
        RBAC forbids listing across namespaces, gets."""
        wanted = sorted(set(keys))
        found: dict[tuple[str, str], dict[str, Any] | None] = {}
        if len(wanted) > GETS_BEFORE_LIST and kind in _LIST_ALL:
            try:
                found = self.restarting(lambda: self._listed_at(kind, set(wanted)))
            except Forbidden:
                found = {}
        for namespace, name in wanted:
            if (namespace, name) not in found:
                found[(namespace, name)] = self.get(kind, name, namespace)
        return found

    def _listed_at(self, kind: str, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any] | None]:
        """The `wanted` objects found in one list of `kind` in every namespace (None for those
        the whole list did not hold); {} for what is left to gets when the list is long beside them.
        Stateless: `restarting` may run it again."""
        found: dict[tuple[str, str], dict[str, Any] | None] = {}
        pages = self._pages(kind, None, {})
        for page in pages:
            left = (page.get("metadata") or {}).get("remainingItemCount")
            if isinstance(left, int) and left > self.page_size * max(1, len(wanted) // GETS_PER_PAGE):
                return found  # a long list: the rest are read with gets
            for obj in page.get("items") or ():
                meta = obj.get("metadata") or {}
                key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                if key in wanted:
                    found[key] = obj
        return {key: found.get(key) for key in wanted}

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every object of `kind` (in `namespace`, else everywhere) the selectors select, one page
        in memory at a time. `Expired` when a page's continue token has expired: run the read
        that consumes the list under `restarting`."""
        options: dict[str, Any] = {}
        if label_selector:
            options["label_selector"] = label_selector
        if field_selector:
            options["field_selector"] = field_selector
        for page in self._pages(kind, namespace, options):
            yield from page.get("items") or ()

    def _pages(self, kind: str, namespace: str | None, options: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Each page of the list of `kind` (in `namespace`, else everywhere) with `options`
        (selectors), decoded."""
        api_class, _, list_method, cluster_scoped, plural = _READ[kind]
        api = self._client(api_class)
        args: tuple[str, ...] = ()
        if cluster_scoped:
            method = getattr(api, list_method)
        elif namespace is None:
            method = getattr(api, _LIST_ALL[kind])  # only kinds listed there are read across namespaces
        else:
            method, args = getattr(api, list_method), (namespace,)
        options = {"limit": self.page_size, **options}
        where = f" in namespace {namespace}" if namespace else ""
        token: str | None = None
        for _ in range(self.max_pages):
            extra = {"_continue": token} if token else {}
            self.requests += 1
            response = _request(
                self.cluster,
                f"list {plural}{where}",
                lambda extra=extra: (
                    method(  # type: ignore[misc]
                        *args, **options, **extra, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
                    ).data
                ),
                forbidden=_can_i("list", plural, namespace),
            )
            page = self._decode(response, f"the list of {plural}")
            del response
            yield page
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return
        raise TooMany(
            f"the API server at {self.cluster.host} ({self.cluster.where}) listed more than "
            f"{self.max_pages * self.page_size} {plural}{where}"
        )

    def may(self, verb: str, resource: str, namespace: str) -> bool:
        """Whether RBAC lets these credentials `verb` `resource` in `namespace`: a
        SelfSubjectAccessReview, which every authenticated user may create (system:basic-user)
        and which changes nothing. `Forbidden` where even that is refused."""
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace}},
        }
        api = self._client("AuthorizationV1Api")
        self.requests += 1
        response = _request(
            self.cluster,
            f"review whether it may {verb} {resource} in namespace {namespace}",
            lambda: (
                api.create_self_subject_access_review(
                    body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
                ).data
            ),
            forbidden="check that your user may create selfsubjectaccessreviews (system:basic-user grants it)",
        )
        return self._decode(response, "the access review").get("status", {}).get("allowed") is True

    def admit_pod(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
        """The pod as the API server would store it if `pod` were created in `namespace` now: a
        server-side dry run (`dryRun=All`), which runs every admission plugin and every mutating
        and validating webhook and admission policy (each registered with sideEffects None or
        NoneOnDryRun) and writes nothing. `Forbidden` when RBAC or an admission plugin or webhook
        refuses it, `Invalid` when it fails validation, another `ClusterError` when it fails.
        A webhook may take up to its timeoutSeconds (at most 30 s), so the read waits longer."""
        self.requests += 1
        path = f"/api/v1/namespaces/{namespace}/pods"
        response = _request(
            self.cluster,
            f"create (dry run) a pod in namespace {namespace}",
            lambda: _post_json(self._api, path, [("dryRun", "All")], pod, DRY_RUN_TIMEOUT),
            forbidden=_can_i("create", "pods", namespace),
        )
        return self._decode(response, "the dry run of a pod")

    def _client(self, name: str) -> Any:
        if name not in self._apis:
            from kubernetes import client

            self._apis[name] = getattr(client, name)(self._api)
        return self._apis[name]

    def _decode(self, data: bytes, what: str) -> dict[str, Any]:
        import orjson  # the server's JSON library; decodes a page in about half json's time

        try:
            decoded = orjson.loads(data)
        except orjson.JSONDecodeError:
            decoded = None
        if not isinstance(decoded, dict):
            raise ClusterError(
                f"the API server at {self.cluster.host} ({self.cluster.where}) did not answer {what} with a "
                "JSON object; check that --kubeconfig/--context point at a Kubernetes API server"
            )
        return decoded


def _post_json(api: Any, path: str, query: list[tuple[str, str]], body: dict[str, Any], timeout: Any) -> bytes:
    """POST `body` to `path` as the JSON it is, and the answer's bytes; a non-2xx answer raises the
    client's ApiException, as its generated methods do. The generated `create_namespaced_pod`
    would first validate the body against the client's own Pod model, which refuses fields newer
    than the client and ownerReferences without a uid: the API server is the judge of the pod."""
    from kubernetes.client.exceptions import ApiException

    request = api.param_serialize(
        "POST",
        path,
        query_params=query,
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*request, _request_timeout=timeout)
    data = response.read()
    if not 200 <= response.status <= 299:
        raise ApiException.from_response(http_resp=response, body=None, data=None)
    return bytes(data)


def _can_i(verb: str, plural: str, namespace: str | None) -> str:
    scope = f" -n {namespace}" if namespace else (" -A" if plural == "pods" else "")
    return f"check that your user may {verb} {plural} (kubectl auth can-i {verb} {plural}{scope})"


class Evictor:
    """Evicts pods through the Eviction API (`policy/v1`, `POST .../pods/NAME/eviction`), so the
    API server checks every PodDisruptionBudget that selects the pod and answers 429 when one
    allows no disruption now. A context manager; it holds one connection pool."""

    def __init__(self, cluster: Connection) -> None:
        from kubernetes import client

        self.cluster = cluster
        self._api: Any = client.ApiClient(cluster.configuration)
        self._core: Any = client.CoreV1Api(self._api)

    def __enter__(self) -> Evictor:
        return self

    def __exit__(self, *exc: object) -> None:
        self._api.close()

    def evict(self, namespace: str, name: str, uid: str = "") -> None:
        """Evict the pod; with `uid`, only that pod (not a new one of the same name: 409).

        Raises `TooManyRequests` (429: a PodDisruptionBudget blocks it), `NotFound` (404: the
        pod is gone), `Forbidden` (403) or another `ClusterError`.
        """
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        _request(
            self.cluster,
            f"evict pod {name} in namespace {namespace}",
            lambda: self._core.create_namespaced_pod_eviction(
                name, namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            ),
            forbidden=(
                "check that your user may create pods/eviction "
                f"(kubectl auth can-i create pods/eviction -n {namespace})"
            ),
        )

    def record_event(self, event: dict[str, Any]) -> None:
        """Create an `events.k8s.io/v1` Event (in its metadata's namespace). Raises `ClusterError`."""
        namespace = event["metadata"]["namespace"]
        events = self._events()
        _request(
            self.cluster,
            f"create an event in namespace {namespace}",
            lambda: events.create_namespaced_event(
                namespace, event, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            ),
            forbidden=(
                "check that your user may create events.events.k8s.io "
                f"(kubectl auth can-i create events.events.k8s.io -n {namespace})"
            ),
        )

    def write_config_map(
        self, namespace: str, name: str, data: dict[str, str], existing: dict[str, Any] | None
    ) -> None:
        """Write the ConfigMap's data: `existing` (as read) with `data` in place of its own, by an
        update that holds only while it is still at the resourceVersion it was read at (else
        `Conflict`); None: create it (`Conflict` when one of that name exists). Raises
        `ClusterError`."""
        if existing is None:
            verb = "create"
            body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
            send = lambda: self._core.create_namespaced_config_map(  # noqa: E731
                namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        else:
            verb = "update"
            body = {**existing, "data": data}
            send = lambda: self._core.replace_namespaced_config_map(  # noqa: E731
                name, namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        _request(
            self.cluster,
            f"{verb} configmap {name} in namespace {namespace}",
            send,
            forbidden=f"check that your user may {verb} it (kubectl auth can-i {verb} configmap/{name} -n {namespace})",
        )

    def _events(self) -> Any:
        from kubernetes import client

        return client.EventsV1Api(self._api)


def check_api_server(cluster: Connection) -> None:
    """Prove the credentials usable before anything is written: the server answers the discovery
    of admissionregistration.k8s.io/v1 (`GET /apis/admissionregistration.k8s.io/v1`, what kubectl
    reads before it applies) with the APIResourceList a Kubernetes API server sends, listing
    mutatingwebhookconfigurations. A login page or a proxy answering 200 to everything is not one,
    and is said so in one line naming the server (`ClusterError`, exit code 1)."""
    from kubernetes import client

    path = f"/apis/{ADMISSION_API_VERSION}"
    with client.ApiClient(cluster.configuration) as api:
        response = _request(
            cluster,
            f"GET {path}",
            lambda: client.AdmissionregistrationV1Api(api).get_api_resources(
                _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            ),
            forbidden="a Kubernetes API server lets every authenticated user read its discovery; check the credentials",
        )
        data, content_type = response.data, str(response.getheader("Content-Type") or "no content type")
    try:
        decoded = json.loads(data)
    except ValueError:
        decoded = None
    resources = decoded.get("resources") if isinstance(decoded, dict) else None
    names = {r.get("name") for r in resources if isinstance(r, dict)} if isinstance(resources, list) else set()
    if not (
        isinstance(decoded, dict)
        and decoded.get("kind") == "APIResourceList"
        and decoded.get("groupVersion") == ADMISSION_API_VERSION
        and "mutatingwebhookconfigurations" in names
    ):
        what = "JSON of another shape" if decoded is not None else f"{len(data)} bytes of {content_type.split(';')[0]}"
        raise ClusterError(
            f"the server at {cluster.host} ({cluster.where}) is not a Kubernetes API server: GET {path} answered "
            f"HTTP {response.status} with {what}, not the APIResourceList listing mutatingwebhookconfigurations; "
            "check that the kubeconfig's server is the cluster's API server, not a login page or proxy "
            "(kubectl config view --minify)"
        )


def apply(cluster: Connection, objs: list[dict[str, Any]], report: Callable[[str], None] = print) -> None:
    """Server-side apply each object (Secrets and MutatingWebhookConfigurations) in order; report
    one line per object. Stops at the first failure with a `ClusterError`."""
    from kubernetes import client

    with client.ApiClient(cluster.configuration) as api:
        # Every request of this client is a server-side apply. A default header overrides the
        # content type the generated PATCH methods pick (the client's own `_content_type` option
        # only exists in recent versions), in every client version pyproject.toml allows.
        api.set_default_header("Content-Type", APPLY_PATCH)
        core = client.CoreV1Api(api)
        admission = client.AdmissionregistrationV1Api(api)
        for obj in objs:
            if obj["kind"] == "MutatingWebhookConfiguration":
                _switch_client_config(cluster, api, obj, report)
            response = _apply_one(cluster, core, admission, obj)
            report(f"{describe(obj)} {'created' if response.status == 201 else 'configured'} (server-side apply)")


def _switch_client_config(cluster: Connection, api: Any, obj: dict[str, Any], report: Callable[[str], None]) -> None:
    """Entries of the configuration in the cluster that call the webhook the other way (a Service
    where `obj` gives a URL, or the reverse), switched to `obj`'s clientConfig in one strategic
    merge patch. `url` and `service` are exclusive, and server-side apply cannot remove a field
    another manager owns (`kubectl apply -k deploy/base` owns `service`): applying `url` beside it
    would be refused as invalid. The patch names the entries it switches (the list is keyed by
    name) and the resourceVersion it read, so it changes nothing it did not see; a configuration
    it may not read is left to the apply."""
    from kubernetes import client

    name = obj["metadata"]["name"]
    try:
        current = _request(
            cluster,
            f"get mutatingwebhookconfiguration {name}",
            lambda: client.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(
                name, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            ),
            forbidden="",
        )
    except (NotFound, Forbidden):
        return
    try:
        existing = json.loads(current.data)
    except ValueError:
        return
    theirs = {w.get("name"): w.get("clientConfig") or {} for w in existing.get("webhooks") or [] if isinstance(w, dict)}
    switched = []
    for webhook in obj["webhooks"]:
        ours = webhook["clientConfig"]
        mode, other = ("url", "service") if "url" in ours else ("service", "url")
        if other in theirs.get(webhook["name"], {}):
            switched.append({"name": webhook["name"], "clientConfig": {other: None, mode: ours[mode]}})
    if not switched:
        return
    patch = {"metadata": {"resourceVersion": existing["metadata"]["resourceVersion"]}, "webhooks": switched}
    with client.ApiClient(cluster.configuration) as merging:
        merging.set_default_header("Content-Type", MERGE_PATCH)  # as `apply` sets its own: every client version
        _request(
            cluster,
            f"switch the clientConfig of mutatingwebhookconfiguration/{name}",
            lambda: client.AdmissionregistrationV1Api(merging).patch_mutating_webhook_configuration(
                name, body=patch, field_manager=FIELD_MANAGER, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            ),
            forbidden="switching it needs the verb patch on mutatingwebhookconfigurations; run as a cluster admin",
        )
    mode = "url" if "url" in obj["webhooks"][0]["clientConfig"] else "service"
    report(
        f"mutatingwebhookconfiguration/{name}: switched {', '.join(w['name'] for w in switched)} to "
        f"clientConfig.{mode} (url and service are exclusive)"
    )


def _apply_one(cluster: Connection, core: Any, admission: Any, obj: dict[str, Any]) -> Any:
    """Server-side apply one Secret or MutatingWebhookConfiguration; the raw response."""
    name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace")
    patch: Callable[..., Any]
    args: tuple[str, ...]
    if obj["kind"] == "Secret":
        patch, args = core.patch_namespaced_secret, (name, namespace)
        scope, can_i = f"secrets in namespace {namespace}", f"secrets -n {namespace}"
    elif obj["kind"] == "ValidatingWebhookConfiguration":  # the check of the policy ConfigMap
        patch, args = admission.patch_validating_webhook_configuration, (name,)
        scope, can_i = "cluster-scoped validatingwebhookconfigurations", "validatingwebhookconfigurations"
    else:
        patch, args = admission.patch_mutating_webhook_configuration, (name,)
        scope, can_i = "cluster-scoped mutatingwebhookconfigurations", "mutatingwebhookconfigurations"
    missing = None
    if namespace:
        missing = (
            f"create the namespace first: 'kubectl apply -k deploy/base' (or 'kubectl create namespace "
            f"{namespace}'), or pass --namespace"
        )
    return _request(
        cluster,
        f"apply {describe(obj)}",
        lambda: patch(
            *args,
            body=obj,
            field_manager=FIELD_MANAGER,
            force=True,
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        ),
        forbidden=(
            f"applying it needs the verbs create and patch on {scope} (kubectl auth can-i patch {can_i}); "
            "run as a cluster administrator or grant them with RBAC"
        ),
        missing=missing,
    )


def describe(obj: dict[str, Any]) -> str:
    """An API object as a person reads it: `secret/NAME in namespace NS`."""
    meta = obj["metadata"]
    where = f" in namespace {meta['namespace']}" if meta.get("namespace") else ""
    return f"{obj['kind'].lower()}/{meta['name']}{where}"


# --- one request, and what its failures say ----------------------------------------------------


def _request(
    cluster: Connection, action: str, send: Callable[[], Any], forbidden: str, missing: str | None = None
) -> Any:
    """`send()`, with every failure a `ClusterError`. `action` completes "refused to ...";
    `forbidden` and `missing` say what to do about a 403 and a 404."""
    import urllib3  # the client's transport, as lazy as the client
    from kubernetes import client

    try:
        return send()
    except client.ApiException as err:
        if err.status:  # the API server answered, and said no
            if 300 <= err.status < 400:  # an API server never redirects an API request; a login page does
                where = (err.headers or {}).get("Location") or "elsewhere"
                raise ClusterError(
                    f"the server at {cluster.host} ({cluster.where}) is not a Kubernetes API server: asked to "
                    f"{action}, it redirected to {where} (HTTP {err.status}); check that the kubeconfig's server is "
                    "the cluster's API server, not a login page or proxy (kubectl config view --minify)"
                ) from None
            hint = {
                401: "the credentials were rejected: log in again or pick another --context",
                403: forbidden,
                404: missing,
            }.get(err.status)
            error = {
                403: Forbidden,
                404: NotFound,
                409: Conflict,
                410: Expired,
                422: Invalid,
                429: TooManyRequests,
            }.get(err.status, ClusterError)
            refused = error(
                f"the API server at {cluster.host} ({cluster.where}) refused to {action}: {_api_error(err)}"
                + (f"; {hint}" if hint else "")
            )
            refused.detail = _api_error(err)
            if isinstance(refused, TooManyRequests):
                refused.causes, refused.retry_after = _causes(err), _retry_after(err)
            raise refused from None
        # Status 0: no answer. The client reports some TLS failures so, as "SSLError\n<what failed>".
        failure = _first_line(str(err.reason).strip().splitlines()[-1])
    except (urllib3.exceptions.HTTPError, OSError) as err:  # refused, timed out, TLS, DNS...
        failure = _connection_failure(err)
    raise ClusterError(
        f"cannot reach the Kubernetes API server at {cluster.host} ({cluster.where}): {failure}; "
        "check that the cluster is running and that --kubeconfig/--context point at it"
    )


def _api_error(err: Any) -> str:
    """`HTTP 403 Forbidden: <the message of the API server's Status>`."""
    said = f"HTTP {err.status} {err.reason}"
    try:
        message = json.loads(err.body or "{}").get("message") or ""
    except (ValueError, AttributeError):
        message = ""
    return f"{said}: {_first_line(message)}" if message and message != err.reason else said


def _causes(err: Any) -> tuple[str, ...]:
    """The types of a Status's details.causes."""
    try:
        details = json.loads(err.body or "{}").get("details") or {}
        return tuple(str(c.get("type") or "") for c in details.get("causes") or () if isinstance(c, dict))
    except (ValueError, AttributeError):
        return ()


def _retry_after(err: Any) -> float | None:
    """The Retry-After header in seconds (the API server sends whole seconds), None without one."""
    headers = getattr(err, "headers", None) or {}
    try:
        value = float(str(headers.get("Retry-After")))
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def _first_line(err: BaseException | str) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0].rstrip(".")


# urllib3 names the connection before its message: "HTTPSConnection(host='h', port=1): " (2.x),
# "<urllib3.connection.HTTPSConnection object at 0x..>: " (1.x), "HTTPSConnectionPool(...): ".
_CONNECTION_NAME = re.compile(r"^(?:<[^>]*>|\w+\([^)]*\)): ")


def _connection_failure(err: BaseException) -> str:
    """What went wrong on the way to the API server, without urllib3's wrapping; the address is
    already in our message."""
    reason = getattr(err, "reason", None)  # MaxRetryError wraps the real failure in .reason
    failure = reason if isinstance(reason, BaseException) else err
    # Some urllib3 errors (timeouts) carry (connection, message): keep the message.
    texts = [arg for arg in failure.args if isinstance(arg, str)]
    text = _CONNECTION_NAME.sub("", _first_line(texts[-1] if texts else failure))
    return text.removeprefix("Failed to establish a new connection: ")


# --- list, then watch (for `monitor`) ----------------------------------------------------------

# timeoutSeconds of one watch request: the API server ends it then (a deadline on every request),
# and the watcher resumes from the last resourceVersion it saw. The client's read deadline is a
# little longer, so a server that stops sending anything (no event, no bookmark) is a ClusterError.
WATCH_SECONDS = 300
WATCH_READ_MARGIN = 15


def list_pages(
    reader: Reader, kind: str, label_selector: str | None = None, field_selector: str | None = None
) -> Iterator[dict[str, Any]]:
    """Each page of the list of `kind` in every namespace, decoded: its `items`, and on the last
    page `metadata.resourceVersion`, the snapshot a watch resumes from. `Expired` as `Reader.list`."""
    options = {k: v for k, v in (("label_selector", label_selector), ("field_selector", field_selector)) if v}
    return reader._pages(kind, None, options)


def watch(
    reader: Reader,
    kind: str,
    resource_version: str,
    label_selector: str | None = None,
    field_selector: str | None = None,
    timeout_seconds: int = WATCH_SECONDS,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The events (type, object) of one watch of `kind` in every namespace from `resource_version`,
    until the API server ends it after `timeout_seconds`: ADDED, MODIFIED, DELETED (also sent when
    an object stops matching the selectors) and BOOKMARK (only metadata.resourceVersion: where to
    resume; asked for with allowWatchBookmarks). A resourceVersion etcd has compacted away (410
    Gone, as an HTTP answer or as an ERROR event, k8s.io/apiserver pkg/storage/cacher) raises
    `Expired`: list again. Any other failure is a `ClusterError`."""
    api_class, _, list_method, cluster_scoped, plural = _READ[kind]
    method = getattr(reader._client(api_class), list_method if cluster_scoped else _LIST_ALL[kind])
    options = {k: v for k, v in (("label_selector", label_selector), ("field_selector", field_selector)) if v}
    reader.requests += 1
    response = _request(
        reader.cluster,
        f"watch {plural}",
        lambda: method(
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            _preload_content=False,
            _request_timeout=(REQUEST_TIMEOUT[0], timeout_seconds + WATCH_READ_MARGIN),
            **options,
        ),
        forbidden=_can_i("watch", plural, None),
    )
    try:
        for line in _lines(reader.cluster, plural, response):
            event = reader._decode(line, f"an event of the watch of {plural}")
            kind_of, obj = str(event.get("type") or ""), event.get("object")
            if not isinstance(obj, dict):
                continue
            if kind_of == "ERROR":
                message = f"the API server at {reader.cluster.host} ended the watch of {plural}: {obj.get('message')}"
                raise (Expired if obj.get("code") == 410 else ClusterError)(message)
            yield kind_of, obj
    finally:
        response.release_conn()


def _lines(cluster: Connection, plural: str, response: Any) -> Iterator[bytes]:
    """The newline-delimited JSON events of a watch's chunked answer, as they arrive."""
    import urllib3

    buffer = b""
    try:
        for chunk in response.stream(amt=None, decode_content=False):
            buffer += chunk
            while (end := buffer.find(b"\n")) != -1:
                line, buffer = buffer[:end], buffer[end + 1 :]
                if line.strip():
                    yield line
    except (urllib3.exceptions.HTTPError, OSError) as err:
        raise ClusterError(
            f"the watch of {plural} on the API server at {cluster.host} ({cluster.where}) broke: "
            f"{_connection_failure(err)}"
        ) from None
