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

Beside a pod's own preferred terms the webhook scales a table's terms to them, pod by pod
(`scoretable.scaled_terms` for P, the most the pod's terms can give one node, searched over which
of them can match together). The CEL does the same arithmetic for P = the sum of the positive
weights of the pod's own scored terms (`ownMax`: an upper bound, tight unless terms exclude each
other), with the integer rounding, the minimum weight of 1 and the split past weight 100 of
`scaled_terms`: one slot per term it can produce (`scaled_slots`), unused slots weighing 0. That is
the webhook's `evaluate` of the policy `cel_scale(policy)`, pod for pod. A table whose slots exceed
`MAX_SCALED_SLOTS` (the per-expression cost grows with them) goes in at its fixed scale
(`beside_own`) instead, and `left_to_webhook` names it. Terms with a table's requirements at a
weight the pod's scale gives them count as ours for every table rule the CEL scales (the webhook
counts only the rules that select the pod: the two differ only where two tables share a key).

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
from webhook.scoretable import MAX_SCORE, MAX_TERM_WEIGHT, SPLIT_CAPACITY, classic_terms, split_weight

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


# Scaled terms the CEL may inject for one rule (each a slot of `scaled_slots`): each costs the
# mutation a pass over the pod's preferred terms, and the API server's estimate of that pass grows
# with the largest list a pod can hold; past this many the rule stays at its fixed scale.
MAX_SCALED_SLOTS = 24


@dataclass(frozen=True)
class Slot:
    """One term the per-pod scale may inject: the `part`-th of the weights `split_weight` makes of
    the step `step` (the index into `scoretable.scaled_terms`' steps, heaviest first)."""

    shape: PreferredTerm  # the step's term at the classic scale (its requirements)
    step: int
    part: int
    before: int  # the weight the parts before this one carry when they are all full


