"""The AdmissionReview wire contract, and the patch derived from the policy's decision.

`handle` takes the raw request body and returns the response document plus what happened (for
logs and metrics). Only `admission.k8s.io/v1` and `v1beta1` reviews are understood; the response
uses the request's version. Two families of failure:

- the body is not a usable AdmissionReview (not JSON, wrong kind, no uid): `BadReview`, which the
  HTTP layer answers with 400 and a JSON message;
- anything about the pod itself: always `allowed: true`. A malformed pod or an internal error
  leaves the pod unchanged and says why in `response.warnings`. The webhook never blocks a pod.
"""

from __future__ import annotations

import base64
import logging
import uuid
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Required, TypedDict, cast

import orjson

from webhook import apidata
from webhook.patch import diff
from webhook.policy import Decision, Outcome, Policy, evaluate

API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
# The API server prefixes audit annotation keys with the webhook's name ("<webhook>/<key>"), so the
# key must be a bare name: "netqos.io/injected" here would be an invalid key and be dropped.
AUDIT_ANNOTATION = "injected-rules"

log = logging.getLogger(__name__)


class GroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class GroupVersionResource(TypedDict):
    group: str
    version: str
    resource: str


class AdmissionRequest(TypedDict, total=False):
    """An `admission.k8s.io/v1` AdmissionRequest as it arrives. `_request` checks `uid`; every
    other field is read as it comes (a hand-made review may hold anything there), so it is an
    `object` to narrow, never a type taken on trust."""

    uid: Required[str]
    kind: object  # GroupVersionKind from the API server
    resource: object  # GroupVersionResource
    subResource: object
    requestKind: object
    requestResource: object
    name: object
    namespace: object
    operation: object  # CREATE, UPDATE, DELETE, CONNECT
    userInfo: object
    object: object  # the pod, when kind is a Pod
    oldObject: object
    dryRun: object
    options: object


class AdmissionReviewRequest(TypedDict):
    apiVersion: str
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


class AdmissionResponse(TypedDict):
    """What the webhook answers: always allowed; a JSON patch (base64) only when it mutates."""

    uid: str
    allowed: Literal[True]
    patchType: NotRequired[Literal["JSONPatch"]]
    patch: NotRequired[str]  # base64 of the JSON patch
    warnings: NotRequired[list[str]]
    auditAnnotations: NotRequired[dict[str, str]]


class AdmissionReviewResponse(TypedDict):
    apiVersion: str  # the request's
    kind: Literal["AdmissionReview"]
    response: AdmissionResponse


class BadReview(ValueError):
    """The request body is not an AdmissionReview we can answer (HTTP 400)."""


@dataclass(frozen=True)
class Result:
    """The response document and a summary of the review, for logs and metrics."""

    response: AdmissionReviewResponse
    decision: Decision
    injected: tuple[str, ...]
    patch: list[dict[str, Any]]
    uid: str
    operation: str
    dry_run: bool
    namespace: str
    name: str


def handle(policy: Policy, body: bytes) -> Result:
    return review(policy, decode(body))


def decode(body: bytes) -> Any:
    # orjson: well kept, and it decodes a 4 KB review in 43% of the stdlib's instructions (52% for
    # a 189 KB one); see docs/performance.md. It parses what the API server (Go encoding/json)
    # writes exactly as json does; it refuses NaN, lone surrogates and numbers beyond a double,
    # which the API server never sends, and turns integers beyond 64 bits into floats.
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as err:
        if str(err).startswith("depth limit exceeded"):  # past 1024 levels, like json's RecursionError
            raise BadReview("request body is nested too deeply to be an AdmissionReview") from None
        raise BadReview(f"request body is not valid JSON: {err}") from None


def encode(document: object) -> bytes:
    """Compact JSON (UTF-8, no spaces)."""
    return orjson.dumps(document)


