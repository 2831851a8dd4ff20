"""The policy compiled into MutatingAdmissionPolicies: the webhook's mutation, run by the API server.

Pure: a `Policy` in, API objects (dicts) out. `netqos-webhook manifests --as admission-policy`
prints them. For each rule, a `MutatingAdmissionPolicy` (admissionregistration.k8s.io/v1, GA in
Kubernetes 1.36) and its binding, with the webhook registration's scope (`scope.pod_scope`:
CREATE of pods, the rule's podSelector as objectSelector, the same namespace exclusions),
`failurePolicy: Ignore` and `reinvocationPolicy: IfNeeded`. The CEL repeats `policy.evaluate`
for one rule, decision for decision:

- opted out (`netqos.io/inject: "false"`, exactly): the matchCondition is false, nothing runs;
- every term of the rule already there (same weight, same requirements as sets, no matchFields,
  as `PreferredTerm.identity` compares), or every term of one of its earlier forms
  (`Rule.equivalents`): no patch (idempotent, so a reinvocation changes nothing);
- the pod's own node affinity uses a key of the rule (a required term, or a preferred term that is
  no rule's term nor an earlier form of one): no patch (explicit wins);
- otherwise the missing terms are appended after the pod's own (`Rule.terms_beside`: the rule's
  `beside_own` form when the pod has preferred terms of its own that the scheduler scores, else
  its preferences), and `netqos.io/injected` gets the rule's name merged in as
  `policy._merge_names` merges it.

What it leaves to the webhook: beside a pod's own preferred terms the webhook scales a table's
terms to them, pod by pod (`scoretable.scaled_terms`: the most weight the pod's terms can give
one node, searched over which of them can match together, and terms split past weight 100).
The CEL injects the table at its fixed scale there (`beside_own`: the classic terms for the
default policy), which is what the webhook does for the policy `fixed_scale(policy)`; every other
pod gets exactly the webhook's terms. docs/scheduling.md, "The pod's own node affinity", measures
the difference.

Several rules selecting one pod give the webhook's result for the order the API server runs the
policies in (it keeps none): each policy sees the terms earlier ones added as policy terms, never
as explicit ones, exactly as the webhook's single pass does.

The JSON patch is built so that the API server can apply it, including Kubernetes 1.36.0 to
1.36.3, which panic on a patch value that is a CEL list or map *containing* an `Object`
initialiser (kubernetes/kubernetes#139032; the panic is not covered by failurePolicy Ignore).
Every value here is a scalar, `{}`, `[]`, a map of strings, or ONE top-level `Object` initialiser
(whose nested lists and objects the API server converts with `Value()`, not the path that
panics): missing parents are created one operation at a time (`/spec/affinity` as `{}`, then
`nodeAffinity` as `{}`, then the list as `[]`), and each term is appended on its own with `/-`.
The list is atomic (`+listType=atomic`), so an ApplyConfiguration patch could not append to it.

The warn-only `ValidatingAdmissionPolicy` (`--warnings`) carries the webhook's two warnings:
a rule skipped because the pod's own affinity uses its keys, and an opt-out annotation whose
value is neither "true" nor "false". It sees the pod after every mutation, which is when the
webhook's conditions can be read back: a rule whose terms are still missing and whose keys the
pod's own affinity uses is exactly a rule the mutation skipped.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.affinity import PREFERRED, REQUIRED, Canonical, PreferredTerm
from webhook.errors import UsageError
from webhook.manifests import check_namespace
from webhook.names import ADMISSION_API_VERSION, DEFAULT_NAMESPACE, INJECTED_ANNOTATION, LABELS, OPT_OUT_ANNOTATION
from webhook.patch import escape
from webhook.policy import Policy, Rule
from webhook.scope import OPT_OUT_CONDITION, pod_scope, webhook_name

MUTATING_KIND = "MutatingAdmissionPolicy"
MUTATING_BINDING_KIND = "MutatingAdmissionPolicyBinding"
VALIDATING_KIND = "ValidatingAdmissionPolicy"
VALIDATING_BINDING_KIND = "ValidatingAdmissionPolicyBinding"
WARNINGS_SUFFIX = "-warnings"

# JSON pointers of the fields the patch creates or appends to.
AFFINITY_PATH = "/spec/affinity"
NODE_AFFINITY_PATH = f"{AFFINITY_PATH}/nodeAffinity"
PREFERRED_PATH = f"{NODE_AFFINITY_PATH}/{PREFERRED}"
ANNOTATIONS_PATH = "/metadata/annotations"
INJECTED_PATH = f"{ANNOTATIONS_PATH}/{escape(INJECTED_ANNOTATION)}"
# The type names of Object initialisers must spell the field path from the root (the API server
# checks it: dynamic.ObjectVal.CheckTypeNamesMatchFieldPathNames).
TERM_TYPE = f"Object.spec.affinity.nodeAffinity.{PREFERRED}"
PREFERENCE_TYPE = f"{TERM_TYPE}.preference"
REQUIREMENT_TYPE = f"{PREFERENCE_TYPE}.matchExpressions"


class InexpressibleRule(UsageError, ValueError):
    """A rule the generator cannot compile into CEL; the message names it and says why."""


# How an initialiser (`JSONPatch{...}`, `Object.x.y{...}`) is written: the API server's syntax by
# default. A CEL engine without Kubernetes' type provider checks the same expressions with the
# initialisers written as calls (tests/celengine.py).
Initialiser = Callable[[str, Sequence[tuple[str, str]]], str]


def kubernetes_initialiser(type_name: str, fields: Sequence[tuple[str, str]]) -> str:
    return type_name + "{" + ", ".join(f"{name}: {value}" for name, value in fields) + "}"


def cel_string(text: str) -> str:
    """A CEL string literal: JSON's escapes (\\", \\\\, \\n, \\uXXXX) are CEL's too."""
    return json.dumps(text)


def cel_strings(texts: Sequence[str]) -> str:
    return "[" + ", ".join(cel_string(t) for t in texts) + "]"


@dataclass(frozen=True)
class RuleCel:
    """The CEL of one rule's MutatingAdmissionPolicy: variables (in order), the opt-out
    matchCondition, and the JSONPatch mutation expression."""

    variables: tuple[tuple[str, str], ...]
    match_condition: str
    mutation: str


@dataclass(frozen=True)
class WarningCel:
    """The CEL of one rule's warn-only ValidatingAdmissionPolicy: (expression, messageExpression)."""

    variables: tuple[tuple[str, str], ...]
    validations: tuple[tuple[str, str], ...]


