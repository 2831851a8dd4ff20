"""The admission policies of `manifests --as admission-policy --kubernetes-version <the cluster's>`
in the real API server (admissionregistration.k8s.io/v1 on 1.36+, where 1.36.0-1.36.3 panic on a
list of Object initialisers; v1beta1 on 1.34 and 1.35, whose API server the harness starts with
the feature gate and the beta API enabled): it serves them in that API, accepts them, mutates pods
exactly as the webhook does, leaves opted-out pods alone, sends the warn-only policy's warnings to
kubectl, keeps a pod with thousands of preferred terms within the CEL cost budget, and `status`
recognises the installation. The webhook is unregistered meanwhile, so what changes a pod is the
API server alone.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from typing import Any

import jsonpatch
import pytest
import yaml

from harness.controlplane import Cluster
from tests import podcorpus
from tests.e2e.conftest import cli, served
from webhook.admission import create_review, review, wire_patch
from webhook.admission_policy import cel_scale
from webhook.names import INJECTED_ANNOTATION, LABELS, OPT_OUT_ANNOTATION
from webhook.policy_file import load_policy

# The API each release serves MutatingAdmissionPolicy in (and so what the generator must print).
MUTATING_API = {
    "1.34": "admissionregistration.k8s.io/v1beta1",
    "1.35": "admissionregistration.k8s.io/v1beta1",
    "1.36": "admissionregistration.k8s.io/v1",
    "1.37": "admissionregistration.k8s.io/v1",
}

POLICY_FILE = "deploy/base/policy.yaml"
SELECTOR = ",".join(f"{k}={v}" for k, v in LABELS.items())
KINDS = ",".join(
    f"{kind}admissionpolic{suffix}" for kind in ("mutating", "validating") for suffix in ("ies", "ybindings")
)
PROBE = podcorpus.pod("probe", podcorpus.LABELS)


def dry_run(cluster: Cluster, namespace: str, pod: dict[str, Any], valid: bool = True) -> dict[str, Any] | None:
    """The pod as the API server would store it (admission run, nothing stored); None when its
    validation, which runs after admission, refuses the pod (only with `valid=False`)."""
    body = copy.deepcopy(pod)
    body["metadata"]["namespace"] = namespace
    status, created = cluster.request("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", body)
    if status == 422 and not valid:
        return None
    assert status == 201, (status, created)
    result: dict[str, Any] = created
    return result


def mutated(pod: dict[str, Any]) -> bool:
    return INJECTED_ANNOTATION in (pod["metadata"].get("annotations") or {})


def wait_active(cluster: Cluster, namespace: str, active: bool, timeout: float = 60) -> None:
    """The API server compiles policies from its informers: wait until a probe pod is (or is no
    longer) mutated."""
    deadline = time.monotonic() + timeout
    while mutated(dry_run(cluster, namespace, PROBE) or {}) != active:
        assert time.monotonic() < deadline, (
            f"the admission policies did not become {'active' if active else 'inactive'}"
        )
        time.sleep(0.5)


@pytest.fixture
def policies(cluster: Cluster, unregistered: None, namespace: str) -> Iterator[str]:
    """The generated objects applied with kubectl, active; deleted and inactive afterwards."""
    printed = generated(cluster)
    applied = cluster.kubectl("apply", "-f", "-", input=printed)
    assert applied.stdout.count("created") + applied.stdout.count("configured") + applied.stdout.count(
        "unchanged"
    ) == len(list(yaml.safe_load_all(printed))), applied.stdout
    wait_active(cluster, namespace, active=True)
    yield namespace
    cluster.kubectl("delete", KINDS, "-l", SELECTOR)
    wait_active(cluster, namespace, active=False)


def generated(cluster: Cluster) -> str:
    return cli(
        cluster,
        *("manifests", "--as", "admission-policy", "--warnings", "--config", POLICY_FILE),
        *("--kubernetes-version", cluster.minor),
    ).stdout


def test_the_generated_objects_are_in_the_api_this_version_serves(cluster: Cluster) -> None:
    objects = list(yaml.safe_load_all(generated(cluster)))
    mutating = [o for o in objects if o["kind"].startswith("Mutating")]
    assert {o["apiVersion"] for o in mutating} == {MUTATING_API[cluster.minor]}
    assert all(served(cluster, o) for o in objects), [(o["apiVersion"], o["kind"]) for o in objects]
    v1 = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy"}
    assert served(cluster, v1) == (MUTATING_API[cluster.minor] == v1["apiVersion"])


def webhook_pod(pod: dict[str, Any]) -> dict[str, Any]:
    policy = cel_scale(load_policy(POLICY_FILE))  # the admission policies' scale beside own terms
    response = review(policy, create_review(copy.deepcopy(pod), "e2e")).response
    return jsonpatch.apply_patch(copy.deepcopy(pod), wire_patch(response))


def written(pod: dict[str, Any]) -> tuple[Any, Any]:
    """What the policies may write: the node affinity and the injected annotation."""
    affinity = (pod["spec"].get("affinity") or {}).get("nodeAffinity")
    return affinity, (pod["metadata"].get("annotations") or {}).get(INJECTED_ANNOTATION)


def test_the_api_server_mutates_every_shape_exactly_as_the_webhook(cluster: Cluster, policies: str) -> None:
    failures, compared, changed = [], 0, 0
    for label, pod in podcorpus.shapes():
        # Validation runs after admission: the few shapes it refuses (an In without values, an
        # empty required selector) are admitted by the corpus tests, not stored here.
        stored = dry_run(cluster, policies, pod, valid=False)
        if stored is None:
            continue
        # Defaulting touches neither the node affinity nor the annotations.
        expected = webhook_pod(pod)
        if written(stored) != written(expected):
            failures.append(
                f"{label}: api server {json.dumps(written(stored))} != webhook {json.dumps(written(expected))}"
            )
        compared += 1
        changed += mutated(stored)
    assert not failures, "\n".join(failures)
    assert compared > 40 and changed > 10, (compared, changed)


# What each release's API server stores a preference written `{"matchExpressions": []}` as: the
# typed object drops the empty list (`omitempty` on NodeSelectorTerm.matchExpressions), before
# admission and after it, so the stored term is `preference: {}`, which the scheduler skips alike
# (an empty term). Measured on v1.34.4 and v1.36.3 (the same code in v1.35.4 and v1.37.2: these
# tests check it there). The webhook and the admission policy see and keep the term in that form,
# and give the pod the exact form.
EMPTY_EXPRESSIONS_STORED: dict[str, dict[str, Any]] = {"1.34": {}, "1.35": {}, "1.36": {}, "1.37": {}}
EMPTY_EXPRESSIONS = podcorpus.pod(
    "empty-exprs",
    podcorpus.LABELS,
    affinity={"nodeAffinity": {podcorpus.PREFERRED: [{"weight": 9, "preference": {"matchExpressions": []}}]}},
)


def as_stored(pod: dict[str, Any], minor: str) -> dict[str, Any]:
    """`pod` with its first preferred term's preference as release `minor` stores the empty list."""
    stored = copy.deepcopy(pod)
    stored["spec"]["affinity"]["nodeAffinity"][podcorpus.PREFERRED][0]["preference"] = EMPTY_EXPRESSIONS_STORED[minor]
    return stored


