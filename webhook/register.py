"""`netqos-webhook register`: put the TLS Secret and the webhook configuration into a cluster.

Two halves, kept apart so the objects can be tested without a cluster:

- pure: `check_certificates` (the files the API server and the pods will use agree with each
  other and with the name the API server connects to) and `objects` (the Secret and the
  MutatingWebhookConfiguration, as plain dicts, the latter from `webhook.manifests`);
- thin I/O: `connect` (kubeconfig or in-cluster) and `apply`, which sends each object with
  server-side apply under the field manager `netqos-webhook`. Server-side apply creates what is
  missing and changes only the fields in the object we send: labels, annotations or other
  webhook entries added by anyone else stay as they are, and a webhook entry of a rule that was
  removed from the policy is removed, because we owned it.

`kubernetes` is imported only inside `connect` and `apply`: the server never imports this module
and the pure half works without the client installed.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from webhook.certs import DEFAULT_SERVICE, CertFiles
from webhook.manifests import LABELS, webhook_configuration
from webhook.policy import Policy

FIELD_MANAGER = "netqos-webhook"
TLS_SECRET = "netqos-webhook-tls"
APPLY_PATCH = "application/apply-patch+yaml"
REQUEST_TIMEOUT = (5, 30)  # seconds to connect, seconds to wait for an answer

EXIT_USAGE = 2
EXIT_RUNTIME = 1


class RegisterError(Exception):
    """A failure to report as one message, with the exit code (2 bad input, 1 the cluster)."""

    def __init__(self, message: str, code: int = EXIT_RUNTIME) -> None:
        super().__init__(message)
        self.code = code


# --- pure: certificates and objects ------------------------------------------------------------


@dataclass(frozen=True)
class Certificates:
    """The PEM files register sends: the server's certificate and key, and the CA that signed it."""

    ca_cert: bytes
    cert: bytes
    key: bytes


def server_name(namespace: str, url: str | None) -> str:
    """The name the API server checks the webhook's certificate against."""
    if url is not None:
        return urlsplit(url).hostname or ""
    return f"{DEFAULT_SERVICE}.{namespace}.svc"


def check_certificates(files: CertFiles, namespace: str, url: str | None = None, now: dt.datetime | None = None) -> Certificates:
    """Read ca.crt, tls.crt and tls.key from `files` and check they will work for the webhook.

    Raises `RegisterError` (exit 2) naming the file and what to do when a file is missing or
    unreadable, the key does not belong to the certificate, the CA did not sign it, it has
    expired, or it does not carry the name the API server will connect to.
    """
    regenerate = _regenerate_hint(files, namespace, url)
    paths = (files.ca_cert, files.cert, files.key)
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise RegisterError(f"missing {', '.join(missing)}; {regenerate}", EXIT_USAGE)
    data = {}
    for path in paths:
        try:
            data[path] = path.read_bytes()
        except OSError as err:
            raise RegisterError(f"cannot read {path}: {err.strerror}", EXIT_USAGE) from None

    def load_cert(path: Path) -> Any:
        try:
            return x509.load_pem_x509_certificate(data[path])
        except ValueError:
            raise RegisterError(f"{path} is not a PEM certificate; {regenerate}", EXIT_USAGE) from None

    ca = load_cert(files.ca_cert)
    cert = load_cert(files.cert)
    try:
        key = serialization.load_pem_private_key(data[files.key], password=None)
    except (ValueError, TypeError):
        raise RegisterError(f"{files.key} is not an unencrypted PEM private key; {regenerate}", EXIT_USAGE) from None

    if key.public_key().public_bytes(*_SPKI) != cert.public_key().public_bytes(*_SPKI):
        raise RegisterError(f"{files.key} is not the key of {files.cert}; {regenerate}", EXIT_USAGE)
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as err:  # InvalidSignature has no message
        reason = str(err) or "the signature does not verify"
        raise RegisterError(
            f"{files.cert} was not issued by the CA in {files.ca_cert} ({reason}); the API server would "
            f"reject it; {regenerate}", EXIT_USAGE,
        ) from None
    now = now or dt.datetime.now(dt.timezone.utc)
    for path, c in ((files.cert, cert), (files.ca_cert, ca)):
        if c.not_valid_after_utc <= now:
            raise RegisterError(
                f"{path} expired on {c.not_valid_after_utc:%Y-%m-%d %H:%M} UTC; {regenerate}", EXIT_USAGE
            )
    name = server_name(namespace, url)
    if name not in _subject_alt_names(cert):
        names = ", ".join(_subject_alt_names(cert)) or "none"
        raise RegisterError(
            f"{files.cert} does not name {name}, the host the API server connects to (its names: "
            f"{names}); {regenerate}", EXIT_USAGE,
        )
    return Certificates(ca_cert=data[files.ca_cert], cert=data[files.cert], key=data[files.key])


def _regenerate_hint(files: CertFiles, namespace: str, url: str | None) -> str:
    command = f"netqos-webhook certs --out {files.directory} --namespace {namespace}"
    if url is not None:
        command += f" --host {urlsplit(url).hostname}"
    return f"make new ones with '{command}'"


