"""The only user of the `kubernetes` client: everything netqos-webhook does with a live cluster.

- `connect` finds the credentials as kubectl does: `--kubeconfig`, else $KUBECONFIG, else
  ~/.kube/config; with none of them, in a pod, the pod's service account.
- `list_nodes` and `list_pods` (for `explain`) read every Node, and every Pod bound to a node and
  not finished, as the API's JSON, the data `kubectl get nodes/pods -o json` prints, so parsing,
  filtering and scoring stay in pure code that the file mode shares. Pods are read in pages.
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

import functools
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.errors import NetqosError
from webhook.names import FIELD_MANAGER

REQUEST_TIMEOUT = (5, 30)  # seconds: connect, read. An unreachable cluster fails fast.
POD_PAGE_SIZE = 500  # pods per list request (kubectl's default chunk size)
MAX_POD_PAGES = 1000  # at most 500,000 pods: a bound, far above Kubernetes' tested 150,000
# The pods that take a node's resources: bound to a node, not finished (as the scheduler's cache).
ASSIGNED_NOT_FINISHED = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
APPLY_PATCH = "application/apply-patch+yaml"
IN_CLUSTER = "the in-cluster service account"


class ClusterError(NetqosError, RuntimeError):
    """The cluster failed at run time: unreachable, or it refused a request (exit code 1)."""

    exit_code = 1


class KubeconfigError(ClusterError):
    """No usable credentials: the kubeconfig (or the service account) cannot be loaded (exit code 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Cluster:
    """A cluster to talk to: the client configuration, and where it came from for messages."""

    configuration: Any  # kubernetes.client.Configuration
    where: str  # "kubeconfig FILE[, context NAME]" or IN_CLUSTER

    @property
    def host(self) -> str:
        return self.configuration.host


def connect(kubeconfig: str | None = None, context: str | None = None) -> Cluster:
    """The cluster of `kubeconfig` (else $KUBECONFIG or ~/.kube/config) and `context`, or, when
    there is no kubeconfig and this runs in a pod, of the pod's service account.

    Raises `KubeconfigError` naming the file (or the service account) and what to do.
    """
    from kubernetes import client, config  # noqa: PLC0415 - lazy on purpose, see the module doc

    configuration = client.Configuration()
    if (
        kubeconfig is None
        and context is None
        and os.environ.get("KUBERNETES_SERVICE_HOST")
        and not _default_kubeconfig_exists()
    ):
        where = IN_CLUSTER
        hint = "check that the pod mounts its service account token (automountServiceAccountToken)"

        def load() -> None:
            config.load_incluster_config(client_configuration=configuration)
    else:
        source = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        _check_readable(kubeconfig)
        where = f"kubeconfig {source}" + (f", context {context}" if context else "")
        hint = (
            "check the file and the context name (kubectl"
            + (f" --kubeconfig {kubeconfig}" if kubeconfig else "")
            + " config get-contexts)"
        )

        def load() -> None:
            # The file is named here, not left to the client: it reads $KUBECONFIG once, at import.
            config.load_kube_config(config_file=source, context=context, client_configuration=configuration)

    try:
        load()
    except Exception as err:  # ConfigException, YAML errors, unreadable certificate files...
        raise KubeconfigError(f"cannot use {where}: {_first_line(err)}; {hint}") from None
    configuration.retries = 1  # urllib3 would otherwise retry a refused connection three times
    return Cluster(configuration, where)


def _check_readable(kubeconfig: str | None) -> None:
    if kubeconfig is None:
        if not _default_kubeconfig_exists():
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


def _default_kubeconfig_exists() -> bool:
    paths = os.environ.get("KUBECONFIG")
    if paths:
        return any(Path(p).expanduser().exists() for p in paths.split(os.pathsep) if p)
    return Path("~/.kube/config").expanduser().exists()


# --- the two things we do with a cluster -------------------------------------------------------


def list_nodes(kubeconfig: str | None = None, context: str | None = None) -> list[dict[str, Any]]:
    """Every Node of the cluster `kubeconfig` (and `context`) points at, as API JSON data."""
    from kubernetes import client  # noqa: PLC0415

    cluster = connect(kubeconfig, context)
    with client.ApiClient(cluster.configuration) as api:
        response = _request(
            cluster,
            "list nodes",
            lambda: client.CoreV1Api(api).list_node(_preload_content=False, _request_timeout=REQUEST_TIMEOUT).data,
            forbidden="check that your user may list nodes (kubectl auth can-i list nodes)",
        )
    try:
        node_list = json.loads(response)
    except ValueError:
        raise ClusterError(
            f"the API server at {cluster.host} ({cluster.where}) did not answer the node list with JSON; "
            "check that --kubeconfig/--context point at a Kubernetes API server"
        ) from None
    return (node_list.get("items") if isinstance(node_list, dict) else None) or []


def list_pods(kubeconfig: str | None = None, context: str | None = None) -> list[dict[str, Any]]:
    """Every Pod bound to a node and not Succeeded or Failed, in every namespace, as API JSON
    data; read POD_PAGE_SIZE at a time with the list's continue token."""
    from kubernetes import client  # noqa: PLC0415

    cluster = connect(kubeconfig, context)
    pods: list[dict[str, Any]] = []
    token: str | None = None
    with client.ApiClient(cluster.configuration) as api:
        core = client.CoreV1Api(api)
        for _ in range(MAX_POD_PAGES):
            send = functools.partial(
                core.list_pod_for_all_namespaces,
                field_selector=ASSIGNED_NOT_FINISHED,
                limit=POD_PAGE_SIZE,
                _continue=token,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
            forbidden = "check that your user may list pods in all namespaces (kubectl auth can-i list pods -A)"
            response = _request(cluster, "list pods", send, forbidden=forbidden).data
            page = _json_list(cluster, response, "pod")
            pods.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return pods
    raise ClusterError(
        f"the API server at {cluster.host} ({cluster.where}) listed more than {MAX_POD_PAGES * POD_PAGE_SIZE} pods; "
        "explain a smaller cluster, or give --nodes and --pods files"
    )


def _json_list(cluster: Cluster, response: bytes, what: str) -> dict[str, Any]:
    try:
        document = json.loads(response)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise ClusterError(
            f"the API server at {cluster.host} ({cluster.where}) did not answer the {what} list with JSON; "
            "check that --kubeconfig/--context point at a Kubernetes API server"
        )
    return document


def apply(cluster: Cluster, objs: list[dict[str, Any]], report: Callable[[str], None] = print) -> None:
    """Server-side apply each object (Secrets and MutatingWebhookConfigurations) in order; report
    one line per object. Stops at the first failure with a `ClusterError`."""
    from kubernetes import client  # noqa: PLC0415

    with client.ApiClient(cluster.configuration) as api:
        # Every request of this client is a server-side apply. A default header overrides the
        # content type the generated PATCH methods pick (the client's own `_content_type` option
        # only exists in recent versions), in every client version pyproject.toml allows.
        api.set_default_header("Content-Type", APPLY_PATCH)
        core = client.CoreV1Api(api)
        admission = client.AdmissionregistrationV1Api(api)
        for obj in objs:
            name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace")
            if obj["kind"] == "Secret":
                patch, args = core.patch_namespaced_secret, (name, namespace)
                scope, can_i = f"secrets in namespace {namespace}", f"secrets -n {namespace}"
            else:
                patch, args = admission.patch_mutating_webhook_configuration, (name,)
                scope, can_i = "cluster-scoped mutatingwebhookconfigurations", "mutatingwebhookconfigurations"
            response = _request(
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
                missing=(
                    f"create the namespace first: 'kubectl apply -k deploy/base' (or 'kubectl create namespace "
                    f"{namespace}'), or pass --namespace"
                )
                if namespace
                else None,
            )
            report(f"{describe(obj)} {'created' if response.status == 201 else 'configured'} (server-side apply)")


def describe(obj: dict[str, Any]) -> str:
    """An API object as a person reads it: `secret/NAME in namespace NS`."""
    meta = obj["metadata"]
    where = f" in namespace {meta['namespace']}" if meta.get("namespace") else ""
    return f"{obj['kind'].lower()}/{meta['name']}{where}"


# --- one request, and what its failures say ----------------------------------------------------


def _request(cluster: Cluster, action: str, send: Callable[[], Any], forbidden: str, missing: str | None = None) -> Any:
    """`send()`, with every failure a `ClusterError`. `action` completes "refused to ...";
    `forbidden` and `missing` say what to do about a 403 and a 404."""
    import urllib3  # noqa: PLC0415 - the client's transport, as lazy as the client
    from kubernetes import client  # noqa: PLC0415

    try:
        return send()
    except client.ApiException as err:
        if err.status:  # the API server answered, and said no
            hint = {
                401: "the credentials were rejected: log in again or pick another --context",
                403: forbidden,
                404: missing,
            }.get(err.status)
            raise ClusterError(
                f"the API server at {cluster.host} ({cluster.where}) refused to {action}: {_api_error(err)}"
                + (f"; {hint}" if hint else "")
            ) from None
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