def admission_policies(
    policy: Policy, namespace: str = DEFAULT_NAMESPACE, warnings: bool = False
) -> list[dict[str, Any]]:
    """Per rule: the MutatingAdmissionPolicy, its binding, and with `warnings` the warn-only
    ValidatingAdmissionPolicy and its binding. Raises `InexpressibleRule` naming every rule the
    generator cannot express."""
    check_namespace(namespace)
    problems = [f'rule "{r.name}": {p}' for r in policy.rules for p in inexpressible(r)]
    if problems:
        raise InexpressibleRule(
            "cannot compile the policy into admission policies: " + "; ".join(problems) + " (serve it with the webhook)"
        )
    objects: list[dict[str, Any]] = []
    for rule in policy.rules:
        objects += [mutating_policy(policy, rule, namespace), _binding(MUTATING_BINDING_KIND, webhook_name(rule.name))]
    if warnings:
        for rule in policy.rules:
            name = warnings_name(rule.name)
            objects += [validating_policy(policy, rule, namespace), _binding(VALIDATING_BINDING_KIND, name, warn=True)]
    return objects


def fixed_scale(policy: Policy) -> Policy:
    """The policy as the admission policies carry it out: a table beside a pod's own preferred
    terms at its fixed scale, not scaled per pod (the webhook's `evaluate` of this policy is what
    the generated CEL does, pod for pod)."""
    return dataclasses.replace(policy, per_pod=False)