def test_an_empty_match_expressions_list_is_stored_as_each_release_stores_it_beside_the_policies_terms(
    cluster: Cluster, policies: str
) -> None:
    stored = dry_run(cluster, policies, EMPTY_EXPRESSIONS)
    assert stored is not None
    assert written(stored) == written(as_stored(webhook_pod(EMPTY_EXPRESSIONS), cluster.minor))
    preferred = stored["spec"]["affinity"]["nodeAffinity"][podcorpus.PREFERRED]
    assert preferred[0] == {"weight": 9, "preference": EMPTY_EXPRESSIONS_STORED[cluster.minor]}
    assert preferred[1:] == podcorpus.OURS  # beside a skipped term alone: the exact form


def test_an_empty_match_expressions_list_is_stored_as_each_release_stores_it_beside_the_webhooks_terms(
    cluster: Cluster, registered: object, namespace: str
) -> None:
    stored = dry_run(cluster, namespace, EMPTY_EXPRESSIONS)
    assert stored is not None
    answer = review(load_policy(POLICY_FILE), create_review(as_stored(EMPTY_EXPRESSIONS, cluster.minor), "e2e"))
    expected = jsonpatch.apply_patch(as_stored(EMPTY_EXPRESSIONS, cluster.minor), wire_patch(answer.response))
    assert written(stored) == written(expected)
    preferred = stored["spec"]["affinity"]["nodeAffinity"][podcorpus.PREFERRED]
    assert preferred[0] == {"weight": 9, "preference": EMPTY_EXPRESSIONS_STORED[cluster.minor]}
    assert preferred[1:] == podcorpus.OURS