def scaled_slots(rule: Rule) -> tuple[Slot, ...]:
    """Every term `scoretable.scaled_terms` can give `rule`'s table, whatever the pod's own terms:
    per step, as many parts as its heaviest weight splits into (`SPLIT_CAPACITY` caps the scale)."""
    if rule.table is None:
        return ()
    slots = []
    for index, (shape, step) in enumerate(_scaled_steps(rule)):
        heaviest = max(s for _, s in _scaled_steps(rule))
        most = max(1, (2 * SPLIT_CAPACITY * step + heaviest) // (2 * heaviest))
        before = 0
        for part, weight in enumerate(split_weight(most)):
            slots.append(Slot(shape, index, part, before))
            before += weight
    return tuple(slots)


def scaled_in_cel(rule: Rule) -> bool:
    """Whether the CEL scales `rule`'s table per pod (else it injects the fixed scale there)."""
    return rule.table is not None and len(scaled_slots(rule)) <= MAX_SCALED_SLOTS


def cel_scale(policy: Policy) -> Policy:
    """The policy as the admission policies carry it out, for `evaluate` to give pod for pod what
    the generated CEL does: a table beside a pod's own preferred terms scaled to the sum of their
    positive weights (`Policy.summed_own`), or at its fixed scale for a rule the cost budget leaves
    out (`scaled_in_cel`)."""
    fixed = frozenset(r.name for r in policy.rules if r.table is not None and not scaled_in_cel(r))
    return dataclasses.replace(policy, summed_own=True, fixed_scale_rules=fixed)


def fixed_scale(policy: Policy) -> Policy:
    """The policy as the admission policies carry it out: a table beside a pod's own preferred
    terms at its fixed scale, not scaled per pod (the webhook's `evaluate` of this policy is what
    the generated CEL does, pod for pod)."""
    return dataclasses.replace(policy, per_pod=False)


def left_to_webhook(policy: Policy) -> tuple[str, ...]:
    """What the admission policies do otherwise than the webhook, per table rule: beside a pod's
    own preferred terms they scale the table to the sum of those terms' positive weights (the
    webhook: to the most the terms give one node), or, for a table too finely split for the CEL
    cost budget (`scaled_in_cel`), inject it at its fixed scale."""
    notes = []
    for rule in policy.rules:
        if rule.table is None:
            continue
        if scaled_in_cel(rule):
            notes.append(
                f'rule "{rule.name}": beside preferred node affinity of the pod\'s own, the admission policy scales '
                "the table to the sum of the pod's positive weights; the webhook scales it to the most they give "
                "one node, which differs only where the pod's terms exclude each other (docs/scheduling.md, "
                '"The pod\'s own node affinity")'
            )
        else:
            notes.append(
                f'rule "{rule.name}": its table needs {len(scaled_slots(rule))} scaled terms, more than the '
                f"{MAX_SCALED_SLOTS} the CEL cost budget allows: beside preferred node affinity of the pod's own, "
                "the admission policy injects the table at its fixed scale; the webhook scales it to the pod's "
                "terms, which puts such pods on the NetQoS scheduler's node more often (docs/scheduling.md, \"The "
                "pod's own node affinity\")"
            )
    return tuple(notes)


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
    shaped = _any_shape("t", policy)
    variables = [
        ("annotations", "has(object.metadata.annotations) ? object.metadata.annotations : {}"),
        (
            "nodeAffinity",
            "has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) ?\n"
            "  object.spec.affinity.nodeAffinity : {}",
        ),
        ("preferred", f"has({na}.{PREFERRED}) ?\n  {na}.{PREFERRED} : []"),
        ("required", f"has({na}.{REQUIRED}) && has({terms}) &&\n  type({terms}) == list ?\n  {terms} : []"),
        # The pod's preferred terms that are no rule's terms.
        ("ownPreferred", "variables.preferred.filter(t, !(\n  " + _any_policy_term("t", policy) + "))"),
        # Of those, the ones the scheduler scores (it skips weight 0 and empty terms, `preference:
        # {}`) with a table's requirements at another weight: ours at some pod's scale, or the author's.
        ("shaped", f"variables.ownPreferred.filter(t, {_SCORED} && ({shaped}))"),
        # The author's own choices the scheduler scores: beside those the table goes in scaled.
        ("own", f"variables.ownPreferred.filter(t, {_SCORED} && !({shaped}))"),
        # At least the most the pod's own terms give one node: the sum of their positive weights.
        ("ownMax", "variables.own.map(t, int(t.weight)).filter(w, w > 0).sum()"),
        ("hasOwn", "variables.ownMax > 0"),
    ]
    for other in policy.rules:
        if scaled_in_cel(other):
            variables += _scaled_variables(policy, other, _suffix(policy, rule, other))
    if scaled_in_cel(rule):
        # The pod's terms with a table's requirements (ours or not), in one pass over its terms:
        # the slots are looked up among these few, which keeps the cost of a pod with thousands
        # of terms of its own near that of the fixed scale.
        variables.append(("tableTerms", f"variables.preferred.filter(t, {shaped})"))
        variables.append(("presentScaled", _present_scaled(rule)))
    return variables + [
        # One flag per term of this rule: does the pod already carry it?
        ("present", _present(rule.preferences)),
        # The same for the terms that go in beside preferred terms of the pod's own (Rule.beside_own).
        ("presentBesideOwn", _present(rule.beside_own or ())),
        # The rule counts as applied: all its terms are there, or all of an earlier form of them
        # (Rule.equivalents: what earlier versions of the webhook injected for the same table), or
        # all of its terms at this pod's scale.
        ("carried", _carried(rule)),
        # This rule's keys that the pod's own node affinity uses (explicit wins), or a table term
        # at a weight this pod's scale does not give it.
        (
            "explicitKeys",
            f"{cel_strings(sorted(rule.keys))}.filter(k,\n"
            f"  variables.required.exists(t, {uses_key.format(t='t')}) ||\n"
            f"  variables.own.exists(t, {uses_key.format(t='t.preference')}) ||\n"
            f"  variables.shaped.exists(t, !({_ours('t', policy, rule)}) && {uses_key.format(t='t.preference')}))",
        ),
    ]


# A preferred term the scheduler scores: a weight other than 0 and a requirement of some kind.
_SCORED = (
    "(has(t.weight) && t.weight != 0 && has(t.preference) && (\n"
    "  (has(t.preference.matchExpressions) && size(t.preference.matchExpressions) > 0) ||\n"
    "  (has(t.preference.matchFields) && size(t.preference.matchFields) > 0)))"
)


def _scaled_variables(policy: Policy, rule: Rule, suffix: str) -> list[tuple[str, str]]:
    """`scaled`: the weight of each step of `rule`'s table at the pod's scale, as
    `scoretable.scaled_terms` computes it for `own_max` = `ownMax` (the same integer arithmetic);
    `parts`: each slot's share of it (`split_weight`; 0 when the slot goes unused). `suffix`
    names another rule's: the policy's own comes without."""
    wa, wp = policy.weights.node_affinity, policy.weights.netqos
    steps = _scaled_steps(rule)
    heaviest = max(step for _, step in steps)
    weights = []
    for _, step in steps:
        capped = (2 * SPLIT_CAPACITY * step + heaviest) // (2 * heaviest)
        rounded = f"(2 * variables.ownMax * {wp * step} + {MAX_SCORE * wa}) / {2 * MAX_SCORE * wa}"
        if step == heaviest:  # the table always goes in, however light the pod's terms
            capped, rounded = max(capped, 1), f"({rounded} > 0 ? {rounded} : 1)"
        weights.append(f"variables.ownMax * {wp * heaviest} > {SPLIT_CAPACITY * MAX_SCORE * wa} ? {capped} : {rounded}")
    parts = []
    for slot in scaled_slots(rule):
        most, rest = MAX_TERM_WEIGHT - slot.part, f"variables.scaled{suffix}[{slot.step}] - {slot.before}"
        parts.append(f"{rest} > {most} ? {most} : ({rest} > 0 ? {rest} : 0)")
    return [
        ("scaled" + suffix, "[\n  " + ",\n  ".join(weights) + "\n]"),
        ("parts" + suffix, "[\n  " + ",\n  ".join(parts) + "\n]"),
    ]


def _present_scaled(rule: Rule) -> str:
    """CEL: per slot, whether it goes unused or the pod carries its term."""
    present = []
    for k, slot in enumerate(scaled_slots(rule)):
        term = _is_term("t", slot.shape, f"variables.parts[{k}]")
        present.append(f"variables.parts[{k}] == 0 ||\n    variables.tableTerms.exists(t, {term})")
    return "[\n  " + ",\n  ".join(present) + "\n]"


def _suffix(policy: Policy, rule: Rule, other: Rule) -> str:
    return "" if other is rule else f"Of{policy.rules.index(other)}"


def _scaled_steps(rule: Rule) -> list[tuple[PreferredTerm, int]]:
    """The table's terms at the classic scale, heaviest level first, with the step each carries
    (`classic_terms` weighs each step by itself): the order `scoretable.scaled_terms` injects."""
    assert rule.table is not None
    return [(term, term.weight) for term in classic_terms(rule.table)]


def _ours(var: str, policy: Policy, rule: Rule) -> str:
    """CEL: the shaped term `var` is a table's term at the pod's scale (`Policy.summed_own`), of
    any rule the CEL scales: the webhook counts the terms of the rules that select the pod, which
    differs only where two rules' tables share a key and one of them does not select the pod. At
    the fixed scale every term of ours is a policy term, never shaped."""
    ours = [
        _is_term(var, slot.shape, f"variables.parts{_suffix(policy, rule, other)}[{k}]")
        for other in policy.rules
        if scaled_in_cel(other)
        for k, slot in enumerate(scaled_slots(other))
    ]
    return "variables.hasOwn && (" + " ||\n    ".join(ours) + ")" if ours else "false"


def _any_shape(var: str, policy: Policy) -> str:
    """CEL: `var` has the requirements of some table's term (at any weight)."""
    if not policy.shapes:
        return "false"
    return " ||\n  ".join(_has_requirements(var, sorted(shape)) for shape in sorted(policy.shapes, key=sorted))


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
            for i, term in enumerate(() if scaled_in_cel(rule) else rule.beside_own or ())
        ),
        # Beside terms of the pod's own, the table at the pod's scale: each used slot's term.
        *(
            _unless(
                f"!variables.hasOwn || variables.parts[{k}] == 0 || variables.presentScaled[{k}]",
                _add(init, PREFERRED_PATH + "/-", _term_initialiser(init, slot.shape, f"variables.parts[{k}]")),
            )
            for k, slot in enumerate(scaled_slots(rule) if scaled_in_cel(rule) else ())
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


def _term_initialiser(init: Initialiser, term: PreferredTerm, weight: str | None = None) -> str:
    """One top-level Object initialiser for the whole term (its nested list of requirement
    initialisers is converted field by field, not as a list value: safe on 1.36.0-1.36.3), at
    `term`'s weight or the CEL expression `weight`."""
    requirements = []
    for req in term.term.expressions:
        fields = [("key", cel_string(req.key)), ("operator", cel_string(req.operator))]
        if req.values:
            fields.append(("values", cel_strings(req.values)))
        requirements.append(init(REQUIREMENT_TYPE, fields))
    preference = init(PREFERENCE_TYPE, (("matchExpressions", "[" + ", ".join(requirements) + "]"),))
    return init(TERM_TYPE, (("weight", weight or str(term.weight)), ("preference", preference)))


def _is_term(var: str, term: PreferredTerm, weight: str | None = None) -> str:
    """CEL: the pod's preferred term `var` has `term`'s identity (PreferredTerm.identity: the
    weight, the requirements as a set with each one's values as a set, and no matchFields), at
    `term`'s weight or the CEL expression `weight`."""
    canon = sorted({r.canonical() for r in term.term.expressions})
    return f"({var}.weight == {weight or term.weight} && {_has_requirements(var, canon)})"


def _has_requirements(var: str, canon: Sequence[Canonical]) -> str:
    """CEL: the preferred term `var` has exactly the requirements `canon` (as sets) and no matchFields."""
    exprs = f"{var}.preference.matchExpressions"
    parts = [
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
    if scaled_in_cel(rule):
        forms.append("(variables.hasOwn && variables.presentScaled.all(p, p))")
    return " ||\n".join(forms)


def _any_policy_term(var: str, policy: Policy) -> str:
    """CEL: `var` is a term some rule injects or recognises (Policy.term_ids)."""
    terms: dict[Any, PreferredTerm] = {}
    for rule in policy.rules:
        for term in (*rule.preferences, *(t for form in rule.equivalents for t in form)):
            terms.setdefault(term.identity, term)
    return " ||\n  ".join(_is_term(var, t) for t in terms.values())