def left_to_webhook(policy: Policy) -> tuple[str, ...]:
    """What the admission policies do otherwise than the webhook, per rule: a table rule beside a
    pod's own preferred terms goes in at its fixed scale, not scaled to them."""
    return tuple(
        f'rule "{rule.name}": beside preferred node affinity of the pod\'s own, the admission policy injects the '
        "table at its fixed scale; the webhook scales it to the pod's terms, which puts such pods on the NetQoS "
        "scheduler's node more often (docs/scheduling.md, \"The pod's own node affinity\")"
        for rule in policy.rules
        if rule.table is not None
    )


def warnings_name(rule_name: str) -> str:
    return webhook_name(rule_name + WARNINGS_SUFFIX)


def inexpressible(rule: Rule) -> list[str]:
    """Why `rule`'s preferences cannot be compiled (empty when they can): the CEL compares a pod's
    terms with the rule's by node-label requirements; a term selecting nodes by field is not one
    a policy file can write, and the comparison does not model it."""
    forms = [("preferences", rule.preferences)]
    forms += [(f"equivalents[{i}]", terms) for i, terms in enumerate(rule.equivalents)]
    return [
        f"{where}[{i}] has matchFields, which the admission policy does not compare"
        for where, terms in forms
        for i, term in enumerate(terms)
        if term.term.fields
    ]


def mutating_policy(policy: Policy, rule: Rule, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
    check_namespace(namespace)
    cel = rule_cel(policy, rule)
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": MUTATING_KIND,
        "metadata": {"name": webhook_name(rule.name), "labels": dict(LABELS)},
        "spec": {
            "matchConstraints": pod_scope(rule, namespace),
            "failurePolicy": "Ignore",
            "reinvocationPolicy": "IfNeeded",
            "matchConditions": [{"name": OPT_OUT_CONDITION, "expression": cel.match_condition}],
            "variables": [{"name": n, "expression": e} for n, e in cel.variables],
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": cel.mutation}}],
        },
    }


def validating_policy(policy: Policy, rule: Rule, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
    check_namespace(namespace)
    cel = warning_cel(policy, rule)
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": VALIDATING_KIND,
        "metadata": {"name": warnings_name(rule.name), "labels": dict(LABELS)},
        "spec": {
            "matchConstraints": pod_scope(rule, namespace),
            "failurePolicy": "Ignore",
            "variables": [{"name": n, "expression": e} for n, e in cel.variables],
            "validations": [{"expression": e, "messageExpression": m} for e, m in cel.validations],
        },
    }


def _binding(kind: str, policy_name: str, warn: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"policyName": policy_name}
    if warn:
        spec["validationActions"] = ["Warn"]
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": kind,
        "metadata": {"name": policy_name, "labels": dict(LABELS)},
        "spec": spec,
    }


# --- the CEL -------------------------------------------------------------------------------------
# `object` is the pod as the API server encodes it (dyn: a JSON map). Fields with omitempty are
# absent when empty, so every optional field is read behind has(); `nodeSelectorTerms` has no
# omitempty and can be null, hence the type() test. Variables are evaluated once per call.


