"""`review` over what users keep in git: workloads, many documents, directories and streams."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.patches import assert_patch_agrees
from tests.fixtures import NETQOS_TERMS, REPO
from tests.fixtures.rejected_pods import HERE as REJECTED_PODS
from tests.fixtures.rejected_pods import REJECTED
from webhook.affinity import PREFERRED
from webhook.workloads import kind_of, pod_of, with_pod

WORKLOADS = REPO / "tests" / "fixtures" / "workloads" / "all-kinds.yaml"
EXAMPLES = REPO / "deploy" / "examples"
EXAMPLE_MUTATED = ("Pod", "default/qos-demo-pod", "mutated")


def netqos(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": ""},
    )


def objects(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def by_kind(kind: str) -> dict:
    return next(o for o in objects(WORKLOADS) if o["kind"] == kind)


# --- the Pod a controller would create -------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, name, generate_name, namespace, owner, controller_labels",
    [
        ("Deployment", None, "web-", "shop", ("apps/v1", "ReplicaSet", "web"), {}),
        (
            "StatefulSet",
            "db-0",
            None,
            "shop",
            ("apps/v1", "StatefulSet", "db"),
            {"statefulset.kubernetes.io/pod-name": "db-0", "apps.kubernetes.io/pod-index": "0"},
        ),
        ("DaemonSet", None, "agent-", "ops", ("apps/v1", "DaemonSet", "agent"), {}),
        ("ReplicaSet", None, "batch-front-", "shop", ("apps/v1", "ReplicaSet", "batch-front"), {}),
        ("ReplicationController", None, "legacy-", None, ("v1", "ReplicationController", "legacy"), {}),
        (
            "Job",
            None,
            "migrate-",
            "shop",
            ("batch/v1", "Job", "migrate"),
            {"job-name": "migrate", "batch.kubernetes.io/job-name": "migrate"},
        ),
        ("CronJob", None, "report-", "shop", ("batch/v1", "Job", "report"), {}),
        ("PodTemplate", None, "sandbox-", "dev", None, {}),
    ],
)
def test_a_workload_becomes_the_pod_its_controller_would_create(
    kind, name, generate_name, namespace, owner, controller_labels
):
    workload = by_kind(kind)
    original = copy.deepcopy(workload)
    template = workload["spec"]["jobTemplate"]["spec"]["template"] if kind == "CronJob" else None
    template = template or workload.get("template") or workload["spec"]["template"]
    pod = pod_of(workload, kind_of(workload))
    meta = pod["metadata"]
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    assert (meta.get("name"), meta.get("generateName"), meta.get("namespace")) == (name, generate_name, namespace)
    assert meta["labels"] == {**template["metadata"]["labels"], **controller_labels}
    assert meta.get("annotations") == template["metadata"].get("annotations")
    assert pod["spec"] == template["spec"]
    refs = [(r["apiVersion"], r["kind"], r["name"]) for r in meta.get("ownerReferences", [])]
    assert refs == ([owner] if owner else [])
    assert all(r["controller"] is True for r in meta.get("ownerReferences", []))
    assert workload == original, "the workload itself is never changed"


@pytest.mark.parametrize(
    "obj",
    [
        {"apiVersion": "v1", "kind": "Service"},
        {"apiVersion": "extensions/v1beta1", "kind": "Deployment"},  # not the apps group
        {"apiVersion": "v1", "kind": "Deployment"},
        {"kind": "Job"},
        "Deployment",
    ],
    ids=repr,
)
def test_only_the_pod_bearing_kinds_of_their_api_group_are_workloads(obj):
    assert kind_of(obj) is None


def test_the_mutated_pod_goes_back_into_the_template_and_nothing_else_changes():
    workload = by_kind("Deployment")
    pod = pod_of(workload, kind_of(workload))
    mutated = copy.deepcopy(pod)
    mutated["metadata"]["annotations"] = {"netqos.io/injected": "netqos"}
    mutated["spec"]["affinity"] = {"nodeAffinity": {PREFERRED: NETQOS_TERMS}}
    out = with_pod(workload, kind_of(workload), mutated)
    assert out["spec"]["template"]["spec"] == mutated["spec"]
    assert out["spec"]["template"]["metadata"] == {
        "labels": workload["spec"]["template"]["metadata"]["labels"],
        "annotations": {"netqos.io/injected": "netqos"},
    }
    out["spec"]["template"] = workload["spec"]["template"]
    assert out == workload


# --- one workload: today's outputs, and -o workload ------------------------------------------------


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "ReplicationController", "CronJob", "PodTemplate"])
def test_one_workload_patch_pod_and_workload_outputs_agree_with_kubectl(tmp_path, kind):
    source = tmp_path / f"{kind}.yaml"
    source.write_text(yaml.safe_dump(by_kind(kind)))
    ops = json.loads(netqos("review", str(source), "-o", "patch").stdout)
    pod = yaml.safe_load(netqos("review", str(source), "-o", "pod").stdout)
    before = pod_of(by_kind(kind), kind_of(by_kind(kind)))
    assert pod["spec"]["affinity"]["nodeAffinity"][PREFERRED] == NETQOS_TERMS
    assert_patch_agrees(before, ops, pod, tmp_path)
    workload = yaml.safe_load(netqos("review", str(source), "-o", "workload").stdout)
    assert with_pod(by_kind(kind), kind_of(by_kind(kind)), pod) == workload


def test_o_workload_of_a_pod_says_to_use_o_pod():
    done = netqos("review", str(EXAMPLES / "test-pod.yaml"), "-o", "workload")
    assert done.returncode == 2 and "use -o pod" in done.stderr and "Traceback" not in done.stderr


def test_o_pod_of_several_objects_is_a_yaml_stream_of_every_pod_as_mutated():
    done = netqos("review", str(WORKLOADS), "-o", "pod")
    assert done.returncode == 0, done.stderr
    pods = [d for d in yaml.safe_load_all(done.stdout) if d]
    carriers = [o for o in objects(WORKLOADS) if kind_of(o) is not None or o["kind"] == "Pod"]
    assert len(pods) == len(carriers) and all(p["kind"] == "Pod" for p in pods)
    mutated = [p for p in pods if p["metadata"].get("annotations", {}).get("netqos.io/injected") == "netqos"]
    assert len(mutated) == [row[2] for row in EXPECTED].count("mutated")
    assert all(p["spec"]["affinity"]["nodeAffinity"][PREFERRED][-len(NETQOS_TERMS) :] == NETQOS_TERMS for p in mutated)
    assert "Warning: -o pod: 2 objects left out, carrying no pod to print" in done.stderr  # Service, ConfigMap


def test_o_workload_of_several_objects_is_every_object_with_its_template_mutated_for_a_pipeline():
    done = netqos("review", str(WORKLOADS), "-o", "workload")
    assert done.returncode == 0, done.stderr
    out = [d for d in yaml.safe_load_all(done.stdout) if d]
    given = objects(WORKLOADS)
    assert [(o["kind"], o["metadata"]["name"]) for o in out] == [(o["kind"], o["metadata"]["name"]) for o in given]
    deployment = next(o for o in out if o["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][PREFERRED] == NETQOS_TERMS
    service = next(o for o in out if o["kind"] == "Service")
    assert service == by_kind("Service")


def test_o_response_of_several_objects_names_the_outputs_that_take_them():
    done = netqos("review", str(WORKLOADS), "-o", "response")
    assert done.returncode == 2 and "use -o table, -o json, or -o pod / -o workload" in done.stderr


# --- several objects: table, json, --fail-on -------------------------------------------------------

EXPECTED = [
    # kind, namespace/name, decision, rules, warnings
    ("Deployment", "shop/web", "mutated", "netqos", "0"),
    ("StatefulSet", "shop/db", "mutated", "netqos", "0"),
    ("DaemonSet", "ops/agent", "not_selected", "-", "0"),
    ("ReplicaSet", "shop/batch-front", "skipped_opt_out", "-", "0"),
    ("ReplicationController", "default/legacy", "mutated", "netqos", "0"),
    ("Job", "shop/migrate", "skipped_explicit", "-", "1"),
    ("CronJob", "shop/report", "mutated", "netqos", "0"),
    ("PodTemplate", "dev/sandbox", "mutated", "netqos", "1"),
    ("Service", "shop/web", "not a pod", "-", "0"),
    ("ConfigMap", "shop/settings", "not a pod", "-", "0"),
]


def table_rows(text: str) -> list[tuple[str, ...]]:
    lines = text.splitlines()
    assert lines[0].split() == ["KIND", "NAMESPACE/NAME", "DECISION", "RULES", "WARNINGS"]
    return [tuple(part for part in line.split("   ") if part.strip()) for line in lines[1:]]


def test_several_objects_get_one_table_row_each_and_warnings_name_their_object():
    done = netqos("review", str(WORKLOADS))
    assert done.returncode == 0, done.stderr
    assert [tuple(c.strip() for c in row) for row in table_rows(done.stdout)] == EXPECTED
    assert done.stderr.splitlines()[0].startswith(
        f"Warning: input file {WORKLOADS}, document 6: Job shop/migrate: netqos-webhook: rule"
    )
    assert 'annotation netqos.io/inject="False" does not opt out' in done.stderr


def test_json_records_carry_kind_namespace_name_decision_rules_warnings_and_patch(tmp_path):
    done = netqos("review", str(WORKLOADS), "-o", "json")
    records = json.loads(done.stdout)
    assert [(r["kind"], f"{r['namespace']}/{r['name']}", r["decision"]) for r in records] == [
        (k, n, d) for k, n, d, _, _ in EXPECTED
    ]
    assert all(
        set(r) == {"kind", "namespace", "name", "decision", "rules", "warnings", "patch", "file"} for r in records
    )
    assert {r["file"] for r in records} == {str(WORKLOADS)}
    for record, obj in zip(records, objects(WORKLOADS), strict=True):
        kind = kind_of(obj)
        if record["decision"] != "mutated":
            assert record["patch"] == []
            continue
        pod = pod_of(obj, kind)
        expected = copy.deepcopy(pod)
        expected.setdefault("metadata", {}).setdefault("annotations", {})["netqos.io/injected"] = "netqos"
        expected["spec"]["affinity"] = {"nodeAffinity": {PREFERRED: NETQOS_TERMS}}
        assert_patch_agrees(pod, record["patch"], expected, tmp_path)


@pytest.mark.parametrize(
    "fail_on, code",
    [
        ("skipped_explicit", 3),
        ("skipped_explicit,invalid", 3),
        ("invalid", 0),
        ("not_selected", 3),
        ("error,invalid", 0),
    ],
)
def test_fail_on_chosen_decisions_exits_3_after_printing_everything(fail_on, code):
    done = netqos("review", str(WORKLOADS), "--fail-on", fail_on)
    assert done.returncode == code, done.stderr
    assert len(table_rows(done.stdout)) == len(EXPECTED)
    assert ("(--fail-on)" in done.stderr) == (code == 3)


def test_a_directory_is_each_of_its_manifest_files_in_name_order(tmp_path):
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(by_kind("Job")))
    (tmp_path / "a.json").write_text(json.dumps(by_kind("Deployment")))
    (tmp_path / "notes.txt").write_text("not a manifest")
    done = netqos("review", str(tmp_path))
    assert [row[0].strip() for row in table_rows(done.stdout)] == ["Deployment", "Job"]


def test_several_paths_are_reviewed_in_the_order_given(tmp_path):
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(by_kind("Job")))
    (tmp_path / "web.json").write_text(json.dumps(by_kind("Deployment")))
    done = netqos("review", str(tmp_path / "web.json"), str(tmp_path / "job.yaml"), str(EXAMPLES / "test-pod.yaml"))
    assert done.returncode == 0, done.stderr
    assert [row[0].strip() for row in table_rows(done.stdout)] == ["Deployment", "Job", "Pod"]


def test_a_directory_with_one_file_is_listed_as_a_table(tmp_path):
    (tmp_path / "pod.yaml").write_text((EXAMPLES / "test-pod.yaml").read_text())
    done = netqos("review", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert [row[0].strip() for row in table_rows(done.stdout)] == ["Pod"]


def test_a_subdirectory_is_reported_not_skipped_silently(tmp_path):
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(by_kind("Deployment")))
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "b.yaml").write_text(yaml.safe_dump(by_kind("Job")))
    done = netqos("review", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"Warning: {tmp_path / 'more'}: a subdirectory, not reviewed" in done.stderr
    assert [row[0].strip() for row in table_rows(done.stdout)] == ["Deployment"]


def test_a_broken_link_in_a_directory_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(by_kind("Deployment")))
    (tmp_path / "b.yaml").symlink_to(tmp_path / "gone.yaml")
    done = netqos("review", str(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert f"input file {tmp_path / 'b.yaml'}: a broken symbolic link" in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_the_help_example_renders_a_directory_kustomize_can_build():
    done = netqos("review", "--help")
    assert "kubectl kustomize deploy/base | netqos-webhook review -" in done.stdout
    assert (REPO / "deploy" / "base" / "kustomization.yaml").exists()


def test_a_list_counts_as_its_items():
    items = {"apiVersion": "v1", "kind": "List", "items": [by_kind("Deployment"), by_kind("Service")]}
    done = netqos("review", "-", "-o", "json", stdin=json.dumps(items))
    assert [r["kind"] for r in json.loads(done.stdout)] == ["Deployment", "Service"]


# --- a rendered stream -----------------------------------------------------------------------------


def test_a_kustomize_stream_with_the_examples_and_every_workload_kind_is_summarised():
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: cannot render deploy/base with kustomize")
    rendered = subprocess.run(
        [kubectl, "kustomize", str(REPO / "deploy" / "base")], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    examples = [(EXAMPLES / name).read_text() for name in sorted(p.name for p in EXAMPLES.glob("*.yaml"))]
    stream = "\n---\n".join([rendered, *examples, WORKLOADS.read_text()])
    done = netqos("review", "-", "--fail-on", "invalid,error", stdin=stream)
    assert done.returncode == 0, done.stderr
    rows = [tuple(c.strip() for c in row) for row in table_rows(done.stdout)]
    kinds = {row[0]: row for row in rows}
    assert kinds["MutatingWebhookConfiguration"][2] == "not a pod"
    assert ("Deployment", "netqos-system/netqos-webhook", "not_called", "-", "1") in rows
    assert ("Deployment", "default/latency-demo", "mutated", "netqos", "0") in rows
    assert ("Pod", "default/qos-demo-pod", "mutated", "netqos", "0") in rows
    assert rows[-len(EXPECTED) :] == EXPECTED
    assert [row[0] for row in rows if row[2] == "not a pod"][:3] == ["Namespace", "ServiceAccount", "ConfigMap"]


# --- namespaces the registration excludes ----------------------------------------------------------


def pod_in(namespace: str) -> str:
    pod = yaml.safe_load((EXAMPLES / "test-pod.yaml").read_text())
    pod["metadata"]["namespace"] = namespace
    return yaml.safe_dump(pod)


@pytest.mark.parametrize(
    "namespace, args, decision",
    [
        ("kube-system", [], "not_called"),
        ("netqos-system", [], "not_called"),
        ("netqos-system", ["--webhook-namespace", "webhooks"], "mutated"),
        ("webhooks", ["--webhook-namespace", "webhooks"], "not_called"),
        ("default", [], "mutated"),
    ],
)
def test_a_pod_in_an_excluded_namespace_is_not_called_not_mutated(namespace, args, decision):
    done = netqos("review", "-", "-o", "json", *args, stdin=pod_in(namespace))
    assert done.returncode == 0, done.stderr
    (record,) = json.loads(done.stdout)
    assert record["decision"] == decision
    if decision == "not_called":
        assert record["patch"] == [] and record["rules"] == []
        assert f"namespace {namespace} is excluded by the registration's namespaceSelector" in record["warnings"][0]


def test_fail_on_can_name_not_called():
    done = netqos("review", "-", "--fail-on", "not_called", stdin=pod_in("kube-system"))
    assert done.returncode == 3 and "decided not_called (--fail-on)" in done.stderr


@pytest.mark.parametrize(
    "document, shown",
    [({"metadata": {"name": "x"}}, "got an object without a kind"), ({"kind": "Service"}, 'got kind "Service"')],
)
def test_a_lone_object_that_carries_no_pod_is_named_as_written(document, shown):
    done = netqos("review", "-", stdin=json.dumps(document))
    assert done.returncode == 2 and shown in done.stderr and "None" not in done.stderr


@pytest.mark.parametrize(
    ("fixture_name", "what"),
    [
        ("review-update.json", "the UPDATE of a pod"),
        ("review-create-binding-subresource.json", "the CREATE of a pod's binding subresource"),
    ],
)
def test_a_review_the_registration_never_sends_is_not_called_and_says_why(fixture_name: str, what: str) -> None:
    path = str(REPO / "tests" / "fixtures" / fixture_name)
    done = netqos("review", path, "-o", "json")
    assert done.returncode == 0, done.stderr
    (record,) = json.loads(done.stdout)
    assert record["decision"] == "not_called"
    assert record["warnings"] == [
        f"the webhook is not called: the registration's rules send the CREATE of pods only, and this is {what}"
    ]
    assert netqos("review", path, "--fail-on", "not_called").returncode == 3


# --- a workload without a usable pod template, among others ------------------------------------------

BROKEN_TEMPLATES = [
    # the workload's spec as written, the row's name, the warning after "KIND NAME: "
    ("Deployment", "{replicas: 1}", "spec.template must be an object (the pod template); it is missing"),
    ("Deployment", "{template: 5}", "spec.template must be an object (the pod template); got 5"),
    ("Deployment", "{template: null}", "spec.template must be an object (the pod template); got null"),
    ("Deployment", "5", "spec must be an object (the pod template); got 5"),
    (
        "CronJob",
        "{jobTemplate: {spec: {}}}",
        "spec.jobTemplate.spec.template must be an object (the pod template); it is missing",
    ),
]


@pytest.mark.parametrize(
    "kind, spec, warning", BROKEN_TEMPLATES, ids=[f"{k} spec: {s}" for k, s, _ in BROKEN_TEMPLATES]
)
def test_a_workload_without_a_template_is_an_invalid_row_and_the_stream_goes_on(tmp_path, kind, spec, warning):
    api = "batch/v1" if kind == "CronJob" else "apps/v1"
    broken = tmp_path / "broken.yaml"
    broken.write_text(f"apiVersion: {api}\nkind: {kind}\nmetadata: {{name: w, namespace: shop}}\nspec: {spec}\n")
    pod = EXAMPLES / "test-pod.yaml"
    done = netqos("review", str(broken), str(pod), "--fail-on", "invalid")
    assert done.returncode == 3, done.stderr
    assert [tuple(c.strip() for c in row)[:3] for row in table_rows(done.stdout)] == [
        (kind, "shop/w", "invalid"),
        ("Pod", "default/qos-demo-pod", "mutated"),
    ]
    assert done.stderr.splitlines()[0] == (f"Warning: input file {broken}: {kind} shop/w: {warning}; no pod to review")
    assert not re.search(r"\b(NoneType|int|str|dict)\b", done.stderr), done.stderr  # JSON's words, not Python's
    streamed = netqos("review", str(broken), str(pod), "-o", "pod")
    assert streamed.returncode == 0, streamed.stderr
    assert [d["kind"] for d in yaml.safe_load_all(streamed.stdout) if d] == ["Pod"]
    records = json.loads(netqos("review", str(broken), str(pod), "-o", "json").stdout)
    assert [(r["decision"], r["file"]) for r in records] == [("invalid", str(broken)), ("mutated", str(pod))]


# --- review and explain agree on what the API server refuses ------------------------------------------

NO_API_VERSION = REPO / "tests" / "fixtures" / "explain" / "pod-no-apiversion.yaml"


@pytest.mark.parametrize(
    "args, where",
    [
        (["review", str(NO_API_VERSION)], f"input file {NO_API_VERSION}"),
        (["review", str(NO_API_VERSION), "-o", "pod"], f"input file {NO_API_VERSION}"),
        (
            ["explain", "--pod", str(NO_API_VERSION), "--nodes", str(EXAMPLES / "nodes.yaml")],
            f"pod file {NO_API_VERSION}",
        ),
    ],
    ids=["review", "review -o pod", "explain"],
)
def test_review_and_explain_refuse_a_pod_without_api_version_alike(args, where):
    done = netqos(*args)
    assert done.returncode == 2, done.stdout
    ended = "." if args[0] == "explain" else ""  # explain ends its sentences (webhook.explain.sentence)
    assert done.stderr == (
        f'netqos-webhook {args[0]}: {where}: apiVersion is null and kind "Pod": the API server only takes a Pod '
        f"as apiVersion: v1, kind: Pod; add both{ended}\n"
    )


def test_a_pod_without_api_version_in_a_stream_is_an_invalid_row():
    done = netqos("review", str(NO_API_VERSION), str(EXAMPLES / "test-pod.yaml"), "--fail-on", "invalid")
    assert done.returncode == 3, done.stderr
    assert [tuple(c.strip() for c in row)[:3] for row in table_rows(done.stdout)] == [
        ("Pod", "p", "invalid"),
        ("Pod", "default/qos-demo-pod", "mutated"),
    ]
    assert f"Warning: input file {NO_API_VERSION}: Pod p: apiVersion is null" in done.stderr


# --- pods the API server refuses are invalid, never mutated (tests/fixtures/rejected_pods) ------------


@pytest.mark.parametrize(("name", "field", "_"), REJECTED, ids=[r[0] for r in REJECTED])
def test_review_and_explain_refuse_a_pod_the_api_server_rejects_naming_the_field_alike(name, field, _):
    path = REJECTED_PODS / name
    reviewed = netqos("review", str(path))
    explained = netqos("explain", "--pod", str(path), "--nodes", str(EXAMPLES / "nodes.yaml"))
    assert reviewed.returncode == explained.returncode == 2, reviewed.stdout
    assert reviewed.stderr == f"netqos-webhook review: input file {path}: {field}; fix the field\n"
    assert explained.stderr == f"netqos-webhook explain: pod file {path}: {field}; fix the field.\n"


def test_pods_the_api_server_rejects_are_invalid_rows_that_fail_on_invalid():
    done = netqos("review", str(REJECTED_PODS), str(EXAMPLES / "test-pod.yaml"), "--fail-on", "invalid")
    assert done.returncode == 3, done.stderr
    rows = [tuple(c.strip() for c in row)[:3] for row in table_rows(done.stdout)]
    assert rows == [*(("Pod", Path(name).stem, "invalid") for name, _, _ in sorted(REJECTED)), EXAMPLE_MUTATED]
    for name, field, _ in REJECTED:
        assert f"Warning: input file {REJECTED_PODS / name}: Pod {Path(name).stem}: {field}" in done.stderr


def test_a_workload_whose_pod_the_api_server_rejects_is_invalid(tmp_path):
    pod = yaml.safe_load((REJECTED_PODS / "operator-inn.yaml").read_text())
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "inn", "namespace": "shop"},
        "spec": {
            "selector": {"matchLabels": pod["metadata"]["labels"]},
            "template": {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]},
        },
    }
    source = tmp_path / "deployment.yaml"
    source.write_text(yaml.safe_dump(deployment))
    [record] = json.loads(netqos("review", str(source), str(tmp_path), "-o", "json").stdout)[:1]
    assert (record["decision"], record["patch"]) == ("invalid", [])
    assert record["warnings"][0].startswith("the pod of its template: spec.affinity.nodeAffinity.")


# --- review's output: for a person by default, the wire format and records on request ------------------


def test_one_object_is_described_for_a_person_by_default_and_o_text_describes_each_of_several():
    one = netqos("review", str(EXAMPLES / "test-pod.yaml"))
    several = netqos("review", str(EXAMPLES / "test-pod.yaml"), str(EXAMPLES / "test-pod.yaml"), "-o", "text")
    head = f"Pod default/qos-demo-pod ({EXAMPLES / 'test-pod.yaml'}): mutated by rule netqos"
    assert one.stdout.splitlines()[0] == head
    assert "  adds annotation netqos.io/injected=netqos" in one.stdout.splitlines()
    assert several.stdout == one.stdout + "\n" + one.stdout


def test_a_pod_left_alone_says_no_change_and_why_on_stderr():
    path = REPO / "tests" / "fixtures" / "review-create-explicit-net.json"
    done = netqos("review", str(path))
    assert done.stdout == f"Pod default/explicit-net ({path}): skipped_explicit\n  no change\n"
    assert done.stderr.startswith('Warning: netqos-webhook: rule "netqos" not applied')


def test_o_response_is_the_admission_review_the_webhook_sends():
    done = netqos("review", str(EXAMPLES / "test-pod.yaml"), "-o", "response")
    response = json.loads(done.stdout)
    assert (response["kind"], response["response"]["patchType"]) == ("AdmissionReview", "JSONPatch")


def test_o_yaml_is_the_json_records_as_yaml():
    as_json = json.loads(netqos("review", str(WORKLOADS), "-o", "json").stdout)
    assert yaml.safe_load(netqos("review", str(WORKLOADS), "-o", "yaml").stdout) == as_json
