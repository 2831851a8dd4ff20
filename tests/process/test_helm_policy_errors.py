"""Every bad policy of the webhook's own validation tests (tests/unit/test_policy_file.py's
POLICY_ERRORS and SCORE_TABLE_ERRORS), given to the Helm chart as `policy:` values the way an
operator pastes a policy file there: either the chart refuses it at template time (its
values.schema.json, or a check in its templates), naming the field the webhook names; or the chart
renders it, and the webhook refuses the rendered ConfigMap naming the same field (the schema cannot
express that check: it is listed in WEBHOOK_ONLY). A policy the chart gives another meaning is
listed in OTHER_MEANING with what the chart does instead. A new bad policy in the unit tables runs
here too, and fails until the chart refuses it or it is listed.

Runs the real helm 4 of scripts/helm, as tests/process/test_helm_chart.py does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures import REPO
from tests.process.test_deploy import one
from tests.process.test_helm_chart import CHART, NAMESPACE, RELEASE, run_helm
from tests.process.test_helm_chart import helm as helm  # the fixture, by name
from tests.unit.test_policy_file import POLICY_ERRORS, SCORE_TABLE_ERRORS
from webhook.policy_file import PolicyError, compile_policy, policy_from_bytes

CASES = [(f"policy: {c}", d, f) for c, d, f in POLICY_ERRORS] + [
    (f"score table: {c}", d, f) for c, d, f in SCORE_TABLE_ERRORS
]
# What no JSON schema can say: arithmetic between the score table and the scheduler weights.
WEBHOOK_ONLY = {"score table: an inexact score at the weights", "score table: weights NodeAffinity cannot carry"}
# Policies the chart's values read otherwise, and what the chart does instead.
OTHER_MEANING = {
    "policy: empty rules": "policy.rules: [] is the chart's default: it serves deploy/base/policy.yaml",
}
# The chart writes apiVersion and kind itself: a policy that gets them wrong is refused for having them.
CHART_OWN_FIELDS = {"policy: no rules": "kind", "policy: wrong apiVersion": "apiVersion"}
PREFIX = "policy file cm/policy.yaml: "


def webhook_field(message: str) -> str:
    """The field the webhook's message names, as a JSON pointer into the policy document:
    `rules[0] "fast": preferences[0].weight: ...` is /rules/0/preferences/0/weight."""
    assert message.startswith(PREFIX), message
    found = re.match(r'(?:rules\[(\d+)\](?: "(?:[^"\\]|\\.)*")?: )?(.*?): ', message[len(PREFIX) :])
    assert found is not None, message
    rule, field = found.groups()
    segments = [] if rule is None else ["rules", rule]
    if field != "(document)":
        for quoted, index, name in re.findall(r"\['([^']*)'\]|\[(\d+)\]|([^.\[\]]+)", field):
            segments.append(quoted or index or name)
    if segments[2:3] == ["schedulerWeights"]:  # a rule's table the weights cannot carry: the weights' field
        segments = segments[2:]
    return "".join(f"/{s}" for s in segments)


def helm_fields(stderr: str) -> list[tuple[str, str]]:
    """(JSON pointer into the values, the line) of each location helm's message names: the
    schema's `at '/policy/...'`, a template check's `policy.rules[1].name: ...`."""
    found = []
    for line in stderr.splitlines():
        for pointer in re.findall(r"at '([^']*)'", line):
            found.append((pointer, line))
        checked = re.search(r"\): (policy(?:\.\w+|\[\d+\])*): ", line)
        if checked:
            found.append(("/" + re.sub(r"\[(\d+)\]", r".\1", checked.group(1)).replace(".", "/"), line))
    return found


def names_field(stderr: str, field: str) -> bool:
    """Whether helm's message names the field at `field` (a pointer into the policy document):
    at the field itself, within it, or at its parent naming it ('name' in the line)."""
    wanted = f"/policy{field}"
    for pointer, line in helm_fields(stderr):
        if pointer == wanted or pointer.startswith(wanted + "/"):
            return True
        if wanted.startswith(pointer + "/"):
            child = wanted[len(pointer) + 1 :].split("/")[0]
            if f"'{child}'" in line:
                return True
    return False


def render(helm: str, tmp: Path, document: Any) -> Any:
    return run_helm(helm, "template", RELEASE, str(CHART), "-n", NAMESPACE, values={"policy": document}, tmp=tmp)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm-policies")


@pytest.mark.parametrize(("case", "document", "fragments"), CASES, ids=[c[0] for c in CASES])
def test_every_bad_policy_is_refused_by_the_chart_or_by_the_webhook_naming_the_same_field(
    helm: str, tmp: Path, case: str, document: Any, fragments: list[str]
) -> None:
    with pytest.raises(PolicyError) as refused:
        compile_policy(document, "cm/policy.yaml")
    field = webhook_field(str(refused.value))
    done = render(helm, tmp, document)
    if case in OTHER_MEANING:
        assert done.returncode == 0, done.stderr
        served = one([d for d in yaml.safe_load_all(done.stdout) if d], "ConfigMap")["data"]["policy.yaml"]
        assert served == (REPO / "deploy/base/policy.yaml").read_text(), OTHER_MEANING[case]
        return
    if case not in WEBHOOK_ONLY:
        assert done.returncode != 0, f"{case}: the chart renders it; its schema could refuse it ({field})"
        named = CHART_OWN_FIELDS.get(case)
        assert names_field(done.stderr, f"/{named}" if named else field), f"{case}: {field} not named in {done.stderr}"
        assert "MutatingWebhookConfiguration" not in done.stdout
        return
    assert done.returncode == 0, f"{case}: refused by the chart now; take it off WEBHOOK_ONLY\n{done.stderr}"
    served = one([d for d in yaml.safe_load_all(done.stdout) if d], "ConfigMap")["data"]["policy.yaml"]
    with pytest.raises(PolicyError) as again:
        policy_from_bytes(served.encode(), "cm/policy.yaml")  # the server's own reader, as on start or reload
    message = str(again.value)
    assert webhook_field(message) == field
    for fragment in fragments:
        assert fragment in message, f"{case}: {fragment!r} not in {message!r}"


FIELD_NAMING = [
    # (helm's message, the webhook's field, named): the check that the chart names the field can fail
    ("- at '/policy/rules/0/preferences/0/weight': maximum: got 150, want 100", "/rules/0/preferences/0/weight", True),
    ("- at '/policy/rules/0': additional properties 'podselector' not allowed", "/rules/0/podselector", True),
    ("- at '/policy/rules/0/nodeScore': false schema", "/rules/0/nodeScore", True),
    (
        "Error: execution error at (templates/mutatingwebhookconfiguration.yaml:14:4): policy.rules[1].name: the rule "
        'name "fast" is used twice',
        "/rules/1/name",
        True,
    ),
    # the schema's propertyNames names no location (helm 4): what matchLabels said before it was patternProperties
    ("- at '': invalid propertyName 'qos\\n'", "/rules/0/podSelector/matchLabels", False),
    # oneOf's 'not' names neither field
    ("- at '/policy/rules/0': 'not' failed", "/rules/0/nodeScore", False),
    # another field of the same rule
    ("- at '/policy/rules/0/name': 'Fast_Net' does not match", "/rules/0/preferences/0/weight", False),
]


@pytest.mark.parametrize(("stderr", "field", "named"), FIELD_NAMING)
def test_a_refusal_names_the_field_only_when_it_points_at_it(stderr: str, field: str, named: bool) -> None:
    assert names_field(stderr, field) is named


def test_every_case_of_the_webhooks_tables_runs_here_and_the_lists_name_only_cases() -> None:
    names = {c[0] for c in CASES}
    assert len(names) == len(CASES)
    assert set(WEBHOOK_ONLY) | set(OTHER_MEANING) | set(CHART_OWN_FIELDS) <= names
