"""The policy ConfigMap reviewed when it is written (`POST /validate-policy`), and the policy a
worker serves (`GET /policy`), through the WSGI app."""

from __future__ import annotations

import base64
import copy
import hashlib
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import REPO, fixture
from webhook.policy_file import PolicyError, policy_from_bytes
from webhook.serving.app import AppConfig, create_app
from webhook.serving.reload import PolicyWatcher, load_snapshot

GOOD = (REPO / "deploy/base/policy.yaml").read_text()
# A typo: `podSelectr`, the kind of mistake the values schema of a Helm chart cannot see.
TYPO = GOOD.replace("podSelector:", "podSelectr:", 1)
NO_RULES = "apiVersion: netqos.io/v1alpha1\nkind: NetQoSPolicy\nrules: []\n"
EVERY_POD = GOOD.replace("matchLabels:\n      qos: latency-sensitive", "{}", 1)


@pytest.fixture
def mounted(tmp_path: Path) -> Path:
    """The policy file as the Deployment mounts it (--config=/config/policy.yaml)."""
    path = tmp_path / "config" / "policy.yaml"
    path.parent.mkdir()
    path.write_text(GOOD)
    return path


def _app(path: Path) -> Any:
    watcher = PolicyWatcher(load_snapshot(path), path)
    return create_app(AppConfig(policy=watcher.current().policy, watcher=watcher)).test_client()


def _review(data: dict[str, str] | None = None, operation: str = "CREATE", **extra: Any) -> dict[str, Any]:
    document = copy.deepcopy(fixture("review-create-configmap.json"))
    request = document["request"]
    request.update(operation=operation, name="netqos-webhook-policy-7bk2", namespace="netqos-system")
    obj = request["object"]
    obj["metadata"].update(name="netqos-webhook-policy-7bk2", namespace="netqos-system")
    obj["data"] = data if data is not None else {}
    obj.update(extra)
    return document


def _refusal(text: str, source: Path) -> str:
    with pytest.raises(PolicyError) as refused:
        policy_from_bytes(text.encode(), str(source))
    return str(refused.value)


@pytest.mark.parametrize(
    ("case", "data", "extra", "operation", "allowed"),
    [
        ("the shipped policy", {"policy.yaml": GOOD}, {}, "CREATE", True),
        ("a valid update", {"policy.yaml": GOOD}, {}, "UPDATE", True),
        (
            "as binaryData",
            None,
            {"binaryData": {"policy.yaml": base64.b64encode(GOOD.encode()).decode()}},
            "CREATE",
            True,
        ),
        ("a typo in a field name", {"policy.yaml": TYPO}, {}, "CREATE", False),
        ("no rules", {"policy.yaml": NO_RULES}, {}, "UPDATE", False),
        ("not YAML", {"policy.yaml": "rules: [\n"}, {}, "CREATE", False),
        ("the key missing", {"other.yaml": GOOD}, {}, "CREATE", False),
        ("a delete (never sent)", {"policy.yaml": NO_RULES}, {}, "DELETE", True),
    ],
)
def test_the_policy_configmap_is_allowed_only_when_its_policy_compiles(
    mounted: Path, case: str, data: Any, extra: dict[str, Any], operation: str, allowed: bool
) -> None:
    document = _review(data, operation, **extra)
    resp = _app(mounted).post("/validate-policy", json=document)
    assert resp.status_code == 200, case
    answer = resp.get_json()["response"]
    assert answer["uid"] == document["request"]["uid"]
    assert answer["allowed"] is bool(allowed), case
    if not allowed:
        message = answer["status"]["message"]
        if "policy.yaml" in (data or {}):
            assert message == _refusal(data["policy.yaml"], mounted), case
        else:
            assert message == (
                "ConfigMap netqos-system/netqos-webhook-policy-7bk2 has no key policy.yaml: the webhook reads its "
                f"policy from that key (mounted at {mounted})"
            )
        assert answer["status"]["code"] == 422


def test_a_denial_says_what_the_running_webhook_logs_when_it_refuses_the_file(
    mounted: Path, caplog: pytest.LogCaptureFixture
) -> None:
    watcher = PolicyWatcher(load_snapshot(mounted), mounted, interval=0)
    denied = _app(mounted).post("/validate-policy", json=_review({"policy.yaml": TYPO})).get_json()
    mounted.write_text(TYPO)
    with caplog.at_level(logging.ERROR):
        assert watcher.check() is False
    refused = [r.getMessage() for r in caplog.records if "refused the changed policy file" in r.getMessage()]
    message = denied["response"]["status"]["message"]
    assert refused and message in refused[0]


def test_a_valid_policy_with_warnings_is_allowed_and_warned_about(mounted: Path) -> None:
    answer = _app(mounted).post("/validate-policy", json=_review({"policy.yaml": EVERY_POD})).get_json()["response"]
    assert answer["allowed"] is True
    assert len(answer["warnings"]) == 1 and "selects every pod" in answer["warnings"][0]


def test_a_body_that_is_no_admission_review_is_400(mounted: Path) -> None:
    resp = _app(mounted).post("/validate-policy", json={"kind": "Pod"})
    assert resp.status_code == 400 and resp.get_json()["error"]


def test_the_served_policy_is_its_hash_rules_and_document_and_whether_the_file_was_refused(mounted: Path) -> None:
    watcher = PolicyWatcher(load_snapshot(mounted), mounted, interval=0)
    client = create_app(AppConfig(policy=watcher.current().policy, watcher=watcher)).test_client()
    served = client.get("/policy").get_json()
    assert served["sha256"] == hashlib.sha256(GOOD.encode()).hexdigest()
    assert served["rules"] == ["netqos"] and served["source"] == str(mounted)
    assert served["document"] == GOOD and served["file_refused"] is False
    mounted.write_text(TYPO)
    watcher.check()
    after = client.get("/policy").get_json()
    assert after["sha256"] == served["sha256"] and after["document"] == GOOD  # the last good one
    assert after["file_refused"] is True