def review(policy: Policy, document: object) -> Result:
    """The answer to `document` (a decoded AdmissionReview, checked here: BadReview when it is
    not one), and what happened."""
    request, api_version = _request(document)
    uid = request["uid"]
    operation = request.get("operation")
    operation = operation if isinstance(operation, str) else ""
    dry_run = request.get("dryRun") is True  # dry runs are answered exactly like real requests
    obj = request.get("object")

    if _is_pod_create(request):
        outcome = _evaluate(policy, obj, uid)
    else:
        # Affinity is immutable after creation: patching on UPDATE would break every update.
        outcome = Outcome(Decision.NOT_SELECTED, obj)
    ops = diff(obj, outcome.pod) if outcome.decision is Decision.MUTATED else []

    response: AdmissionResponse = {"uid": uid, "allowed": True}
    if ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(encode(ops)).decode("ascii")
    if outcome.warnings:
        response["warnings"] = list(outcome.warnings)
    if outcome.injected:
        response["auditAnnotations"] = {AUDIT_ANNOTATION: ",".join(outcome.injected)}
    return Result(
        response={"apiVersion": api_version, "kind": "AdmissionReview", "response": response},
        decision=outcome.decision,
        injected=outcome.injected,
        patch=ops,
        uid=uid,
        operation=operation,
        dry_run=dry_run,
        namespace=apidata.string_or_empty(request.get("namespace")),
        name=_object_name(request, obj),
    )


def create_review(pod: object, username: str) -> AdmissionReviewRequest:
    """The AdmissionReview the API server would send for creating `pod`, as a dry run: the
    offline commands (review, explain) put a pod through exactly the `/mutate` code path."""
    metadata = pod.get("metadata") if isinstance(pod, dict) else None
    meta: dict[str, Any] = metadata if isinstance(metadata, dict) else {}
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) and meta["namespace"] else "default"
    gvk: GroupVersionKind = {"group": "", "version": "v1", "kind": "Pod"}
    gvr: GroupVersionResource = {"group": "", "version": "v1", "resource": "pods"}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": apidata.string_or_empty(meta.get("name")),
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": username},
            "object": pod,
            "oldObject": None,
            "dryRun": True,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def wire_patch(response: AdmissionReviewResponse) -> list[dict[str, Any]]:
    """The JSON patch an AdmissionReview response carries, decoded from base64 as the API server
    decodes it (callers that apply it check the wire form, not our in-memory list)."""
    encoded = response["response"].get("patch")
    patch: list[dict[str, Any]] = orjson.loads(base64.b64decode(encoded)) if encoded else []
    return patch


def _request(document: object) -> tuple[AdmissionRequest, str]:
    if not isinstance(document, dict):
        raise BadReview("request body must be a JSON object (an AdmissionReview)")
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if kind != "AdmissionReview" or api_version not in API_VERSIONS:
        raise BadReview(
            f"not an AdmissionReview: expected kind AdmissionReview and apiVersion "
            f"{' or '.join(API_VERSIONS)}, got kind {kind!r} and apiVersion {api_version!r}"
        )
    request = document.get("request")
    if not isinstance(request, dict):
        raise BadReview("AdmissionReview.request must be an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("AdmissionReview.request.uid must be a non-empty string")
    return cast(AdmissionRequest, request), api_version  # uid checked above; the rest are read as objects


def _is_pod_create(request: AdmissionRequest) -> bool:
    resource, kind = request.get("resource"), request.get("kind")
    return (
        request.get("operation") == "CREATE"
        and isinstance(resource, dict)
        and resource.get("group", "") == ""
        and resource.get("resource") == "pods"
        and not request.get("subResource")
        and isinstance(kind, dict)
        and kind.get("group", "") == ""
        and kind.get("kind") == "Pod"
    )


def _evaluate(policy: Policy, obj: object, uid: str) -> Outcome:
    try:
        return evaluate(policy, obj)
    except Exception:  # a bug of ours must not block or break pod creation
        log.exception("policy evaluation failed for review %s; admitting the pod unchanged", uid)
        return Outcome(
            Decision.ERROR, obj, warnings=("netqos-webhook: internal error; pod admitted unchanged (see webhook logs)",)
        )


def _object_name(request: AdmissionRequest, obj: object) -> str:
    name = apidata.string_or_empty(request.get("name"))
    if name or not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        return name
    meta = obj["metadata"]
    # Pods of a ReplicaSet arrive with an empty request.name and only metadata.generateName.
    return apidata.string_or_empty(meta.get("name")) or apidata.string_or_empty(meta.get("generateName"))
