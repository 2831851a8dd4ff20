"""/metrics and the review log line: what an operator sees, from the app in one process."""

from __future__ import annotations

import functools
import io
import json
import logging
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness import pods
from harness.patches import pod_review
from harness.server import metric_value
from tests.fixtures import fixture
from webhook.serving import logs

LS = {"qos": "latency-sensitive"}
pod = functools.partial(pods.pod, containers=[{"name": "c", "image": "i"}])


def scrape(client) -> str:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain; version=0.0.4")
    return response.get_data(as_text=True)


# Each row: a request to /mutate and the series it must add 1 to.
CASES = [
    ("selected pod", pod_review(pod(LS)), {"decision": "mutated", "operation": "CREATE", "dry_run": "false"}),
    ("dry run", pod_review(pod(LS), dryRun=True), {"decision": "mutated", "operation": "CREATE", "dry_run": "true"}),
    ("unlabelled pod", pod_review(pod()), {"decision": "not_selected", "operation": "CREATE", "dry_run": "false"}),
    (
        "opt-out",
        pod_review(pod(LS, {"netqos.io/inject": "false"})),
        {"decision": "skipped_opt_out", "operation": "CREATE", "dry_run": "false"},
    ),
    (
        "explicit net affinity",
        fixture("review-create-explicit-net.json"),
        {"decision": "skipped_explicit", "operation": "CREATE", "dry_run": "false"},
    ),
    (
        "re-invoked",
        fixture("review-create-reinvoked.json"),
        {"decision": "unchanged", "operation": "CREATE", "dry_run": "false"},
    ),
    (
        "update",
        pod_review(pod(LS), operation="UPDATE"),
        {"decision": "not_selected", "operation": "UPDATE", "dry_run": "false"},
    ),
    (
        "labels as a list",
        pod_review({"metadata": {"labels": ["qos"]}}),
        {"decision": "invalid", "operation": "CREATE", "dry_run": "false"},
    ),
    (
        "made-up operation",
        pod_review(pod(LS), operation="X" * 40),
        {"decision": "not_selected", "operation": "unknown", "dry_run": "false"},
    ),
    ("not JSON", b"{", {"decision": "invalid", "operation": "unknown", "dry_run": "false"}),
]


@pytest.mark.parametrize("case, body, labels", CASES, ids=[c[0] for c in CASES])
def test_every_review_counts_once_under_its_decision_operation_and_dry_run(client, case, body, labels):
    before = scrape(client)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    client.post("/mutate", data=data, content_type="application/json")
    after = scrape(client)
    name = "netqos_admission_requests_total"
    assert metric_value(after, name, **labels) - metric_value(before, name, **labels) == 1, case
    assert metric_value(after, name) - metric_value(before, name) == 1, f"{case}: counted more than once"
    count = "netqos_admission_duration_seconds_count"
    assert metric_value(after, count) - metric_value(before, count) == 1


def test_injections_are_counted_per_rule(client):
    before = metric_value(scrape(client), "netqos_rule_injections_total", rule="netqos")
    for uid in ("a", "b", "c"):
        client.post("/mutate", json=pod_review(pod(LS), uid=uid))
    client.post("/mutate", json=pod_review(pod()))
    assert metric_value(scrape(client), "netqos_rule_injections_total", rule="netqos") - before == 3


@pytest.mark.parametrize(
    "request_",
    [
        ("GET", "/mutate", None, None),
        ("POST", "/mutate", b"{}", "text/plain"),
    ],
    ids=["wrong method", "wrong content type"],
)
def test_requests_that_are_not_reviews_count_as_invalid(client, request_):
    method, path, data, content_type = request_
    before = metric_value(scrape(client), "netqos_admission_requests_total", decision="invalid")
    status = client.open(path, method=method, data=data, content_type=content_type).status_code
    assert 400 <= status < 500
    assert metric_value(scrape(client), "netqos_admission_requests_total", decision="invalid") - before == 1


def test_metric_names_follow_prometheus_conventions(client):
    client.post("/mutate", json=pod_review(pod(LS)))
    families = {f.name: f for f in text_string_to_metric_families(scrape(client))}
    expected = {
        "netqos_admission_requests": "counter",
        "netqos_admission_duration_seconds": "histogram",
        "netqos_rule_injections": "counter",
        "netqos_certificate_expiry_timestamp_seconds": "gauge",
        "netqos_tls_certificate_reloads": "counter",
        "netqos_policy_info": "gauge",
        "netqos_policy_file_rejected": "gauge",
        "netqos_policy_reloads": "counter",
        "netqos_build_info": "gauge",
    }
    for name, kind in expected.items():
        if name == "netqos_certificate_expiry_timestamp_seconds":
            continue  # set by the TLS layer; checked against a real server below
        assert name in families, f"{name} missing from /metrics"
        assert families[name].type == kind, name
    for name in families:
        assert re.fullmatch(r"netqos_[a-z0-9_]+", name), name
    requests = [s for s in families["netqos_admission_requests"].samples if s.name.endswith("_total")]
    assert requests and all(s.name == "netqos_admission_requests_total" for s in requests)
    build = families["netqos_build_info"].samples[0]
    assert build.value == 1 and build.labels["version"]


