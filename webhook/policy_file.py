"""Reading and validating a policy file into a compiled `Policy`.

Everything is checked here, once, at start-up: a bad file stops the server with a message that
names the file, the rule, the field and the offending value. Nothing is validated at request time.

File format (YAML or JSON):

    apiVersion: netqos.io/v1alpha1      # optional; checked when present
    kind: NetQoSPolicy                  # optional; checked when present
    schedulerWeights:                   # optional: the Score weights nodeScore is compiled for
      nodeAffinity: 2                   # NodeAffinity's in the scheduler that binds the pods
      netqos: 1                         # the NetQoS plugin's in the scheduler reproduced
    rules:
    - name: netqos                      # DNS label: a-z, 0-9, '-'
      podSelector:                      # a Kubernetes LabelSelector
        matchLabels: {qos: latency-sensitive}
      nodeScore:                        # what the NetQoS plugin scored, compiled into terms
        key: net                        # (webhook.scoretable), or instead:
        scores:
        - {value: high, score: 100}     # 0..100
        - {value: low, score: 0}
        unlistedScore: 10               # any other value, or no label
      preferences:                      # PreferredSchedulingTerms to append, as written
      - weight: 90                      # 1..100
        matchExpressions:               # NodeSelectorRequirements
        - {key: net, operator: In, values: [high]}

A rule has `nodeScore` or `preferences`, not both.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, NoReturn

from webhook.affinity import NODE_SELECTOR_OPERATORS, PreferredTerm, Requirement
from webhook.apidata import show
from webhook.documents import document_from_bytes, read_document
from webhook.errors import UsageError
from webhook.policy import Policy, Rule
from webhook.scoretable import MAX_SCORE, SchedulerWeights, ScoreTable, TableError, classic_terms, compile_table
from webhook.selector import LABEL_SELECTOR_OPERATORS, LabelSelector
from webhook.validation import is_dns1123_label, is_qualified_name, is_valid_label_value

API_VERSION = "netqos.io/v1alpha1"
KIND = "NetQoSPolicy"
BUILTIN_SOURCE = "<built-in default policy>"

# The NetQoS plugin's table, compiled for the default profile's NodeAffinity weight 2 and the
# plugin's weight 1 into 90 on net In [high], 10 on net NotIn [low] and the constant 100 on
# net Exists and 100 on net DoesNotExist (docs/scheduling.md, "The translation").
# deploy/base/policy.yaml holds the same document, and a test keeps them identical.
DEFAULT_DOCUMENT: dict[str, Any] = {
    "apiVersion": API_VERSION,
    "kind": KIND,
    "schedulerWeights": {"nodeAffinity": 2, "netqos": 1},
    "rules": [
        {
            "name": "netqos",
            "podSelector": {"matchLabels": {"qos": "latency-sensitive"}},
            "nodeScore": {
                "key": "net",
                "scores": [{"value": "high", "score": 100}, {"value": "low", "score": 0}],
                "unlistedScore": 10,
            },
        }
    ],
}


class PolicyError(UsageError, ValueError):
    """A policy file that cannot be used; the message says where and what to do."""


def default_policy() -> Policy:
    return compile_policy(DEFAULT_DOCUMENT, BUILTIN_SOURCE)


def load_policy(path: str | Path | None) -> Policy:
    """The policy in `path`, or the built-in default when `path` is None."""
    if path is None:
        return default_policy()
    source = str(path)
    document = read_document(path, "policy", PolicyError)
    return compile_policy(document, source)


def policy_from_bytes(data: bytes, source: str) -> Policy:
    """The policy in the file content `data` (read once, so it can be hashed too); `source`
    names the file in errors. Parsed exactly as `load_policy` parses a file."""
    return compile_policy(document_from_bytes(data, source, "policy", PolicyError), source)


def compile_policy(document: Any, source: str) -> Policy:
    return _Checker(source).policy(document)


class _Checker:
    """Walks the document; `fail` raises with the file, rule, field and value."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.rule = ""

    def fail(self, path: str, value: Any, problem: str) -> NoReturn:
        where = f"policy file {self.source}: "
        if self.rule:
            where += f"{self.rule}: "
        raise PolicyError(f"{where}{path}: {problem} (got {show(value)})")

    def fields(self, obj: Any, path: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Any]:
        if not isinstance(obj, dict):
            self.fail(path, obj, "must be a mapping")
        for key in obj:
            if key not in allowed:
                hint = difflib.get_close_matches(str(key), allowed, n=1)
                extra = f"; did you mean {hint[0]!r}?" if hint else f"; allowed fields: {', '.join(allowed)}"
                self.fail(f"{path}.{key}" if path else str(key), key, f"unknown field{extra}")
        for key in required:
            if key not in obj:
                self.fail(f"{path}.{key}" if path else key, None, "is required")
        checked: dict[str, Any] = obj
        return checked

    def policy(self, doc: Any) -> Policy:
        if doc is None:
            self.fail("(document)", doc, "the file is empty; it must hold a mapping with 'rules'")
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
            self.configmap(doc)
        self.fields(doc, "", ("apiVersion", "kind", "schedulerWeights", "rules"), ("rules",))
        if "apiVersion" in doc and doc["apiVersion"] != API_VERSION:
            self.fail("apiVersion", doc["apiVersion"], f"must be {API_VERSION}")
        if "kind" in doc and doc["kind"] != KIND:
            self.fail("kind", doc["kind"], f"must be {KIND}")
        weights = self.weights(doc.get("schedulerWeights"))
        rules_raw = doc["rules"]
        if not isinstance(rules_raw, list) or not rules_raw:
            self.fail("rules", rules_raw, "must be a non-empty list of rules")
        rules: list[Rule] = []
        seen: set[str] = set()
        for i, raw in enumerate(rules_raw):
            self.rule = f"rules[{i}]"
            rule = self.rule_(raw, weights)
            if rule.name in seen:
                self.fail("name", rule.name, "is used by an earlier rule; rule names must be unique")
            seen.add(rule.name)
            rules.append(rule)
        return Policy(tuple(rules), weights)

    def configmap(self, doc: dict[str, Any]) -> NoReturn:
        """A ConfigMap where the policy it holds was meant (`kubectl get configmap -o yaml` saved
        to a file): name the key that holds it and the command that writes it out."""
        meta = doc.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        name, namespace = meta.get("name", "NAME"), meta.get("namespace", "NAMESPACE")
        data = doc.get("data")
        keys = sorted(str(key) for key in data) if isinstance(data, dict) and data else []
        if not keys:
            raise PolicyError(f"policy file {self.source}: is a ConfigMap with no data keys, not a policy")
        key = "policy.yaml" if "policy.yaml" in keys else keys[0]
        held = f"its key {key} holds the policy" if len(keys) == 1 else f"its keys are {', '.join(keys)}"
        path = key.replace(".", "\\.")
        raise PolicyError(
            f"policy file {self.source}: is a ConfigMap, not a policy: {held}; write the key to a file and "
            f"pass that: kubectl -n {namespace} get configmap {name} -o jsonpath='{{.data.{path}}}' > {key}; "
            f"--config {key}"
        )

    def weights(self, raw: Any) -> SchedulerWeights:
        if raw is None:
            return SchedulerWeights()
        path = "schedulerWeights"
        self.fields(raw, path, ("nodeAffinity", "netqos"))
        for key in raw:
            value = raw[key]
            if type(value) is not int or not 1 <= value <= 100:
                self.fail(
                    f"{path}.{key}", value, "must be an integer from 1 to 100, as in the KubeSchedulerConfiguration"
                )
        defaults = SchedulerWeights()
        return SchedulerWeights(raw.get("nodeAffinity", defaults.node_affinity), raw.get("netqos", defaults.netqos))

    def rule_(self, raw: Any, weights: SchedulerWeights) -> Rule:
        if not isinstance(raw, dict):
            self.fail("(rule)", raw, "must be a mapping with name, podSelector and preferences")
        name = raw.get("name")
        name_errors = is_dns1123_label(name) if isinstance(name, str) else ["must be a string"]
        if not name_errors:
            self.rule = f'{self.rule} "{name}"'  # name the rule in every later message
        self.fields(raw, "", ("name", "podSelector", "nodeScore", "preferences"), ("name", "podSelector"))
        if name_errors:
            self.fail("name", name, f"must be a DNS-1123 label, as a Kubernetes name: {'; '.join(name_errors)}")
        selector = self.selector(raw["podSelector"], "podSelector")
        if ("nodeScore" in raw) == ("preferences" in raw):
            self.fail(
                "nodeScore",
                raw.get("nodeScore"),
                "a rule needs nodeScore (a score table, compiled into terms) or preferences (the terms), exactly one",
            )
        if "nodeScore" in raw:
            table = self.table(raw["nodeScore"], "nodeScore")
            try:
                terms = compile_table(table, weights)
            except TableError as err:
                path = err.field if err.field.startswith("schedulerWeights") else f"nodeScore.{err.field}"
                self.fail(path, err.value, err.problem)
            classic = classic_terms(table)
            return Rule(str(name), selector, terms, table, None if classic == terms else classic)
        prefs = raw["preferences"]
        if not isinstance(prefs, list) or not prefs:
            self.fail("preferences", prefs, "must be a non-empty list of {weight, matchExpressions}")
        terms = tuple(self.term(p, f"preferences[{j}]") for j, p in enumerate(prefs))
        return Rule(str(name), selector, terms)

    def table(self, raw: Any, path: str) -> ScoreTable:
        self.fields(raw, path, ("key", "scores", "unlistedScore"), ("key", "scores", "unlistedScore"))
        self.label_key(raw["key"], f"{path}.key")
        entries = raw["scores"]
        if not isinstance(entries, list) or not entries:
            self.fail(f"{path}.scores", entries, "must be a non-empty list of {value, score}")
        scores: list[tuple[str, int]] = []
        first: dict[str, int] = {}
        for i, entry in enumerate(entries):
            where = f"{path}.scores[{i}]"
            self.fields(entry, where, ("value", "score"), ("value", "score"))
            value = entry["value"]
            self.label_value(value, f"{where}.value")
            if value in first:
                self.fail(
                    f"{where}.value",
                    value,
                    f"is listed already at {path}.scores[{first[value]}]; each value has one score",
                )
            first[value] = i
            scores.append((value, self.score(entry["score"], f"{where}.score")))
        unlisted = self.score(raw["unlistedScore"], f"{path}.unlistedScore")
        return ScoreTable(raw["key"], tuple(scores), unlisted)

    def score(self, value: Any, path: str) -> int:
        if type(value) is not int or not 0 <= value <= MAX_SCORE:
            self.fail(path, value, f"must be an integer from 0 to {MAX_SCORE}, as the NetQoS plugin scored")
        checked: int = value
        return checked

    def selector(self, raw: Any, path: str) -> LabelSelector:
        self.fields(raw, path, ("matchLabels", "matchExpressions"))
        labels = raw.get("matchLabels") or {}
        if not isinstance(labels, dict):
            self.fail(f"{path}.matchLabels", labels, "must be a mapping of label key to value")
        for key, value in labels.items():
            self.label_key(key, f"{path}.matchLabels")
            self.label_value(value, f"{path}.matchLabels[{key!r}]")
        exprs_raw = raw.get("matchExpressions") or []
        if not isinstance(exprs_raw, list):
            self.fail(f"{path}.matchExpressions", exprs_raw, "must be a list")
        exprs = []
        for k, e in enumerate(exprs_raw):
            key, op, values = self.expression(e, f"{path}.matchExpressions[{k}]", LABEL_SELECTOR_OPERATORS)
            exprs.append(Requirement(key, op, values))
        return LabelSelector(tuple(labels.items()), tuple(exprs))

    def term(self, raw: Any, path: str) -> PreferredTerm:
        self.fields(raw, path, ("weight", "matchExpressions"), ("weight", "matchExpressions"))
        weight = raw["weight"]
        if type(weight) is not int or not 1 <= weight <= 100:
            self.fail(f"{path}.weight", weight, "must be an integer from 1 to 100")
        exprs = raw["matchExpressions"]
        if not isinstance(exprs, list) or not exprs:
            # A preference with no expressions matches no node: it would do nothing.
            self.fail(f"{path}.matchExpressions", exprs, "must be a non-empty list of node selector requirements")
        reqs = tuple(
            Requirement(*self.expression(e, f"{path}.matchExpressions[{k}]", NODE_SELECTOR_OPERATORS))
            for k, e in enumerate(exprs)
        )
        return PreferredTerm.of(weight, *reqs)

    def expression(self, raw: Any, path: str, operators: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]]:
        self.fields(raw, path, ("key", "operator", "values"), ("key", "operator"))
        self.label_key(raw["key"], f"{path}.key")
        op = raw["operator"]
        if op not in operators:
            self.fail(f"{path}.operator", op, f"must be one of {', '.join(operators)}")
        values = raw.get("values")
        if values is None:
            values = []
        if not isinstance(values, list):
            self.fail(f"{path}.values", values, "must be a list of strings")
        for v_i, v in enumerate(values):
            if op in ("In", "NotIn"):
                self.label_value(v, f"{path}.values[{v_i}]")
            elif not isinstance(v, str):
                self.fail(f"{path}.values[{v_i}]", v, "must be a string, quoted in YAML if it looks like a number")
        problem = Requirement(raw["key"], op, tuple(values)).values_problem()
        if problem:
            self.fail(f"{path}.values", values, problem)
        return raw["key"], op, tuple(values)

    def label_key(self, key: Any, path: str) -> None:
        if not isinstance(key, str):
            self.fail(path, key, "must be a label key string: [prefix/]name")
        errors = is_qualified_name(key)
        if errors:
            self.fail(path, key, f"must be a label key ([prefix/]name): {'; '.join(errors)}")

    def label_value(self, value: Any, path: str) -> None:
        if not isinstance(value, str):
            self.fail(path, value, "must be a label value string, quoted in YAML if it looks like a number or boolean")
        errors = is_valid_label_value(value)
        if errors:
            # The usual way to get here: a YAML block scalar (`key: |`) keeps a final newline.
            self.fail(path, value, f"must be a label value: {'; '.join(errors)}")
