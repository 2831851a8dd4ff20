"""The MutatingWebhookConfiguration for a policy: pure, policy in, API object (a dict) out.

This is the one source of the webhook registration: the file
`deploy/base/webhook-configuration/mutatingwebhookconfiguration.yaml` is this module's output for
`deploy/base/policy.yaml` (docs/install.md, "Changing the policy", has the command; a test fails when they
differ), and `netqos-webhook register` sends the same object with the
caBundle filled in.

Every choice below keeps a broken or absent webhook from hurting the cluster:

- one webhook entry per rule, named `<rule>.netqos.io` (a fully qualified name with three
  segments, unique because rule names are), whose `objectSelector` is the rule's `podSelector`:
  the API server only calls us for pods some rule selects, and a label selector cannot say "rule A
  or rule B", hence one entry per rule. The server evaluates the whole policy on every call, so a
  pod several rules select is complete after the first call and unchanged by the others;
- only `CREATE` of `pods` in `v1` of the core group, namespaced; `matchPolicy: Equivalent` so a
  pod created through another version is still seen;
- `namespaceSelector` excludes `kube-system` and the webhook's own namespace (by the
  `kubernetes.io/metadata.name` label every namespace carries since Kubernetes 1.21), so the
  webhook's own pods never wait for the webhook;
- `failurePolicy: Ignore`: a dead webhook admits pods unchanged instead of blocking them;
  `timeoutSeconds: 10` (at most what a pod creation waits for us: Kubernetes' default, the margin a
  burst of new TLS connections needs on a busy node, docs/performance.md "Admission at scale");
  `sideEffects: None` (dry-run requests are safe); `reinvocationPolicy: IfNeeded` so the terms
  are re-checked after later mutating webhooks; `admissionReviewVersions: [v1]`.

The API server prefixes the response's `auditAnnotations` keys with the webhook's name, giving
`<rule>.netqos.io/injected-rules`: a valid qualified key because the name is a DNS subdomain.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlsplit

from webhook.errors import UsageError
from webhook.names import ADMISSION_API_VERSION, CONFIGURATION_NAME, DEFAULT_NAMESPACE, DEFAULT_SERVICE, LABELS
from webhook.policy import Policy
from webhook.scope import namespace_selector, pod_create_rule, webhook_name
from webhook.validation import is_dns1123_label, is_host

KIND = "MutatingWebhookConfiguration"
SERVICE_PORT = 443
MUTATE_PATH = "/mutate"
TIMEOUT_SECONDS = 10


class ManifestError(UsageError, ValueError):
    """An option that cannot produce a valid webhook configuration; the message says which."""


def client_config(
    namespace: str = DEFAULT_NAMESPACE, url: str | None = None, ca_bundle: bytes | None = None
) -> dict[str, Any]:
    """`clientConfig`: the in-cluster Service, or `url` for a webhook served elsewhere."""
    if url is not None:
        check_url(url)
        config: dict[str, Any] = {"url": url}
    else:
        check_namespace(namespace)
        config = {
            "service": {"name": DEFAULT_SERVICE, "namespace": namespace, "path": MUTATE_PATH, "port": SERVICE_PORT}
        }
    if ca_bundle is not None:
        config["caBundle"] = base64.b64encode(ca_bundle).decode("ascii")
    return config


def webhook_configuration(
    policy: Policy,
    namespace: str = DEFAULT_NAMESPACE,
    url: str | None = None,
    ca_bundle: bytes | None = None,
) -> dict[str, Any]:
    """The MutatingWebhookConfiguration for `policy`.

    `namespace` is where the webhook's Service runs (and is excluded from mutation); `url` replaces
    the Service (out-of-cluster serving); `ca_bundle` is the PEM the API server trusts for the
    webhook's certificate. Without it the field is left out, for `register` or cert-manager's CA
    injector to fill in.
    """
    check_namespace(namespace)
    webhooks = []
    for rule in policy.rules:
        webhooks.append(
            {
                "name": webhook_name(rule.name),
                "admissionReviewVersions": ["v1"],
                # new dicts and lists per entry: shared ones would be dumped as YAML aliases
                "clientConfig": client_config(namespace, url, ca_bundle),
                "failurePolicy": "Ignore",
                "matchPolicy": "Equivalent",
                "namespaceSelector": namespace_selector(namespace),
                "objectSelector": rule.pod_selector.to_api(),
                "reinvocationPolicy": "IfNeeded",
                "rules": [pod_create_rule()],
                "sideEffects": "None",
                "timeoutSeconds": TIMEOUT_SECONDS,
            }
        )
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": KIND,
        "metadata": {"name": CONFIGURATION_NAME, "labels": dict(LABELS)},
        "webhooks": webhooks,
    }


def check_namespace(namespace: str) -> None:
    """The API server's rule for a namespace name (ValidateNamespaceName: a DNS-1123 label)."""
    errors = is_dns1123_label(namespace) if isinstance(namespace, str) else ["must be a string"]
    if errors:
        raise ManifestError(
            f"namespace {namespace!r} is not a valid namespace name: use lower-case letters, digits and '-', "
            f"at most 63 ({'; '.join(errors)})"
        )


def check_url(url: str) -> None:
    """`clientConfig.url` as the API server validates it, and as this webhook can serve it.

    The API server (k8s.io/apiserver/pkg/util/webhook/validation.go, `ValidateWebhookURL`,
    v1.36.3) parses the URL with Go's `url.Parse`, which refuses a host with a character a host
    name cannot hold (a space...) and a port that is not digits, and then requires the https
    scheme and a host, and refuses user information, a query and a fragment. Beyond that, what
    would be accepted and then fail every call is refused too: a port outside 1-65535 (0 is no
    port a server listens on), a host that is neither an IP address nor a DNS name (the
    certificate must name it), and a path other than the one the webhook serves (/mutate)."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a port that is not digits or beyond 65535
    except ValueError as err:
        raise ManifestError(f"--url {url!r} is not a URL: {err}") from None
    problems = []
    if parts.scheme != "https":
        problems.append("the scheme must be https (the API server only calls webhooks over TLS)")
    host = parts.hostname
    if not host:
        problems.append("it needs a host, e.g. https://host.minikube.internal:8443/mutate")
    elif not is_host(host):
        problems.append(f"the host {host!r} is neither an IP address nor a DNS name")
    if port == 0:
        problems.append("port 0 is no port a server listens on; give 1 to 65535 (or none for 443)")
    if parts.username is not None or parts.password is not None:
        problems.append("user information is not allowed")
    if parts.query or url.endswith("?"):
        problems.append("query parameters are not allowed")
    if parts.fragment or url.endswith("#"):
        problems.append("a fragment is not allowed")
    if parts.path != MUTATE_PATH:
        problems.append(f"the path must be {MUTATE_PATH}, the one the webhook serves (got {parts.path or 'none'!r})")
    if problems:
        raise ManifestError(f"--url {url!r}: " + "; ".join(problems))
