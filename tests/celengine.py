"""The generated admission policies' CEL in a second engine: Google's CEL for Python (cel-expr-python,
the C++ runtime), independent of the API server's cel-go.

cel-expr-python has no Kubernetes type provider, so the initialisers (`JSONPatch{...}`,
`Object.spec...{...}`) cannot be written as the API server reads them. The generator takes the
way initialisers are written as a parameter (`webhook.admission_policy.Initialiser`); here:

- for type checking, each initialiser becomes a call of a function declared to return an
  *abstract type* of the initialiser's name (`JSONPatch`, `Object.spec.affinity...`), whose
  parameters are the fields (JSONPatch's op, path and from are strings, every other field dyn, as
  in the API server). The mutation then type-checks to exactly `list(JSONPatch)` or not at all;
- for evaluation, each initialiser becomes `init({"field": value, ...})`, which returns the map,
  the JSON the API server would marshal it to.

Variables are evaluated in order and passed as `variables` (a map), as the API server's lazy
variable resolution gives them.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
from cel_expr_python import cel
from cel_expr_python.ext import ext_strings

from webhook.admission_policy import RuleCel, WarningCel, rule_cel, warning_cel
from webhook.policy import Policy, Rule

DYN = cel.Type.DYN
STRING_FIELDS = {"op", "path", "from"}  # JSONPatch's typed fields; its value and every Object field are dyn


@dataclass
class _CheckingInitialiser:
    """Writes initialisers as calls and remembers the functions to declare."""

    functions: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    def __call__(self, type_name: str, fields: Sequence[tuple[str, str]]) -> str:
        names = tuple(name for name, _ in fields)
        function = re.sub(r"\W", "_", type_name) + "__" + "_".join(names)
        self.functions[function] = (type_name, names)
        return f"{function}({', '.join(value for _, value in fields)})"

    def declarations(self) -> list[cel.FunctionDecl]:
        declarations = []
        for function, (type_name, names) in self.functions.items():
            params = [cel.Type.STRING if type_name == "JSONPatch" and n in STRING_FIELDS else DYN for n in names]
            overload = cel.Overload(
                f"{function}_overload", return_type=cel.Type.AbstractType(type_name), parameters=params
            )
            declarations.append(cel.FunctionDecl(function, [overload]))
        return declarations


# Kubernetes' list library (k8s.io/apiserver/pkg/cel/library/lists.go, `sum`), which the
# generated CEL uses to add up a pod's own weights: declared here for lists of ints.
_SUM = cel.FunctionDecl(
    "sum",
    [
        cel.Overload(
            "list_int_sum",
            return_type=cel.Type.INT,
            parameters=[cel.Type.List(cel.Type.INT)],
            is_member=True,
            impl=lambda values: sum(values),
        )
    ],
)


def _evaluating_initialiser(type_name: str, fields: Sequence[tuple[str, str]]) -> str:
    return "init({" + ", ".join(f'"{name}": {value}' for name, value in fields) + "})"


def _checking_env(initialiser: _CheckingInitialiser) -> Any:
    return cel.NewEnv(
        variables={"object": DYN, "oldObject": DYN, "variables": DYN},
        functions=[*initialiser.declarations(), _SUM],
        extensions=[ext_strings.ExtStrings()],
    )


_EVAL_ENV = cel.NewEnv(
    variables={"object": DYN, "variables": DYN},
    functions=[
        cel.FunctionDecl(
            "init",
            [
                cel.Overload(
                    "init_map",
                    return_type=cel.Type.Map(cel.Type.STRING, DYN),
                    parameters=[cel.Type.Map(cel.Type.STRING, DYN)],
                    impl=lambda fields: fields,
                )
            ],
        ),
        _SUM,
    ],
    extensions=[ext_strings.ExtStrings()],
)


@dataclass(frozen=True)
class Checked:
    """The type cel-expr-python's checker gives each expression."""

    variables: dict[str, str]
    match_condition: str
    mutation: str


def type_check(policy: Policy, rule: Rule) -> Checked:
    """Type-check one rule's MutatingAdmissionPolicy CEL; raises on any checker error."""
    initialiser = _CheckingInitialiser()
    rc = rule_cel(policy, rule, init=initialiser)
    env = _checking_env(initialiser)
    variables = {name: env.compile(expression).return_type().name() for name, expression in rc.variables}
    condition = env.compile(rc.match_condition).return_type()
    mutation = env.compile(rc.mutation).return_type()
    expected = cel.Type.List(cel.Type.AbstractType("JSONPatch"))
    if not mutation == expected:
        raise AssertionError(f"mutation has type {mutation.name()}, not list(JSONPatch)")
    return Checked(variables, condition.name(), mutation.name())


def type_check_warnings(policy: Policy, rule: Rule) -> list[tuple[str, str]]:
    """The (validation, message) types of the warn-only policy's CEL."""
    wc = warning_cel(policy, rule)
    env = _checking_env(_CheckingInitialiser())
    for _, expression in wc.variables:
        env.compile(expression)
    return [(env.compile(e).return_type().name(), env.compile(m).return_type().name()) for e, m in wc.validations]


@functools.lru_cache(maxsize=4096)
def _program(expression: str) -> Any:
    return _EVAL_ENV.compile(expression)


def _eval(expression: str, data: dict[str, Any]) -> Any:
    return _program(expression).eval(data=data).plain_value()


def _variables(named: Sequence[tuple[str, str]], pod: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, expression in named:
        values[name] = _eval(expression, {"object": pod, "variables": values})
    return values


@functools.lru_cache(maxsize=64)
def _rule_cel(policy: Policy, rule: Rule) -> RuleCel:
    return rule_cel(policy, rule, init=_evaluating_initialiser)


@functools.lru_cache(maxsize=64)
def _warning_cel(policy: Policy, rule: Rule) -> WarningCel:
    return warning_cel(policy, rule)


@dataclass(frozen=True)
class Admission:
    """What one policy did to a pod in this engine."""

    matched: bool  # the matchCondition (opt-out) let it run
    patch: list[dict[str, Any]]
    pod: Any


def mutate(policy: Policy, rule: Rule, pod: Mapping[str, Any]) -> Admission:
    """Run one rule's MutatingAdmissionPolicy on `pod` (already selected by the objectSelector)."""
    rc = _rule_cel(policy, rule)
    matched = _eval(rc.match_condition, {"object": pod})
    if not matched:
        return Admission(False, [], pod)
    variables = _variables(rc.variables, pod)
    ops = _eval(rc.mutation, {"object": pod, "variables": variables})
    return Admission(True, ops, jsonpatch.apply_patch(copy.deepcopy(pod), ops) if ops else pod)


def warnings(policy: Policy, rule: Rule, pod: Mapping[str, Any]) -> list[str]:
    """The messages of the warn-only policy's failed validations for `pod` (after mutation)."""
    wc = _warning_cel(policy, rule)
    variables = _variables(wc.variables, pod)
    out = []
    for expression, message in wc.validations:
        data = {"object": pod, "variables": variables}
        if not _eval(expression, data):
            out.append(_eval(message, data))
    return out
