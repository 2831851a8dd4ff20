"""What a pod should become: the NetQoS rules, compiled, and their evaluation.

Pure: a pod (plain JSON data) goes in, an `Outcome` comes out holding the pod as it should be.
The JSON patch is derived elsewhere (`patch.diff`) from the difference, so the patch can never
disagree with the intended result. Unchanged parts of the pod are shared, not copied, which
keeps evaluation and diffing cheap for large pods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from webhook import apidata
from webhook.affinity import (
    GROUPED_TERMS,
    PREFERRED,
    Canonical,
    PreferredTerm,
    TermIdentity,
    TermSketch,
    matched_weight,
    most_matched_weight,
    preferred_sketches_from_api,
    preferred_term_from_api,
    required_terms_from_api,
    sketch_identity,
    term_dimensions,
)
from webhook.apidata import ShapeError
from webhook.names import INJECTED_ANNOTATION, OPT_OUT_ANNOTATION
from webhook.scoretable import SchedulerWeights, ScoreTable, classic_terms, scaled_terms
from webhook.selector import LabelSelector


class Decision(StrEnum):
    MUTATED = "mutated"
    UNCHANGED = "unchanged"  # selected, but every rule's terms are already there
    SKIPPED_EXPLICIT = "skipped_explicit"  # the pod's own affinity already uses the keys
    SKIPPED_OPT_OUT = "skipped_opt_out"
    NOT_SELECTED = "not_selected"
    INVALID = "invalid"  # the object is not shaped like a pod; left alone
    ERROR = "error"  # a bug of ours; the pod is admitted unchanged


@dataclass(frozen=True)
class Rule:
    name: str
    pod_selector: LabelSelector
    preferences: tuple[PreferredTerm, ...]
    # The score table the preferences were compiled from (None: the file wrote the terms). Beside
    # preferred terms of the pod's own, a table goes in scaled to them (`terms_beside`).
    table: ScoreTable | None = None
    # The table's terms without the constant (None: the same as `preferences`): what went in
    # beside a pod's own terms before the scale was chosen per pod. A pod carrying them counts
    # as injected, as does one carrying `preferences`.
    beside_own: tuple[PreferredTerm, ...] | None = None
    keys: frozenset[str] = field(init=False, compare=False)
    # The requirement sets of the table's terms: a pod's term with one of them, at a weight the
    # pod's form does not give it, is the author's (`table_shaped`).
    shapes: frozenset[frozenset[Canonical]] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", frozenset().union(*(t.keys() for t in self.preferences)))
        shapes = () if self.table is None else classic_terms(self.table)
        object.__setattr__(self, "shapes", frozenset(t.identity[1] for t in shapes))

    @property
    def forms(self) -> tuple[tuple[PreferredTerm, ...], ...]:
        """The fixed term sets that count as this rule applied."""
        return (self.preferences, *self.equivalents)

    @property
    def equivalents(self) -> tuple[tuple[PreferredTerm, ...], ...]:
        """The fixed term sets other than `preferences` that count as this rule applied."""
        return () if self.beside_own is None else (self.beside_own,)

    def terms_beside(self, own_max: int, weights: SchedulerWeights, per_pod: bool = True) -> tuple[PreferredTerm, ...]:
        """The terms to inject into a pod whose own preferred terms give a node at most `own_max`
        raw points (0: the pod has none the scheduler scores). A table beside terms of the pod's
        own goes in without the constant, scaled to them (`scoretable.scaled_terms`), or with
        `per_pod` False at its fixed scale (`beside_own`: what the admission policy injects)."""
        if not own_max or self.table is None:
            return self.preferences
        if not per_pod:
            return self.beside_own or self.preferences
        return scaled_terms(self.table, weights, own_max)


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...]
    weights: SchedulerWeights = SchedulerWeights()  # what score tables were compiled for
    # Tables beside a pod's own preferred terms: scaled to them per pod (the webhook), or at the
    # fixed scale (False: what the admission policy compiles; `Rule.terms_beside`).
    per_pod: bool = True
    # How far a pod's own terms can raise one node (`own_max`): the tight bound, searched over which
    # of them can match together, or (True) the sum of their positive weights, the bound the
    # admission policy computes in CEL. Rules named in `fixed_scale_rules` stay at the fixed scale
    # (the admission policy's fallback where the CEL cost budget leaves a rule's scaling out).
    summed_own: bool = False
    fixed_scale_rules: frozenset[str] = frozenset()
    # Identities of every term any rule injects or recognises: such terms in a pod are ours (or
    # identical to ours), never the user's explicit choice.
    term_ids: frozenset[TermIdentity] = field(init=False, compare=False)
    # Their node-label keys: a pod's term on another key is not ours.
    term_keys: frozenset[str] = field(init=False, compare=False)
    # Every rule's table shapes (`Rule.shapes`).
    shapes: frozenset[frozenset[Canonical]] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        ids = frozenset(t.identity for r in self.rules for form in r.forms for t in form)
        object.__setattr__(self, "term_ids", ids)
        object.__setattr__(self, "term_keys", frozenset(key for _, exprs, _ in ids for key, _, _ in exprs))
        object.__setattr__(self, "shapes", frozenset().union(*(r.shapes for r in self.rules)))


def policy_warnings(policy: Policy) -> tuple[str, ...]:
    """What a valid policy does that its author may not mean: a rule whose podSelector is `{}`
    selects every pod, so its webhook entry's objectSelector makes the API server call the
    webhook for every pod created in the cluster (but kube-system and the webhook's namespace)."""
    return tuple(
        f'rule "{rule.name}": podSelector {{}} selects every pod: the API server will call the webhook for '
        "every pod created in the cluster and the rule applies to all of them; give matchLabels or "
        "matchExpressions to choose the pods"
        for rule in policy.rules
        if rule.pod_selector.is_empty()
    )


@dataclass(frozen=True)
class Outcome:
    decision: Decision
    pod: Any  # what the object should become; the input itself when nothing changes
    injected: tuple[str, ...] = ()  # rules applied in this evaluation
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class _PodView:
    """The few pod fields the policy reads, type-checked once."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    required_keys: frozenset[str]
    # the preferred terms, sketched in one walk (docs/performance.md, "The worst-case review")
    preferred: list[TermSketch]


def evaluate(policy: Policy, pod: Any) -> Outcome:
    """Decide what `pod` (a Pod object as JSON data) should become under `policy`."""
    try:
        view = _read(pod)
    except ShapeError as err:
        return Outcome(Decision.INVALID, pod, warnings=(f"netqos-webhook left the pod unchanged: {err}",))

    selected = [r for r in policy.rules if r.pod_selector.matches(view.labels)]
    if not selected:
        return Outcome(Decision.NOT_SELECTED, pod)
    opt_out = view.annotations.get(OPT_OUT_ANNOTATION)
    if opt_out == "false":  # exact, as Kubernetes compares annotation values
        return Outcome(Decision.SKIPPED_OPT_OUT, pod)

    # One pass over the pod's terms: which are there, which are the author's own (scored by the
    # scheduler beside ours), and the keys of those: explicit wins. A term that is a policy term
    # (injected by us, or saying exactly what we would) is not the author's; one with a table's
    # requirements at another weight may be ours at this pod's scale, decided once the pod's own
    # terms are known. A term that also has matchFields says more than ours: never ours. An empty
    # term (`preference: {}`) or one of weight 0 the scheduler skips: it is nobody's.
    present: set[TermIdentity] = set()
    shaped: list[tuple[TermIdentity, frozenset[str]]] = []
    own: list[TermSketch] = []
    explicit = set(view.required_keys)
    policy_keys, ids = policy.term_keys, policy.term_ids
    for sketch in view.preferred:
        weight, keys, has_fields, raw = sketch
        if not weight or not (keys or has_fields):
            continue
        if not has_fields and keys <= policy_keys:
            identity = sketch_identity(sketch)
            present.add(identity)
            if identity in ids:
                continue
            if identity[1] in policy.shapes:
                shaped.append((identity, keys))
                continue
        own.append(sketch)
        explicit |= keys
    own_max = (_own_sum(own) if policy.summed_own else _own_max(own)) if own else 0
    forms = {
        rule.name: rule.terms_beside(
            own_max, policy.weights, policy.per_pod and rule.name not in policy.fixed_scale_rules
        )
        for rule in selected
    }
    ours = {t.identity for form in forms.values() for t in form}
    for identity, keys in shaped:
        if identity not in ours:
            explicit |= keys  # a table's requirements at a weight we would not give: the author's
    to_add: list[PreferredTerm] = []
    applied: list[str] = []
    warnings: list[str] = []
    for rule in selected:
        form = forms[rule.name]
        if any(all(t.identity in present for t in f) for f in (form, *rule.forms)):
            continue  # already carried: a re-invocation, or the user wrote our terms
        missing = [t for t in form if t.identity not in present]
        clash = sorted(rule.keys & explicit)
        if clash:
            warnings.append(
                f'netqos-webhook: rule "{rule.name}" not applied: the pod\'s own node affinity '
                f"already uses node label {', '.join(map(repr, clash))}"
            )
            continue
        for term in missing:
            present.add(term.identity)
            to_add.append(term)
        applied.append(rule.name)

    clashed = bool(warnings)
    if opt_out not in (None, "true"):
        warnings.append(
            f'netqos-webhook: annotation {OPT_OUT_ANNOTATION}="{opt_out}" does not opt out: only "false" '
            'does (values are exact strings: "true" or "false")'
        )
    if not applied:
        decision = Decision.SKIPPED_EXPLICIT if clashed else Decision.UNCHANGED
        return Outcome(decision, pod, warnings=tuple(warnings))
    names = _merge_names(view.annotations.get(INJECTED_ANNOTATION), applied)
    return Outcome(Decision.MUTATED, _with_terms(pod, to_add, names), tuple(applied), tuple(warnings))


@dataclass(frozen=True)
class Injected:
    """What a pod's `netqos.io/injected` annotation says the webhook put into it. The annotation
    records the names of the rules applied (`_merge_names`), and the webhook (as the admission
    policy) appends their terms after the pod's own (`_with_terms`); a rule is applied only where
    the pod's own node affinity uses none of its keys (explicit wins). So the terms at the end of
    the preferred list whose keys all belong to a named rule are that rule's, at whatever weight
    and in whatever form an earlier policy gave them: `terms` counts them. `unknown`: named rules
    the policy no longer holds, whose keys, and so whose terms, are not known."""

    rules: tuple[str, ...] = ()
    terms: int = 0
    unknown: tuple[str, ...] = ()


def injected(policy: Policy, pod: Mapping[str, Any]) -> Injected:
    """The rules `pod`'s annotation names and how many of its trailing preferred terms are theirs
    (`Injected`); nothing for a pod without the annotation or of another shape."""
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    value = annotations.get(INJECTED_ANNOTATION) if isinstance(annotations, Mapping) else None
    names = tuple(n for n in value.split(",") if n) if isinstance(value, str) else ()
    if not names:
        return Injected()
    by_name = {rule.name: rule for rule in policy.rules}
    key_sets = [by_name[n].keys for n in names if n in by_name]
    count = 0
    for raw in reversed(_preferred_of(pod)):
        keys = _plain_keys(raw)
        if not keys or not any(keys <= rule_keys for rule_keys in key_sets):
            break
        count += 1
    return Injected(names, count, tuple(n for n in names if n not in by_name))


def without_injected(pod: Mapping[str, Any], found: Injected) -> dict[str, Any]:
    """`pod` as it was before the webhook saw it: without the trailing terms `found` counts and
    without the annotation (the emptied containers left out too). Copies only what it changes."""
    if not found.rules:
        return dict(pod)
    new = dict(pod)
    meta = new["metadata"] = dict(_get(pod, "metadata"))
    annotations = {k: v for k, v in _get(meta, "annotations").items() if k != INJECTED_ANNOTATION}
    _set_or_drop(meta, "annotations", annotations)
    if not found.terms:
        return new
    spec = new["spec"] = dict(_get(pod, "spec"))
    affinity = dict(_get(spec, "affinity"))
    node_affinity = dict(_get(affinity, "nodeAffinity"))
    preferred = list(node_affinity.get(PREFERRED) or ())
    _set_or_drop(node_affinity, PREFERRED, preferred[: len(preferred) - found.terms])
    _set_or_drop(affinity, "nodeAffinity", node_affinity)
    _set_or_drop(spec, "affinity", affinity)
    return new


def injected_earlier(policy: Policy, pod: Mapping[str, Any], outcome: Outcome) -> bool:
    """Whether `pod`, which `evaluate` judged `outcome`, was mutated under an earlier policy: its
    annotation names rules, it does not carry the current terms (`MUTATED`, or `SKIPPED_EXPLICIT`
    where the keys in the way are the named rules' own terms), and without the injected terms the
    webhook would give it the current ones: as it does its replacement, made from the template."""
    if outcome.decision not in (Decision.MUTATED, Decision.SKIPPED_EXPLICIT):
        return False
    found = injected(policy, pod)
    return bool(found.rules) and evaluate(policy, without_injected(pod, found)).decision is Decision.MUTATED


def _preferred_of(pod: Mapping[str, Any]) -> list[Any]:
    spec = pod.get("spec")
    affinity = spec.get("affinity") if isinstance(spec, Mapping) else None
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    preferred = node_affinity.get(PREFERRED) if isinstance(node_affinity, Mapping) else None
    return preferred if isinstance(preferred, list) else []


def _plain_keys(raw: Any) -> frozenset[str]:
    """The node-label keys of a preferred term with matchExpressions alone (no matchFields, which
    no rule writes); empty for any other term."""
    preference = raw.get("preference") if isinstance(raw, Mapping) else None
    if not isinstance(preference, Mapping) or preference.get("matchFields"):
        return frozenset()
    expressions = preference.get("matchExpressions")
    if not isinstance(expressions, list):
        return frozenset()
    keys = [e.get("key") if isinstance(e, Mapping) else None for e in expressions]
    if not keys or not all(isinstance(k, str) for k in keys):
        return frozenset()
    return frozenset(str(k) for k in keys)


def _set_or_drop(parent: dict[str, Any], key: str, value: Any) -> None:
    if value:
        parent[key] = value
    else:
        parent.pop(key, None)


def own_points(policy: Policy, terms: Sequence[PreferredTerm]) -> int:
    """The most raw points a pod's own preferred terms (those `evaluate` counts as the author's:
    scored by the scheduler, not a policy term nor a table's requirements) give one node."""
    own = [
        t
        for t in terms
        if t.weight
        and not t.term.is_empty()
        and t.identity not in policy.term_ids
        and (t.term.fields or t.identity[1] not in policy.shapes)
    ]
    return most_matched_weight(own)


def _own_max(own: list[TermSketch]) -> int:
    """`own_points` of sketched terms: each parsed only if its keys link it to a few others."""
    if len(own) > GROUPED_TERMS:  # matched_weight would sum them: skip building its input
        return sum(sketch[0] for sketch in own if sketch[0] > 0)
    weighed = [(sketch[0], term_dimensions(sketch[1], sketch[2]), sketch[3]) for sketch in own if sketch[0] > 0]
    return matched_weight(weighed, _parse)


def _own_sum(own: list[TermSketch]) -> int:
    """The sum of the own terms' positive weights: at least `_own_max`, equal when no two of them
    exclude each other."""
    return sum(sketch[0] for sketch in own if sketch[0] > 0)


def _parse(raw: Mapping[str, Any]) -> PreferredTerm:
    return preferred_term_from_api(raw, PREFERRED)  # its shape was checked when it was sketched


def _merge_names(existing: str | None, applied: list[str]) -> str:
    names = [n for n in (existing or "").split(",") if n]
    names += [n for n in applied if n not in names]
    return ",".join(names)


def _with_terms(pod: Mapping[str, Any], terms: list[PreferredTerm], injected: str) -> dict[str, Any]:
    """A new pod with `terms` appended after the pod's own preferred terms and the annotation set.

    Copies only the dicts on the two paths it changes; every other subtree is the same object
    as in the input, which `patch.diff` recognises without comparing it.
    """
    new = dict(pod)
    meta = new["metadata"] = dict(_get(pod, "metadata"))
    annotations = meta["annotations"] = dict(_get(meta, "annotations"))
    annotations[INJECTED_ANNOTATION] = injected
    spec = new["spec"] = dict(_get(pod, "spec"))
    affinity = spec["affinity"] = dict(_get(spec, "affinity"))
    node_affinity = affinity["nodeAffinity"] = dict(_get(affinity, "nodeAffinity"))
    preferred = node_affinity[PREFERRED] = list(node_affinity.get(PREFERRED) or ())
    preferred.extend(t.to_api() for t in terms)
    return new


def _get(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return {} if value is None else value


def _read(pod: Any) -> _PodView:
    apidata.expect(pod, dict, "object", "a Pod object")
    meta = apidata.obj(pod, "metadata", "metadata")
    labels = apidata.string_map(meta, "labels", "metadata.labels")
    annotations = apidata.string_map(meta, "annotations", "metadata.annotations")
    spec = apidata.obj(pod, "spec", "spec")
    base = "spec.affinity.nodeAffinity"
    node_affinity = apidata.obj(apidata.obj(spec, "affinity", "spec.affinity"), "nodeAffinity", base)
    required = required_terms_from_api(node_affinity, base)
    required_keys = {r.key for term in required or () for r in term.expressions}
    preferred = preferred_sketches_from_api(node_affinity.get(PREFERRED), f"{base}.{PREFERRED}")
    return _PodView(labels, annotations, frozenset(required_keys), preferred)
