"""Hostile and malformed input: whatever arrives, the webhook answers 2xx/4xx, never 5xx, and every
patch it returns applies cleanly (Python's jsonpatch and Go's, through `kubectl patch --local`),
removes or reorders nothing the pod had, and a second pass changes nothing.

Bounds for CI: each property runs NETQOS_HYPOTHESIS_EXAMPLES examples (default 200; deadline
off). The kubectl cross-check is its own property on well-formed pods with fewer examples
(NETQOS_KUBECTL_EXAMPLES, default 40; ~70 ms per kubectl call), not a call per example of the
others: Go's JSON-patch is a second opinion on patches, and patches come from well-formed pods.
"""

from __future__ import annotations

import base64
import json
import os

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harness.patches import apply_kubectl, apply_python, pod_review
from tests.fixtures import CLASSIC_TERMS, NETQOS_TERMS
from webhook.affinity import PREFERRED
from webhook.policy_file import default_policy
from webhook.serving.app import AppConfig, create_app

EXAMPLES = int(os.environ.get("NETQOS_HYPOTHESIS_EXAMPLES", "200"))
KUBECTL_EXAMPLES = int(os.environ.get("NETQOS_KUBECTL_EXAMPLES", "40"))
PROPERTY = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
INJECTED = "netqos.io/injected"

APP = create_app(AppConfig(policy=default_policy(), max_body_bytes=1024 * 1024))

# --- strategies ----------------------------------------------------------------------------------

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)  # any JSON-encodable string
interesting_keys = st.sampled_from(
    [
        "labels",
        "annotations",
        "spec",
        "affinity",
        "nodeAffinity",
        PREFERRED,
        REQUIRED,
        "nodeSelectorTerms",
        "matchExpressions",
        "matchFields",
        "key",
        "operator",
        "values",
        "weight",
        "preference",
        "qos",
        "net",
        "netqos.io/inject",
        INJECTED,
        "a/b~c",
        "~1",
        "/",
        "~",
        "ü/ß~0",
        "",
    ]
)
keys = interesting_keys | text
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
    | st.sampled_from(["latency-sensitive", "false", "In", "NotIn", "high", "low", "netqos"])
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=24,
)

api_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)


def either(valid, weight_valid=3):
    """Mostly the valid shape, sometimes anything at all (wrong types everywhere)."""
    return st.one_of(*([valid] * weight_valid), json_values)


label_keys = st.sampled_from(["qos", "app", "net", "a/b~c", "example.com/x"]) | text
label_maps = st.dictionaries(label_keys, st.sampled_from(["latency-sensitive", "batch", ""]) | text, max_size=4)
selected_labels = label_maps.map(lambda m: {**m, "qos": "latency-sensitive"})
annotation_maps = st.dictionaries(
    st.sampled_from(["netqos.io/inject", INJECTED, "x/y~z", "kubectl.kubernetes.io/last-applied-configuration"]) | text,
    st.sampled_from(["false", "true", "netqos", "other,netqos", "", "other"]) | text,
    max_size=4,
)
valid_requirements = st.one_of(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(["zone", "kubernetes.io/arch", "net"]),
            "operator": st.sampled_from(["In", "NotIn"]),
            "values": st.lists(st.sampled_from(["high", "low", "a", "amd64"]), min_size=1, max_size=3),
        }
    ),
    st.fixed_dictionaries(
        {"key": st.sampled_from(["zone", "disk"]), "operator": st.sampled_from(["Exists", "DoesNotExist"])}
    ),
    st.fixed_dictionaries(
        {"key": st.just("cores"), "operator": st.sampled_from(["Gt", "Lt"]), "values": st.just(["4"])}
    ),
)
any_requirements = st.fixed_dictionaries(  # operator and values need not agree: an invalid pod, left alone
    {
        "key": st.sampled_from(["net", "zone", "kubernetes.io/arch"]),
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    },
    optional={"values": st.lists(st.sampled_from(["high", "low", "1", "a"]), max_size=3)},
)
requirements = valid_requirements | valid_requirements | any_requirements
own_terms = st.fixed_dictionaries(
    {
        "weight": st.integers(1, 100),
        "preference": st.fixed_dictionaries(
            {},
            optional={
                "matchExpressions": st.lists(requirements, max_size=3),
                "matchFields": st.lists(
                    st.fixed_dictionaries(
                        {"key": st.just("metadata.name"), "operator": st.just("In"), "values": st.just(["n1"])}
                    ),
                    max_size=1,
                ),
            },
        ),
    },
)
preferred_terms = own_terms | st.sampled_from(NETQOS_TERMS)  # re-invocation: our own terms already there
required_affinity = st.fixed_dictionaries(
    {
        "nodeSelectorTerms": st.lists(
            st.fixed_dictionaries({"matchExpressions": st.lists(requirements, max_size=2)}), max_size=2
        )
    }
)