def _pod_variables(policy: Policy, rule: Rule) -> list[tuple[str, str]]:
    na = "variables.nodeAffinity"
    terms = f"{na}.{REQUIRED}.nodeSelectorTerms"
    uses_key = "has({t}.matchExpressions) && {t}.matchExpressions.exists(e, e.key == k)"
    return [
        ("annotations", "has(object.metadata.annotations) ? object.metadata.annotations : {}"),
        (
            "nodeAffinity",
            "has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) ?\n"
            "  object.spec.affinity.nodeAffinity : {}",
        ),
        ("preferred", f"has({na}.{PREFERRED}) ?\n  {na}.{PREFERRED} : []"),
        ("required", f"has({na}.{REQUIRED}) && has({terms}) &&\n  type({terms}) == list ?\n  {terms} : []"),
        # The pod's preferred terms that are no rule's terms: the author's own choices.
        ("ownPreferred", "variables.preferred.filter(t, !(\n  " + _any_policy_term("t", policy) + "))"),
        # One flag per term of this rule: does the pod already carry it?
        ("present", _present(rule.preferences)),
        # The same for the terms that go in beside preferred terms of the pod's own (Rule.beside_own).
        ("presentBesideOwn", _present(rule.beside_own or ())),
        # Terms of the pod's own that the scheduler scores: it skips weight 0 and empty terms
        # (`preference: {}`), and beside those alone the rule's exact form goes in.
        (
            "hasOwn",
            "variables.ownPreferred.exists(t, has(t.weight) && t.weight != 0 && has(t.preference) && (\n"
            "  (has(t.preference.matchExpressions) && size(t.preference.matchExpressions) > 0) ||\n"
            "  (has(t.preference.matchFields) && size(t.preference.matchFields) > 0)))",
        ),
        # The rule counts as applied: all its terms are there, or all of an earlier form of them
        # (Rule.equivalents: what earlier versions of the webhook injected for the same table).
        ("carried", _carried(rule)),
        # This rule's keys that the pod's own node affinity uses (explicit wins).
        (
            "explicitKeys",
            f"{cel_strings(sorted(rule.keys))}.filter(k,\n"
            f"  variables.required.exists(t, {uses_key.format(t='t')}) ||\n"
            f"  variables.ownPreferred.exists(t, {uses_key.format(t='t.preference')}))",
        ),
    ]


def rule_cel(policy: Policy, rule: Rule, init: Initialiser = kubernetes_initialiser) -> RuleCel:
    variables = _pod_variables(policy, rule)
    variables.append(
        (
            "injectedNames",
            f"{cel_string(INJECTED_ANNOTATION)} in variables.annotations ? "
            f'variables.annotations[{cel_string(INJECTED_ANNOTATION)}].split(",").filter(n, n != "") : []',
        )
    )
    name = cel_string(rule.name)
    merged = (
        f'({name} in variables.injectedNames ? variables.injectedNames : variables.injectedNames + [{name}]).join(",")'
    )
    ops = [
        _unless("has(object.spec.affinity)", _add(init, AFFINITY_PATH, "{}")),
        _unless(
            "has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity)",
            _add(init, NODE_AFFINITY_PATH, "{}"),
        ),
        _unless(f"has(variables.nodeAffinity.{PREFERRED})", _add(init, PREFERRED_PATH, "[]")),
        *(
            _unless(
                f"variables.present[{i}]" if rule.beside_own is None else f"variables.hasOwn || variables.present[{i}]",
                _add(init, PREFERRED_PATH + "/-", _term_initialiser(init, term)),
            )
            for i, term in enumerate(rule.preferences)
        ),
        *(
            _unless(
                f"!variables.hasOwn || variables.presentBesideOwn[{i}]",
                _add(init, PREFERRED_PATH + "/-", _term_initialiser(init, term)),
            )
            for i, term in enumerate(rule.beside_own or ())
        ),
        # A map of strings when the pod has no annotations, else the one key (`add` replaces).
        "(has(object.metadata.annotations) ? ["
        + _add(init, INJECTED_PATH, merged)
        + "] : ["
        + _add(init, ANNOTATIONS_PATH, "{" + f"{cel_string(INJECTED_ANNOTATION)}: {name}" + "}")
        + "])",
    ]
    applies = "!variables.carried && size(variables.explicitKeys) == 0"
    mutation = f"!({applies}) ? [] :\n  " + " +\n  ".join(ops)
    opt_out = cel_string(OPT_OUT_ANNOTATION)
    condition = (
        f"!has(object.metadata.annotations) || !({opt_out} in object.metadata.annotations) || "
        f'object.metadata.annotations[{opt_out}] != "false"'
    )
    return RuleCel(tuple(variables), condition, mutation)