def test_readyz_names_the_policy_version(client):
    body = client.get("/readyz").get_json()
    assert body["status"] == "ready"
    assert re.fullmatch(r"[0-9a-f]{64}", body["policy"]["sha256"])
    assert body["policy"]["version"] == body["policy"]["sha256"][:12]
    assert body["policy"]["rules"] == ["netqos"]


# --- the review log line --------------------------------------------------------------------------


@pytest.fixture
def log_stream():
    stream = io.StringIO()
    yield stream
    logging.getLogger().handlers.clear()


def review_lines(stream, fmt):
    lines = [line for line in stream.getvalue().splitlines() if line]
    if fmt == "json":
        return [json.loads(line) for line in lines]
    return lines


def test_one_json_line_per_review_with_the_fields_an_operator_needs(client, log_stream):
    logs.configure("json", "info", stream=log_stream)
    replica = pod(LS, meta={"generateName": "web-7d9f-"})
    del replica["metadata"]["name"]
    client.post("/mutate", json=pod_review(replica, uid="u-json", name="", namespace="shop", dryRun=True))
    records = [r for r in review_lines(log_stream, "json") if r.get("message") == "review"]
    assert len(records) == 1
    record = records[0]
    assert {k: record[k] for k in ("uid", "namespace", "name", "operation", "dry_run", "decision", "rules")} == {
        "uid": "u-json",
        "namespace": "shop",
        "name": "web-7d9f-",
        "operation": "CREATE",
        "dry_run": True,
        "decision": "mutated",
        "rules": ["netqos"],
    }
    assert record["level"] == "INFO" and record["logger"] == "webhook.review"
    assert isinstance(record["duration_ms"], float) and record["duration_ms"] >= 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+\+00:00", record["time"])


def test_text_format_carries_the_same_fields(client, log_stream):
    logs.configure("text", "info", stream=log_stream)
    client.post("/mutate", json=pod_review(pod(LS), uid="u-text"))
    (line,) = [line for line in review_lines(log_stream, "text") if "u-text" in line]
    assert re.search(
        r"INFO webhook\.review: review uid=u-text namespace=default name=p operation=CREATE "
        r"dry_run=false decision=mutated rules=netqos duration_ms=[\d.]+",
        line,
    ), line


@pytest.mark.parametrize("level, shows_patch", [("info", False), ("debug", True)])
def test_objects_are_logged_only_at_debug(client, log_stream, level, shows_patch):
    logs.configure("json", level, stream=log_stream)
    secret = "s3cr3t-env-value"
    body = pod(LS)
    body["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": secret}]
    client.post("/mutate", json=pod_review(body))
    client.post(
        "/mutate",
        data=json.dumps({"kind": "AdmissionReview", "apiVersion": "v1", "x": secret * 100}),
        content_type="application/json",
    )
    text = log_stream.getvalue()
    assert secret not in text, "a pod's contents reached the log"
    assert ('"patch"' in text) is shows_patch


def test_a_hostile_error_message_is_bounded_in_the_log_and_the_answer(client, log_stream):
    logs.configure("json", "info", stream=log_stream)
    response = client.post("/mutate", json={"kind": "x" * 100_000, "apiVersion": "v1"})
    assert response.status_code == 400
    assert len(response.get_data()) < 1000
    assert all(len(line) < 2000 for line in log_stream.getvalue().splitlines())


# --- across gunicorn workers ------------------------------------------------------------------------


def test_a_bug_escaping_the_review_is_a_500_counted_as_error(client, monkeypatch):
    from webhook import admission

    def broken(policy, body):
        raise RuntimeError("a bug")

    monkeypatch.setattr(admission, "handle", broken)
    before = metric_value(scrape(client), "netqos_admission_requests_total", decision="error")
    response = client.post("/mutate", json=pod_review(pod(LS)))
    assert response.status_code == 500 and response.get_json()["error"].startswith("internal error")
    assert metric_value(scrape(client), "netqos_admission_requests_total", decision="error") - before == 1
