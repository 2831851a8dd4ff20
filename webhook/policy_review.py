"""The policy ConfigMap checked when it is written, by the webhook that will load it (pure).

The webhook reloads its policy from a mounted ConfigMap and refuses an invalid one only then, in
its logs (`webhook.serving.reload`), while `kubectl apply` of the ConfigMap has long succeeded.
So the webhook also serves `POST /validate-policy`, and a ValidatingWebhookConfiguration
(`validating_configuration`, shipped in deploy/base and the chart) has the API server ask it on
every CREATE and UPDATE of its own policy ConfigMap: the namespace by name, the ConfigMap by the
webhook's labels and, through a matchCondition, by the name it is generated with. A ConfigMap
whose policy does not compile is denied with the message the running webhook would log when it
refused it (`review`); a valid one is allowed, with the policy's warnings (`policy_warnings`) as
admission warnings, which kubectl prints. `failurePolicy: Ignore`: while the webhook is down (or
not yet installed) nothing is blocked, and the reload's own refusal still guards the pods.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook import apidata
from webhook.admission import API_VERSIONS, BadReview
from webhook.names import (
    ADMISSION_API_VERSION,
    CONFIGURATION_NAME,
    DEFAULT_NAMESPACE,
    DEFAULT_SERVICE,
    LABELS,
    NAMESPACE_NAME_LABEL,
)
from webhook.policy import policy_warnings
from webhook.policy_file import PolicyError, policy_from_bytes

PATH = "/validate-policy"
KIND = "ValidatingWebhookConfiguration"
CONFIGURATION = CONFIGURATION_NAME  # the ValidatingWebhookConfiguration's, as the mutating one's
ENTRY = "policy.netqos.io"
# The policy ConfigMap: deploy/base generates it as netqos-webhook-policy-<hash of policy.yaml>, the
# chart names it <release fullname>-policy; both start with this and carry LABELS.
CONFIG_MAP_PREFIX = "netqos-webhook-policy"
POLICY_KEY = "policy.yaml"  # the key mounted as the webhook's --config file
TIMEOUT_SECONDS = 5


@dataclass(frozen=True)
class Verdict:
    """The answer to one review of a policy ConfigMap, and what to log of it."""

    response: dict[str, Any]  # the AdmissionReview to answer with
    allowed: bool
    message: str  # why denied; "" when allowed
    name: str  # namespace/name of the ConfigMap


def review(document: object, key: str, source: str) -> Verdict:
    """The verdict on a decoded AdmissionReview of a ConfigMap: its `key` compiled as the webhook
    compiles the file `source` it is mounted at (so an error reads as the running webhook logs
    it). BadReview when the document is not an AdmissionReview; anything that is not a ConfigMap
    being created or updated (a DELETE, another kind) is allowed: the registration sends none."""
    request, api_version = _request(document)
    obj = request.get("object")
    name = _name(request, obj)
    allowed, message = True, ""
    warnings: tuple[str, ...] = ()
    if request.get("operation") in ("CREATE", "UPDATE") and isinstance(obj, Mapping):
        data = _policy_bytes(obj, key)
        if data is None:
            allowed = False
            message = (
                f"ConfigMap {name} has no key {key}: the webhook reads its policy from that key (mounted at {source})"
            )
        else:
            try:
                warnings = policy_warnings(policy_from_bytes(data, source))
            except PolicyError as err:
                allowed, message = False, str(err)
    response: dict[str, Any] = {"uid": request["uid"], "allowed": allowed}
    if not allowed:
        response["status"] = {"code": 422, "reason": "Invalid", "message": message}
    if warnings:
        response["warnings"] = [f"policy {source}: {w}" for w in warnings]
    return Verdict({"apiVersion": api_version, "kind": "AdmissionReview", "response": response}, allowed, message, name)


def _request(document: object) -> tuple[Mapping[str, Any], str]:
    if not isinstance(document, dict) or document.get("kind") != "AdmissionReview":
        raise BadReview("request body must be an AdmissionReview")
    api_version = document.get("apiVersion")
    request = document.get("request")
    if api_version not in API_VERSIONS or not isinstance(request, dict):
        raise BadReview(f"not an AdmissionReview of {' or '.join(API_VERSIONS)} with a request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("AdmissionReview.request.uid must be a non-empty string")
    return request, str(api_version)


def _name(request: Mapping[str, Any], obj: object) -> str:
    name = apidata.string_or_empty(request.get("name"))
    if not name and isinstance(obj, Mapping) and isinstance(obj.get("metadata"), Mapping):
        name = apidata.string_or_empty(obj["metadata"].get("name"))
    return f"{apidata.string_or_empty(request.get('namespace'))}/{name}"


def _policy_bytes(config_map: Mapping[str, Any], key: str) -> bytes | None:
    """The bytes the kubelet would write for `key`: from `data`, else `binaryData` (base64)."""
    data, binary = config_map.get("data"), config_map.get("binaryData")
    if isinstance(data, Mapping) and isinstance(data.get(key), str):
        return str(data[key]).encode()
    if isinstance(binary, Mapping) and isinstance(binary.get(key), str):
        try:
            return base64.b64decode(str(binary[key]), validate=True)
        except (binascii.Error, ValueError):
            return None
    return None


def validating_configuration(
    namespace: str = DEFAULT_NAMESPACE,
    service: str = DEFAULT_SERVICE,
    ca_bundle: bytes | None = None,
    url: str | None = None,
) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration that has the API server call `PATH` of the Service (or
    `url`, a webhook served outside the cluster) for the policy ConfigMap in `namespace`, with
    `ca_bundle` (PEM) when given."""
    client: dict[str, Any] = (
        {"url": url} if url else {"service": {"name": service, "namespace": namespace, "path": PATH, "port": 443}}
    )
    if ca_bundle:
        client["caBundle"] = base64.b64encode(ca_bundle).decode("ascii")
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": KIND,
        "metadata": {"name": CONFIGURATION, "labels": dict(LABELS)},
        "webhooks": [
            {
                "name": ENTRY,
                "admissionReviewVersions": ["v1"],
                "clientConfig": client,
                "failurePolicy": "Ignore",  # never block a ConfigMap while the webhook is down
                "matchPolicy": "Equivalent",
                "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
                "objectSelector": {"matchLabels": dict(LABELS)},
                "matchConditions": [
                    {
                        "name": "policy-configmap",
                        "expression": f"object != null && object.metadata.name.startsWith('{CONFIG_MAP_PREFIX}')",
                    }
                ],
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["configmaps"],
                        "scope": "Namespaced",
                    }
                ],
                "sideEffects": "None",
                "timeoutSeconds": TIMEOUT_SECONDS,
            }
        ],
    }