def test_a_labelled_pod_is_stored_mutated_and_an_opted_out_one_as_written(cluster: Cluster, policies: str) -> None:
    pod = podcorpus.pod("labelled", podcorpus.LABELS)
    pod["metadata"]["namespace"] = policies
    cluster.create(copy.deepcopy(pod), policies)
    stored = cluster.pod(policies, "labelled")
    assert stored is not None and written(stored) == written(webhook_pod(pod))
    assert (
        stored["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == podcorpus.OURS
    )
    opted = podcorpus.pod("opted-out", podcorpus.LABELS, annotations={OPT_OUT_ANNOTATION: "false"})
    opted["metadata"]["namespace"] = policies
    cluster.create(copy.deepcopy(opted), policies)
    stored = cluster.pod(policies, "opted-out")
    assert stored is not None and "affinity" not in stored["spec"]
    assert stored["metadata"]["annotations"] == {OPT_OUT_ANNOTATION: "false"}


def test_the_warn_only_policy_sends_the_webhooks_warnings_to_kubectl(cluster: Cluster, policies: str) -> None:
    for label, notes, affinity in (
        ("explicit", None, {"nodeAffinity": {podcorpus.REQUIRED: podcorpus.required(("net", "Exists", []))}}),
        ("odd-opt-out", {OPT_OUT_ANNOTATION: "no"}, None),
    ):
        pod = podcorpus.pod(label, podcorpus.LABELS, annotations=notes, affinity=affinity)
        pod["metadata"]["namespace"] = policies
        response = review(load_policy(POLICY_FILE), create_review(copy.deepcopy(pod), "e2e")).response
        (warning,) = response["response"]["warnings"]
        prefix = "Warning: Validation failed for ValidatingAdmissionPolicy 'netqos-warnings.netqos.io' with binding"
        expected = f"{prefix} 'netqos-warnings.netqos.io': {warning}"
        # The fixture waits for the mutating policy; the API server compiles the validating one
        # from its own informer, which on 1.34 was seen to lag: a server dry run waits for it.
        deadline = time.monotonic() + 60
        while expected not in cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(pod)).stderr:
            assert time.monotonic() < deadline, "the warn-only policy did not become active"
            time.sleep(0.5)
        applied = cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
        assert expected in applied.stderr, applied.stderr


def test_a_pod_with_thousands_of_preferred_terms_stays_within_the_cel_cost_budget(
    cluster: Cluster, policies: str
) -> None:
    many = [podcorpus.term(1 + i % 100, (f"key-{i}", "In", [f"v{i}"])) for i in range(2000)]
    pod = podcorpus.pod("many", podcorpus.LABELS, affinity={"nodeAffinity": {podcorpus.PREFERRED: many}})
    stored = dry_run(cluster, policies, pod)
    assert stored is not None
    preferred = stored["spec"]["affinity"]["nodeAffinity"][podcorpus.PREFERRED]
    assert preferred[:2000] == many and len(preferred) > 2000
    assert written(stored) == written(webhook_pod(pod))


def test_status_recognises_the_admission_policy_installation(cluster: Cluster, policies: str) -> None:
    result = cli(cluster, "status", "--config", POLICY_FILE, "-n", policies, "-o", "json", check=False)
    report = json.loads(result.stdout)
    assert report["installation"] == "admission policy"
    assert report["admission_policies"] == [
        {"name": "netqos.netqos.io", "rule": "netqos", "bound": True, "matches_policy": True}
    ]
    assert report["problems"] == [], report["problems"]
