"""`manifests --as admission-policy`: the objects, their scope, and the shape of every patch value.

The CEL's behaviour is tested against the webhook elsewhere (test_admission_policy_cel.py with
cel-expr-python, tests/process/test_admission_policy_apiserver.py with the API server's code);
this file pins what the objects promise by construction.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence

import kubernetes_validate
import pytest
import yaml

from tests.policies import policies
from webhook.admission_policy import (
    MAX_SCALED_SLOTS,
    InexpressibleRule,
    admission_policies,
    cel_scale,
    kubernetes_initialiser,
    left_to_webhook,
    rule_cel,
    scaled_in_cel,
    scaled_slots,
)
from webhook.affinity import NodeSelectorTerm, PreferredTerm, Requirement
from webhook.cli import main
from webhook.manifests import webhook_configuration
from webhook.policy import Policy, Rule
from webhook.policy_file import DEFAULT_DOCUMENT, compile_policy, default_policy

POLICIES = policies()


def by_kind(objects: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for o in objects:
        out.setdefault(o["kind"], []).append(o)
    return out


@pytest.mark.parametrize("policy_name", POLICIES)
def test_each_rule_gets_a_policy_and_a_binding_with_its_webhook_entrys_scope(policy_name: str) -> None:
    policy = POLICIES[policy_name]
    kinds = by_kind(admission_policies(policy))
    entries = {w["name"]: w for w in webhook_configuration(policy)["webhooks"]}
    assert [m["metadata"]["name"] for m in kinds["MutatingAdmissionPolicy"]] == list(entries)
    assert [b["spec"]["policyName"] for b in kinds["MutatingAdmissionPolicyBinding"]] == list(entries)
    assert set(kinds) == {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}
    for m in kinds["MutatingAdmissionPolicy"]:
        entry, spec = entries[m["metadata"]["name"]], m["spec"]
        scope = spec["matchConstraints"]
        assert scope["resourceRules"] == entry["rules"]
        assert scope["objectSelector"] == entry["objectSelector"]
        assert scope["namespaceSelector"] == entry["namespaceSelector"]
        assert scope["matchPolicy"] == entry["matchPolicy"] == "Equivalent"
        assert spec["failurePolicy"] == "Ignore"
        assert spec["reinvocationPolicy"] == "IfNeeded"
        assert [c["name"] for c in spec["matchConditions"]] == ["not-opted-out"]
        assert [mu["patchType"] for mu in spec["mutations"]] == ["JSONPatch"]


def test_warnings_add_a_warn_only_validating_policy_per_rule() -> None:
    policy = POLICIES["three rules"]
    kinds = by_kind(admission_policies(policy, warnings=True))
    names = [f"{r.name}-warnings.netqos.io" for r in policy.rules]
    assert [v["metadata"]["name"] for v in kinds["ValidatingAdmissionPolicy"]] == names
    bindings = kinds["ValidatingAdmissionPolicyBinding"]
    assert [b["spec"] for b in bindings] == [{"policyName": n, "validationActions": ["Warn"]} for n in names]
    assert all(v["spec"]["failurePolicy"] == "Ignore" for v in kinds["ValidatingAdmissionPolicy"])


@pytest.mark.parametrize("warnings", [False, True])
def test_every_object_validates_strictly_against_the_1_36_schemas(warnings: bool) -> None:
    for obj in admission_policies(POLICIES["three rules"], warnings=warnings):
        kubernetes_validate.validate(obj, "1.36.0", strict=True)


class RecordingInitialiser:
    def __init__(self) -> None:
        self.values: list[str] = []

    def __call__(self, type_name: str, fields: Sequence[tuple[str, str]]) -> str:
        if type_name == "JSONPatch":
            self.values.append(dict(fields)["value"])
        return kubernetes_initialiser(type_name, fields)


STRING_MAP = re.compile(r'^\{"[^"]+": "[^"]+"\}$')


@pytest.mark.parametrize("policy_name", POLICIES)
def test_every_patch_value_is_a_form_the_1_36_0_to_1_36_3_api_servers_can_convert(policy_name: str) -> None:
    """A scalar expression, {}, [], a map of strings, or ONE top-level Object initialiser: never a
    list or map holding an Object initialiser (kubernetes/kubernetes#139032)."""
    policy = POLICIES[policy_name]
    for rule in policy.rules:
        recorder = RecordingInitialiser()
        rule_cel(policy, rule, init=recorder)
        assert recorder.values
        for value in recorder.values:
            if value in ("{}", "[]") or STRING_MAP.match(value):
                continue
            if value.startswith("Object."):
                assert value.startswith(
                    "Object.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution{"
                )
                continue
            # the merged annotation: a string expression, no initialiser anywhere in it
            assert "Object." not in value and value.endswith('.join(",")'), value


def test_a_rule_with_match_fields_is_refused_naming_it() -> None:
    odd = PreferredTerm(
        5, NodeSelectorTerm((Requirement("net", "In", ("high",)),), (Requirement("metadata.name", "In", ("n1",)),))
    )
    rules = (*default_policy().rules, Rule("by-name", default_policy().rules[0].pod_selector, (odd,)))
    with pytest.raises(InexpressibleRule, match=r'rule "by-name": preferences\[0\] has matchFields'):
        admission_policies(Policy(rules))


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["manifests", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_prints_the_objects_as_yaml_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--as", "admission-policy", "--warnings")
    assert code == 0
    assert out.startswith("# Generated by: netqos-webhook manifests --as admission-policy --warnings\n")
    assert list(yaml.safe_load_all(out)) == admission_policies(default_policy(), warnings=True)
    code, out, _ = run_cli(capsys, "--as", "admission-policy", "-o", "json")
    assert json.loads(out) == {"apiVersion": "v1", "kind": "List", "items": admission_policies(default_policy())}


def test_the_command_says_on_stderr_what_it_leaves_to_the_webhook(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "--as", "admission-policy")
    assert code == 0 and out.startswith("# Generated by")
    assert err.splitlines() == [
        'Note: rule "netqos": beside preferred node affinity of the pod\'s own, the admission policy scales the '
        "table to the sum of the pod's positive weights; the webhook scales it to the most they give one node, "
        "which differs only where the pod's terms exclude each other (docs/scheduling.md, \"The pod's own node "
        'affinity")'
    ]
    code, _, err = run_cli(capsys, "--config", "deploy/examples/policies/classic.yaml", "--as", "admission-policy")
    assert code == 0 and err == "", "a policy of written terms injects the same terms either way"


# A table of ten levels: its per-pod scale needs ten steps of up to ten terms each.
FINE_TABLE = {
    "name": "fine",
    "podSelector": {"matchLabels": {"qos": "latency-sensitive"}},
    "nodeScore": {
        "key": "net",
        "scores": [{"value": f"v{i}", "score": 10 * i} for i in range(1, 11)],
        "unlistedScore": 0,
    },
}


@pytest.mark.parametrize(
    ("rules", "scaled"),
    [
        ([], True),  # the default table: two steps, twelve terms at most
        ([FINE_TABLE], False),
    ],
)
def test_a_table_is_scaled_per_pod_in_cel_unless_its_terms_exceed_the_cost_budget(rules, scaled) -> None:
    document = copy.deepcopy(DEFAULT_DOCUMENT)
    document["rules"] = document["rules"] if not rules else rules
    policy = compile_policy(document, "<table>")
    (rule,) = policy.rules
    assert scaled_in_cel(rule) is scaled
    assert (len(scaled_slots(rule)) <= MAX_SCALED_SLOTS) is scaled
    (note,) = left_to_webhook(policy)
    assert ("injects the table at its fixed scale" in note) is not scaled, note
    assert ("sum of the pod's positive weights" in note) is scaled, note
    mutation = rule_cel(policy, rule).mutation
    assert ("variables.parts[" in mutation) is scaled
    assert cel_scale(policy).fixed_scale_rules == (frozenset() if scaled else frozenset({rule.name}))


def test_the_default_form_is_still_the_webhook_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "-o", "json")
    assert code == 0 and json.loads(out) == webhook_configuration(default_policy())


def test_an_unknown_form_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["manifests", "--as", "policy"])
    err = capsys.readouterr().err
    assert raised.value.code == 2
    assert "invalid choice: 'policy'" in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--warnings"], "--warnings adds the warn-only ValidatingAdmissionPolicy, which only --as admission-policy"),
        (["--as", "admission-policy", "--url", "https://h/mutate"], "--url configures how the API server calls"),
        (["--as", "admission-policy", "--ca-bundle", "x.crt"], "--ca-bundle configures how the API server calls"),
    ],
)
def test_flags_that_do_not_go_together_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    assert message in err and err.count("\n") == 1, err


def test_an_inexpressible_policy_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A policy file cannot write matchFields: the policy is built in code and handed to the command.
    odd = PreferredTerm(1, NodeSelectorTerm((), (Requirement("metadata.name", "In", ("n1",)),)))
    policy = Policy((Rule("by-name", default_policy().rules[0].pod_selector, (odd,)),))
    monkeypatch.setattr("webhook.policy_file.load_policy", lambda path: policy)
    code, out, err = run_cli(capsys, "--as", "admission-policy")
    assert (code, out) == (2, "")
    assert err.startswith('netqos-webhook manifests: cannot compile the policy into admission policies: rule "by-name"')
    assert err.count("\n") == 1
