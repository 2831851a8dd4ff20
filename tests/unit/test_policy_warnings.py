"""A policy whose rule selects every pod (`podSelector: {}`) is valid, and said so wherever the
policy is used: at load (serve), in review, in manifests and in status."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from tests.fixtures import cluster_view
from webhook import status
from webhook.policy import policy_warnings
from webhook.policy_file import compile_policy, default_policy

EVERY_POD = {
    "rules": [
        {
            "name": "everyone",
            "podSelector": {},
            "preferences": [{"weight": 5, "matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]}],
        }
    ]
}
WARNING = 'rule "everyone": podSelector {} selects every pod'


@pytest.mark.parametrize("selector", [{}, {"matchLabels": {}}, {"matchLabels": None, "matchExpressions": []}])
def test_an_empty_pod_selector_is_warned_about(selector):
    document = {"rules": [{**EVERY_POD["rules"][0], "podSelector": selector}]}
    (warning,) = policy_warnings(compile_policy(document, "p.yaml"))
    assert warning.startswith(WARNING)


def test_the_default_policy_has_no_warning():
    assert policy_warnings(default_policy()) == ()


@pytest.fixture
def every_pod_file(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(EVERY_POD))
    return path


def test_status_lists_it_among_the_problems(every_pod_file):
    view = cluster_view(policy=compile_policy(EVERY_POD, str(every_pod_file)), policy_source=str(every_pod_file))
    report = status.analyse(view)
    assert any(p.startswith(f"policy {every_pod_file}: {WARNING}") for p in report.problems)
    assert not any(WARNING in p for p in status.analyse(dataclasses.replace(view, policy=default_policy())).problems)
