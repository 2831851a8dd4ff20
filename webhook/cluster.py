"""The only user of the `kubernetes` client: read objects from a live cluster as plain API data.

Deliberately thin. Callers get the same dicts a `kubectl get -o json` would give, and everything
else (parsing, filtering, scoring) happens in pure code that the file mode shares. `kubernetes`
is imported inside the functions, so importing this module costs nothing and the webhook server,
which never calls them, never loads the client.
"""

from __future__ import annotations

from typing import Any

REQUEST_TIMEOUT = (5, 30)  # seconds: connect, read. An unreachable cluster fails fast.


class ClusterError(RuntimeError):
    """The cluster could not be read; the message says which kubeconfig/context and what to check."""


def list_nodes(kubeconfig: str, context: str | None = None) -> list[dict[str, Any]]:
    """Every Node of the cluster `kubeconfig` (and `context`) points at, as API JSON data."""
    from kubernetes import client, config  # noqa: PLC0415 - lazy on purpose, see the module doc

    where = f"kubeconfig {kubeconfig}" + (f", context {context}" if context else "")
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
    except Exception as err:  # ConfigException, YAML errors, missing files, bad certificates...
        raise ClusterError(
            f"cannot use {where}: {_first_line(err)}; check the file and the context name "
            f"(kubectl --kubeconfig {kubeconfig} config get-contexts)"
        ) from None
    configuration.retries = 1  # urllib3 would otherwise retry a refused connection three times
    api = client.ApiClient(configuration)
    try:
        return _node_items(api, client.CoreV1Api(api).list_node(_request_timeout=REQUEST_TIMEOUT))
    except client.ApiException as err:
        raise ClusterError(
            f"the API server at {configuration.host} ({where}) refused to list nodes: "
            f"HTTP {err.status} {err.reason}; check that your user may list nodes (kubectl auth can-i list nodes)"
        ) from None
    except Exception as err:  # urllib3 connection errors, timeouts, TLS failures
        raise ClusterError(
            f"cannot reach the API server at {configuration.host} ({where}): {_connection_failure(err)}; "
            f"check that the cluster is running and reachable (kubectl get nodes)"
        ) from None
    finally:
        api.close()


def _node_items(api: Any, node_list: Any) -> list[dict[str, Any]]:
    return api.sanitize_for_serialization(node_list).get("items") or []


def _first_line(err: Exception) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0].rstrip(".")


def _connection_failure(err: Exception) -> str:
    # urllib3's MaxRetryError wraps the real failure in .reason, whose text starts with
    # "HTTPSConnection(host=..., port=...): "; the address is already in our message.
    reason = getattr(err, "reason", None)
    text = _first_line(reason if isinstance(reason, Exception) else err)
    return text.split("): ", 1)[-1]