def _subject_alt_names(cert: Any) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    names = list(san.get_values_for_type(x509.DNSName))
    names += [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    return names


_SPKI = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def tls_secret(certs: Certificates, namespace: str) -> dict[str, Any]:
    """The Secret the Deployment mounts at /tls: a kubernetes.io/tls Secret plus the CA."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": TLS_SECRET, "namespace": namespace, "labels": dict(LABELS)},
        "type": "kubernetes.io/tls",
        "data": {
            "ca.crt": _b64(certs.ca_cert),
            "tls.crt": _b64(certs.cert),
            "tls.key": _b64(certs.key),
        },
    }


def objects(policy: Policy, certs: Certificates, namespace: str, url: str | None = None) -> list[dict[str, Any]]:
    """What register applies, in order. With `url` the webhook is served outside the cluster, so
    no Secret is needed: only the webhook configuration pointing at `url`."""
    config = webhook_configuration(policy, namespace=namespace, url=url, ca_bundle=certs.ca_cert)
    if url is not None:
        return [config]
    return [tls_secret(certs, namespace), config]


def describe(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    where = f" in namespace {meta['namespace']}" if meta.get("namespace") else ""
    return f"{obj['kind'].lower()}/{meta['name']}{where}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# --- I/O: the cluster ---------------------------------------------------------------------------


def connect(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """An `ApiClient` from the kubeconfig (`--kubeconfig`, else $KUBECONFIG or ~/.kube/config),
    or, when there is none and we run in a pod, from the pod's service account."""
    from kubernetes import client, config

    configuration = client.Configuration()
    in_cluster = bool(
        kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST")
        and not _default_kubeconfig_exists()
    )
    if not in_cluster:
        if kubeconfig is None and not _default_kubeconfig_exists():
            looked = f"$KUBECONFIG ({os.environ['KUBECONFIG']})" if os.environ.get("KUBECONFIG") else "~/.kube/config"
            raise RegisterError(
                f"no kubeconfig: {looked} does not exist, and this is not a pod in a cluster; pass --kubeconfig FILE",
                EXIT_USAGE,
            )
        if kubeconfig is not None and not os.access(kubeconfig, os.R_OK):
            raise RegisterError(f"cannot read kubeconfig {kubeconfig}; check the path", EXIT_USAGE)
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
    except Exception as err:  # ConfigException, YAML errors, unreadable certificate files...
        source = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        where = "the in-cluster service account" if in_cluster else f"kubeconfig {source}"
        reason = (str(err).strip() or type(err).__name__).splitlines()[0]
        raise RegisterError(f"cannot use {where}: {reason}", EXIT_USAGE) from None
    return client.ApiClient(configuration)


def _default_kubeconfig_exists() -> bool:
    paths = os.environ.get("KUBECONFIG")
    if paths:
        return any(Path(p).expanduser().exists() for p in paths.split(os.pathsep) if p)
    return Path("~/.kube/config").expanduser().exists()


def apply(api_client: Any, objs: list[dict[str, Any]], report: Callable[[str], None] = print) -> None:
    """Server-side apply each object; report one line per object. Errors raise `RegisterError`."""
    from kubernetes import client

    # Every request of this client is a server-side apply. A default header overrides the content
    # type the generated PATCH methods pick (the client's own `_content_type` option only exists in
    # recent versions), in every client version pyproject.toml allows.
    api_client.set_default_header("Content-Type", APPLY_PATCH)
    core = client.CoreV1Api(api_client)
    admission = client.AdmissionregistrationV1Api(api_client)
    host = api_client.configuration.host
    for obj in objs:
        meta = obj["metadata"]
        options = dict(
            body=obj, field_manager=FIELD_MANAGER, force=True,
            _preload_content=False, _request_timeout=REQUEST_TIMEOUT,
        )
        try:
            if obj["kind"] == "Secret":
                response = core.patch_namespaced_secret(meta["name"], meta["namespace"], **options)
            else:
                response = admission.patch_mutating_webhook_configuration(meta["name"], **options)
        except client.ApiException as err:
            raise RegisterError(_api_error(err, obj, host)) from None
        except Exception as err:  # urllib3 and socket errors: the cluster cannot be reached
            if _is_connection_error(err):
                raise RegisterError(
                    f"cannot reach the Kubernetes API server at {host}: {_reason(err)}; check that the cluster "
                    "is running and that --kubeconfig/--context point at it"
                ) from None
            raise
        report(f"{describe(obj)} {'created' if response.status == 201 else 'configured'} (server-side apply)")


def _is_connection_error(err: Exception) -> bool:
    import urllib3

    return isinstance(err, (urllib3.exceptions.HTTPError, OSError))


def _reason(err: Exception) -> str:
    reason = getattr(err, "reason", None) or err
    text = str(reason)
    # urllib3 wraps the socket error: "<urllib3.connection.HTTPConnection object at 0x..>: Failed to
    # establish a new connection: [Errno 111] Connection refused" -> keep what a person can act on.
    if "Failed to establish a new connection: " in text:
        text = text.split("Failed to establish a new connection: ", 1)[1]
    return text


def _api_error(err: Any, obj: dict[str, Any], host: str) -> str:
    what = describe(obj)
    message = ""
    try:
        message = json.loads(err.body or "{}").get("message", "")
    except (ValueError, AttributeError):
        pass
    message = message or (err.reason or "")
    if err.status == 401:
        return f"the API server at {host} rejected the credentials (401 Unauthorized) applying {what}; log in again or pick another --context"
    if err.status == 403:
        namespace = obj["metadata"].get("namespace")
        scope = f"secrets in namespace {namespace}" if namespace else "mutatingwebhookconfigurations (cluster-scoped)"
        return (
            f"not allowed to apply {what}: {message}. register needs the verbs create and patch on {scope}; "
            "run it as a cluster administrator or grant them with RBAC"
        )
    if err.status == 404 and obj["metadata"].get("namespace"):
        namespace = obj["metadata"]["namespace"]
        return (
            f"cannot apply {what}: {message or 'not found'}. Create the namespace first: "
            f"'kubectl apply -k deploy/base' (or 'kubectl create namespace {namespace}'), or pass --namespace"
        )
    return f"the API server refused {what} ({err.status} {err.reason}): {message}"