def pods(valid_weight: int):
    """Pods as the API server sends them; with valid_weight 0 fields, any field may be any JSON."""
    e = (lambda s: either(s, valid_weight)) if valid_weight else (lambda s: s)
    node_affinity = st.fixed_dictionaries(
        {}, optional={PREFERRED: e(st.lists(e(preferred_terms), max_size=3)), REQUIRED: e(required_affinity)}
    )
    # A well-formed pod holds only what the API server can (it decodes the pod into typed fields
    # before calling webhooks): no integers beyond int64, which Go would turn into floats.
    other = json_values if valid_weight else api_values
    affinity = st.fixed_dictionaries({}, optional={"nodeAffinity": e(node_affinity), "podAntiAffinity": other})
    spec = st.fixed_dictionaries(
        {"containers": st.just([{"name": "c", "image": "registry.example/app:1"}])},
        optional={"affinity": e(affinity), "nodeSelector": st.dictionaries(label_keys, text, max_size=2)},
    )
    metadata = st.fixed_dictionaries(
        {"name": st.sampled_from(["p", "web-0"])},
        optional={
            "labels": e(label_maps | selected_labels),
            "annotations": e(annotation_maps),
            "generateName": st.just("web-"),
        },
    )
    return st.fixed_dictionaries(
        {"apiVersion": st.just("v1"), "kind": st.just("Pod"), "metadata": e(metadata), "spec": e(spec)}
    )


well_formed_pods = pods(valid_weight=0)
mangled_pods = pods(valid_weight=3)

# --- the properties ----------------------------------------------------------------------------------


def post(body: bytes, content_type: str = "application/json"):
    return APP.test_client().post("/mutate", data=body, content_type=content_type)


def answer(obj, uid="uid-h"):
    response = post(json.dumps(pod_review(obj, uid=uid)).encode())
    assert response.status_code == 200, response.get_data()[:300]
    review = response.get_json()["response"]
    assert review["uid"] == uid and review["allowed"] is True
    assert not any("internal error" in w for w in review.get("warnings", ())), review
    ops = json.loads(base64.b64decode(review["patch"])) if "patch" in review else []
    return ops


def assert_kept(before, after, path=""):
    """Everything `before` had is in `after`, at the same place, in the same order.

    A JSON null is an unset field in the Kubernetes API (the API server drops it): the webhook
    may fill it, as it fills an absent one."""
    if before is None:
        return
    if isinstance(before, dict):
        assert isinstance(after, dict), path
        assert [k for k in after if k in before] == list(before), f"{path}: members removed or reordered"
        for key, value in before.items():
            if path == "/metadata/annotations" and key == INJECTED:
                old = [n for n in value.split(",") if n]
                assert after[key].split(",")[: len(old)] == old, "a rule name already recorded was dropped"
                continue
            assert_kept(value, after[key], f"{path}/{key}")
    elif isinstance(before, list):
        assert isinstance(after, list) and len(after) >= len(before), path
        for index, item in enumerate(before):
            assert_kept(item, after[index], f"{path}/{index}")
        if len(after) > len(before):
            assert path == f"/spec/affinity/nodeAffinity/{PREFERRED}", f"{path}: grew"
    else:
        assert type(after) is type(before) and after == before, path


def check_review(obj):
    ops = answer(obj)
    event("patched" if ops else "no patch")  # see --hypothesis-show-statistics
    if not ops:
        return None
    for op in ops:
        assert op["op"] in ("add", "replace"), f"the webhook removes nothing: {op}"
    after = apply_python(obj, ops)
    assert_kept(obj, after)
    assert answer(after) == [], "a second pass must change nothing"
    return after


@PROPERTY
@given(obj=json_values)
def test_any_json_as_the_object_is_answered_and_left_alone(obj):
    assert answer(obj) == []  # nothing shaped like a selected pod: no patch, never an error


@PROPERTY
@given(pod=mangled_pods)
def test_pods_with_wrong_types_anywhere_get_a_clean_patch_or_none(pod):
    check_review(pod)