def warning_cel(policy: Policy, rule: Rule) -> WarningCel:
    """The webhook's warnings (policy.evaluate) as validations that fail only to warn."""
    variables = _pod_variables(policy, rule)
    opt_out = cel_string(OPT_OUT_ANNOTATION)
    value = f"variables.annotations[{opt_out}]"
    not_opted_out = f'!({opt_out} in variables.annotations) || {value} != "false"'
    clash = f"({not_opted_out}) && !variables.carried && size(variables.explicitKeys) > 0"
    clash_message = (
        f'"netqos-webhook: rule \\"{rule.name}\\" not applied: the pod\'s own node affinity already uses node '
        'label " + variables.explicitKeys.map(k, "\'" + k + "\'").join(", ")'
    )
    opt_out_message = (
        f'"netqos-webhook: annotation {OPT_OUT_ANNOTATION}=\\"" + {value} + "\\" does not opt out: only '
        '\\"false\\" does (values are exact strings: \\"true\\" or \\"false\\")"'
    )
    return WarningCel(
        tuple(variables),
        (
            (f"!({clash})", clash_message),
            (f'!({opt_out} in variables.annotations) || {value} in ["true", "false"]', opt_out_message),
        ),
    )


def _add(init: Initialiser, path: str, value: str) -> str:
    return init("JSONPatch", (("op", '"add"'), ("path", cel_string(path)), ("value", value)))


def _unless(condition: str, op: str) -> str:
    return f"({condition} ? [] : [{op}])"


def _term_initialiser(init: Initialiser, term: PreferredTerm) -> str:
    """One top-level Object initialiser for the whole term (its nested list of requirement
    initialisers is converted field by field, not as a list value: safe on 1.36.0-1.36.3)."""
    requirements = []
    for req in term.term.expressions:
        fields = [("key", cel_string(req.key)), ("operator", cel_string(req.operator))]
        if req.values:
            fields.append(("values", cel_strings(req.values)))
        requirements.append(init(REQUIREMENT_TYPE, fields))
    preference = init(PREFERENCE_TYPE, (("matchExpressions", "[" + ", ".join(requirements) + "]"),))
    return init(TERM_TYPE, (("weight", str(term.weight)), ("preference", preference)))


def _is_term(var: str, term: PreferredTerm) -> str:
    """CEL: the pod's preferred term `var` has `term`'s identity (PreferredTerm.identity: the
    weight, the requirements as a set with each one's values as a set, and no matchFields)."""
    canon = sorted({r.canonical() for r in term.term.expressions})
    exprs = f"{var}.preference.matchExpressions"
    parts = [
        f"{var}.weight == {term.weight}",
        f"(!has({var}.preference.matchFields) || size({var}.preference.matchFields) == 0)",
        f"has({exprs})",
        f"{exprs}.all(e, " + " || ".join(_is_requirement("e", c) for c in canon) + ")",
        *(f"{exprs}.exists(e, {_is_requirement('e', c)})" for c in canon),
    ]
    return "(" + " && ".join(parts) + ")"


def _is_requirement(var: str, canonical: Canonical) -> str:
    key, operator, values = canonical
    head = f"{var}.key == {cel_string(key)} && {var}.operator == {cel_string(operator)}"
    if not values:
        return f"({head} && (!has({var}.values) || size({var}.values) == 0))"
    mine = f"(has({var}.values) ? {var}.values : [])"
    every = " && ".join(f"{cel_string(v)} in {mine}" for v in values)
    return f"({head} && {mine}.all(v, v in {cel_strings(values)}) && {every})"


def _present(terms: Sequence[PreferredTerm]) -> str:
    return "[\n  " + ",\n  ".join(f"variables.preferred.exists(t, {_is_term('t', t)})" for t in terms) + "\n]"


def _carried(rule: Rule) -> str:
    forms = ["variables.present.all(p, p)"]
    for terms in rule.equivalents:
        forms.append("(" + " && ".join(f"variables.preferred.exists(t, {_is_term('t', t)})" for t in terms) + ")")
    return " ||\n".join(forms)


def _any_policy_term(var: str, policy: Policy) -> str:
    """CEL: `var` is a term some rule injects or recognises (Policy.term_ids)."""
    terms: dict[Any, PreferredTerm] = {}
    for rule in policy.rules:
        for term in (*rule.preferences, *(t for form in rule.equivalents for t in form)):
            terms.setdefault(term.identity, term)
    return " ||\n  ".join(_is_term(var, t) for t in terms.values())