@PROPERTY
@given(pod=well_formed_pods)
def test_well_formed_pods_patch_cleanly_keep_everything_and_are_idempotent(pod):
    after = check_review(pod)
    labels = pod["metadata"].get("labels") or {}
    if after is not None:
        assert labels.get("qos") == "latency-sensitive"
        terms = after["spec"]["affinity"]["nodeAffinity"][PREFERRED]
        # every form of the default rule holds the table's net In [high] term at some weight; the
        # constant pair comes with it unless the pod has preferred terms of its own
        high = CLASSIC_TERMS[0]["preference"]
        assert any(term.get("preference") == high for term in terms)
        affinity = (pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}
        if not affinity.get(PREFERRED):
            assert all(term in terms for term in NETQOS_TERMS)


@settings(max_examples=KUBECTL_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=well_formed_pods, labels=label_maps)
def test_gos_json_patch_agrees_with_pythons(tmp_path_factory, pod, labels):
    pod["metadata"]["labels"] = {**labels, "qos": "latency-sensitive"}  # selected: there is a patch to check
    ops = answer(pod)
    if ops:
        assert apply_kubectl(pod, ops, tmp_path_factory.mktemp("kubectl")) == apply_python(pod, ops)


@PROPERTY
@given(
    envelope=st.fixed_dictionaries(
        {
            "apiVersion": st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]) | json_values,
            "kind": st.just("AdmissionReview") | json_values,
        },
        optional={
            "request": st.fixed_dictionaries(
                {},
                optional={
                    "uid": st.just("u") | json_values,
                    "operation": st.sampled_from(["CREATE", "UPDATE"]) | json_values,
                    "kind": st.just({"group": "", "version": "v1", "kind": "Pod"}) | json_values,
                    "resource": st.just({"group": "", "version": "v1", "resource": "pods"}) | json_values,
                    "subResource": json_values,
                    "dryRun": json_values,
                    "namespace": json_values,
                    "name": json_values,
                    "object": mangled_pods | json_values,
                },
            )
            | json_values
        },
    )
)
def test_any_envelope_is_answered_with_200_or_400_never_5xx(envelope):
    response = post(json.dumps(envelope).encode())
    assert response.status_code in (200, 400)
    body = response.get_json()
    if response.status_code == 400:
        assert body["error"] and len(body["error"]) <= 500
    else:
        assert body["response"]["uid"] == envelope["request"]["uid"] and body["response"]["allowed"] is True


# --- malformed HTTP requests ---------------------------------------------------------------------------

REVIEW = json.dumps(pod_review({"metadata": {"labels": {"qos": "latency-sensitive"}}})).encode()


def deep(levels: int) -> bytes:
    return (
        b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"d","object":'
        + b'{"a":' * levels
        + b"1"
        + b"}" * levels
        + b"}}"
    )


MALFORMED = [
    ("wrong method", "GET", "/mutate", None, None, 405),
    ("PUT", "PUT", "/mutate", REVIEW, "application/json", 405),
    ("wrong content type", "POST", "/mutate", REVIEW, "text/plain", 415),
    ("no content type", "POST", "/mutate", REVIEW, None, 415),
    ("empty body", "POST", "/mutate", b"", "application/json", 400),
    ("truncated body", "POST", "/mutate", REVIEW[: len(REVIEW) // 2], "application/json", 400),
    ("oversized body", "POST", "/mutate", b" " * (1024 * 1024 + 1), "application/json", 413),
    ("invalid UTF-8", "POST", "/mutate", b'{"kind":"\xff\xfe"}', "application/json", 400),
    ("a JSON array", "POST", "/mutate", b"[1,2]", "application/json", 400),
    ("JSON null", "POST", "/mutate", b"null", "application/json", 400),
    ("integer of 5000 digits", "POST", "/mutate", b'{"kind":' + b"9" * 5000 + b"}", "application/json", 400),
    ("nested 100 000 deep", "POST", "/mutate", deep(100_000), "application/json", 400),
    ("nested 200 deep", "POST", "/mutate", deep(200), "application/json", 200),
    ("unknown path", "POST", "/admit", REVIEW, "application/json", 404),
]


@pytest.mark.parametrize("case, method, path, body, content_type, status", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_http_requests_get_a_4xx_with_a_json_reason(case, method, path, body, content_type, status):
    response = APP.test_client().open(path, method=method, data=body, content_type=content_type)
    assert response.status_code == status, case
    assert response.is_json
    if status >= 400:
        assert response.get_json()["error"]
