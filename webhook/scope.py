"""Which namespaces and pods the registration calls the webhook for: one place for the scope
`manifests` writes (each entry's namespaceSelector, objectSelector and rules, the webhook name),
and for what `status`, `rebalance`, `explain` and `review` conclude from it.

What is written:

- one webhook entry per rule, named `<rule>.netqos.io` (`webhook_name`: a fully qualified name
  with three segments, unique because rule names are), whose objectSelector is the rule's
  podSelector;
- only `CREATE` of `pods` in `v1` of the core group, namespaced (`pod_create_rule`);
- a namespaceSelector that excludes `kube-system` and the webhook's own namespace by the
  `kubernetes.io/metadata.name` label every namespace carries since Kubernetes 1.21
  (`namespace_selector`), so the webhook's own pods never wait for the webhook.

What is live (`Registration.read`, from the objects the command read): each way the API server
reaches the mutation for a pod is a `Selection`: a `<rule>.netqos.io` entry of the
MutatingWebhookConfiguration, or a bound `<rule>.netqos.io` MutatingAdmissionPolicy (its
binding's matchResources narrow it). A selection is *active* when a call would reach the
mutation: the rules include CREATE of pods; a webhook entry has a caBundle and, for a Service, ready
endpoints (a `url` is taken as reachable: `status` checks its certificate). A pod is called for
when an active selection's namespaceSelector selects its namespace (by the namespace's labels;
without the right to read Namespaces, only a selector on `kubernetes.io/metadata.name` can be
decided) and its objectSelector its labels, under no matchCondition that cannot be evaluated here
(the admission policy's own `not-opted-out` is the policy's opt-out, which `policy.evaluate` decides).
Anything that cannot be decided counts as not called: `rebalance` never evicts a pod whose
replacement it cannot show the webhook would mutate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook import apidata
from webhook.apidata import ShapeError
from webhook.names import CONFIGURATION_NAME, DEFAULT_NAMESPACE, NAMESPACE_NAME_LABEL, WEBHOOK_DOMAIN
from webhook.policy import Rule
from webhook.selector import LabelSelector, label_selector_from_api

ALWAYS_EXCLUDED_NAMESPACES = ("kube-system",)
# The outcome for a pod in a namespace the registration excludes: the API server never calls the
# webhook for it (review and explain report it as a decision, beside the policy's own).
NOT_CALLED = "not_called"
# The matchCondition `manifests --as admission-policy` gives each MutatingAdmissionPolicy: the
# policy's own opt-out, which the webhook decides the same way (`policy.evaluate`).
OPT_OUT_CONDITION = "not-opted-out"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # an EndpointSlice's Service


def webhook_name(rule_name: str) -> str:
    """The name of a rule's webhook entry, and of its MutatingAdmissionPolicy."""
    return f"{rule_name}.{WEBHOOK_DOMAIN}"


def rule_of(name: str) -> str | None:
    """The rule a webhook entry or admission policy named `name` belongs to; None when not ours."""
    suffix = f".{WEBHOOK_DOMAIN}"
    return name.removesuffix(suffix) if name.endswith(suffix) else None


def pod_create_rule() -> dict[str, Any]:
    """CREATE of pods (no subresource) in the core group's v1, namespaced."""
    return {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "operations": ["CREATE"],
        "resources": ["pods"],
        "scope": "Namespaced",
    }


def namespace_selector(namespace: str) -> dict[str, Any]:
    """Every namespace but kube-system and the webhook's own (by the name label every namespace has)."""
    excluded = list(excluded_namespaces(namespace))
    return {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": excluded}]}


def excluded_namespaces(namespace: str = DEFAULT_NAMESPACE) -> tuple[str, ...]:
    """The namespaces every entry's namespaceSelector excludes when the webhook runs in `namespace`."""
    return tuple(sorted({*ALWAYS_EXCLUDED_NAMESPACES, namespace}))


def not_called_reason(pod_namespace: str, webhook_namespace: str = DEFAULT_NAMESPACE) -> str | None:
    """Why the API server would not call the webhook for a pod created in `pod_namespace`, or None."""
    excluded = excluded_namespaces(webhook_namespace)
    if pod_namespace not in excluded:
        return None
    return (
        f"the webhook is not called: namespace {pod_namespace} is excluded by the registration's "
        f"namespaceSelector ({NAMESPACE_NAME_LABEL} NotIn {', '.join(excluded)})"
    )


def pod_scope(rule: Rule, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
    """A rule's webhook entry's scope as an admission policy's `matchConstraints`: the same
    resources, matchPolicy, namespaceSelector and objectSelector."""
    return {
        "resourceRules": [pod_create_rule()],
        "matchPolicy": "Equivalent",
        "namespaceSelector": namespace_selector(namespace),
        "objectSelector": rule.pod_selector.to_api(),
    }


# ---------------------------------------------------------------------------------------------
# The live registration


@dataclass(frozen=True)
class Live:
    """The objects the registration is read from; what RBAC hid is None and named in `unreadable`."""

    configuration: Mapping[str, Any] | None  # the MutatingWebhookConfiguration; None when absent
    endpoint_slices: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]]  # (namespace, Service) -> its slices
    admission_policies: Sequence[Mapping[str, Any]] = ()
    bindings: Sequence[Mapping[str, Any]] = ()
    namespaces: Mapping[str, Mapping[str, str]] | None = None  # name -> labels; None when unreadable
    unreadable: tuple[str, ...] = ()  # "the MutatingWebhookConfiguration netqos-webhook", ...


@dataclass(frozen=True)
class Selection:
    """One way the API server reaches the mutation for a pod: a webhook entry or a bound admission policy."""

    name: str  # "webhook entry web.netqos.io", "MutatingAdmissionPolicy web.netqos.io"
    namespace_selectors: tuple[LabelSelector, ...] = ()  # every one must select the namespace
    object_selectors: tuple[LabelSelector, ...] = ()  # every one must select the pod
    conditions: tuple[str, ...] = ()  # matchConditions that cannot be evaluated here
    inactive: str = ""  # why a call through it would not reach the mutation; "" when it would


@dataclass(frozen=True)
class Registration:
    selections: tuple[Selection, ...] = ()
    namespaces: Mapping[str, Mapping[str, str]] | None = None
    unreadable: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @classmethod
    def read(cls, live: Live) -> Registration:
        selections = [*_entries(live), *_admission_policies(live)]
        return cls(tuple(selections), live.namespaces, live.unreadable)

    @property
    def active(self) -> tuple[Selection, ...]:
        return tuple(s for s in self.selections if not s.inactive)

    def problem(self) -> str:
        """Why no pod's replacement would be mutated ("" when some selection is active)."""
        if self.active:
            return ""
        parts = [f"{s.name}: {s.inactive}" for s in self.selections]
        parts += [f"cannot read {what} (forbidden by RBAC)" for what in self.unreadable]
        if not parts:
            parts = [
                f"MutatingWebhookConfiguration {CONFIGURATION_NAME} does not exist and no MutatingAdmissionPolicy "
                f"*.{WEBHOOK_DOMAIN} is bound"
            ]
        return "no active registration calls the webhook: " + "; ".join(parts)

    def why_not_called(self, namespace: str, labels: Mapping[str, str]) -> str:
        """Why the API server would not reach the mutation for a pod created in `namespace` with
        `labels`; "" when an active selection surely calls for it."""
        problem = self.problem()
        if problem:
            return problem
        undecided: list[str] = []
        in_namespace: list[Selection] = []
        for selection in self.active:
            selected = self._namespace_selected(selection, namespace)
            if selected is None:
                undecided.append(
                    f"cannot read namespace {namespace}'s labels (forbidden by RBAC) for {selection.name}'s "
                    "namespaceSelector"
                )
                continue
            if not selected:
                continue
            in_namespace.append(selection)
            if not all(s.matches(labels) for s in selection.object_selectors):
                continue
            if selection.conditions:
                undecided.append(
                    f"{selection.name} calls for it only under matchConditions {', '.join(selection.conditions)}, "
                    "which cannot be evaluated here"
                )
                continue
            return ""
        if undecided:
            return "; ".join(undecided)
        if not in_namespace:
            names = ", ".join(s.name for s in self.active)
            return f"the registration does not call the webhook in namespace {namespace} (namespaceSelector of {names})"
        names = ", ".join(s.name for s in in_namespace)
        return f"the registration does not call the webhook for its labels (objectSelector of {names})"

    def _namespace_selected(self, selection: Selection, namespace: str) -> bool | None:
        known = self.namespaces.get(namespace) if self.namespaces is not None else None
        if known is not None:
            return all(s.matches(known) for s in selection.namespace_selectors)
        # Every namespace carries its name as a label (Kubernetes 1.21+): enough for a selector on it alone.
        if any(key != NAMESPACE_NAME_LABEL for s in selection.namespace_selectors for key in _keys(s)):
            return None if self.namespaces is None else False  # a namespace not listed does not exist
        return all(s.matches({NAMESPACE_NAME_LABEL: namespace}) for s in selection.namespace_selectors)


def ready_endpoints(slices: Sequence[Mapping[str, Any]]) -> int:
    """The ready endpoints of a Service's EndpointSlices (an unset ready condition means ready)."""
    return sum(
        1
        for s in slices
        for e in apidata.items(s, "endpoints", "endpoints")
        if apidata.boolean(apidata.obj(e, "conditions", "conditions"), "ready", "conditions.ready") is not False
    )


def services(configuration: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """(namespace, name) of the Service every `*.netqos.io` entry calls: whose endpoints to read."""
    found = set()
    for webhook in _ours(configuration):
        service = apidata.obj(apidata.obj(webhook, "clientConfig", "clientConfig"), "service", "clientConfig.service")
        if service:
            found.add(
                (apidata.text(service, "namespace", "service.namespace"), apidata.text(service, "name", "service.name"))
            )
    return found


def _ours(configuration: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    if configuration is None:
        return []
    webhooks = apidata.items(configuration, "webhooks", "webhooks")
    return [w for w in webhooks if rule_of(apidata.text(w, "name", "webhooks[].name")) is not None]


def _entries(live: Live) -> list[Selection]:
    out = []
    for webhook in _ours(live.configuration):
        name = f"webhook entry {webhook['name']}"
        try:
            selectors = (
                label_selector_from_api(webhook.get("namespaceSelector"), f"{webhook['name']}.namespaceSelector"),
                label_selector_from_api(webhook.get("objectSelector"), f"{webhook['name']}.objectSelector"),
            )
        except ShapeError as err:
            out.append(Selection(name, inactive=str(err)))
            continue
        conditions = tuple(
            apidata.text(c, "name", "matchConditions[].name") for c in apidata.items(webhook, "matchConditions", "")
        )
        out.append(Selection(name, (selectors[0],), (selectors[1],), conditions, _entry_inactive(webhook, live)))
    return out


def _entry_inactive(webhook: Mapping[str, Any], live: Live) -> str:
    if not _creates_pods(apidata.items(webhook, "rules", "rules")):
        return "its rules do not include CREATE of pods"
    config = apidata.obj(webhook, "clientConfig", "clientConfig")
    if not apidata.text(config, "caBundle", "clientConfig.caBundle"):
        return "no caBundle: the API server cannot verify the webhook, every call fails"
    service = apidata.obj(config, "service", "clientConfig.service")
    if not service:
        return ""  # a url: status checks its certificate
    key = (apidata.text(service, "namespace", "service.namespace"), apidata.text(service, "name", "service.name"))
    where = f"Service {key[1]} in namespace {key[0]}"
    slices = live.endpoint_slices.get(key)
    if slices is None:
        return f"cannot read the endpoints of {where} (forbidden by RBAC)"
    if ready_endpoints(slices) == 0:
        return f"{where} has no ready endpoints: every call fails and pods are created without the preference"
    return ""


def _admission_policies(live: Live) -> list[Selection]:
    bindings: dict[str, list[Mapping[str, Any]]] = {}
    for binding in live.bindings:
        spec = apidata.obj(binding, "spec", "spec")
        bindings.setdefault(apidata.text(spec, "policyName", "spec.policyName"), []).append(spec)
    out = []
    for obj in live.admission_policies:
        policy_name = apidata.text(apidata.obj(obj, "metadata", "metadata"), "name", "metadata.name")
        if rule_of(policy_name) is None:
            continue
        spec = apidata.obj(obj, "spec", "spec")
        constraints = apidata.obj(spec, "matchConstraints", "spec.matchConstraints")
        conditions = tuple(
            n
            for c in apidata.items(spec, "matchConditions", "spec.matchConditions")
            if (n := apidata.text(c, "name", "matchConditions[].name")) != OPT_OUT_CONDITION
        )
        found: list[Mapping[str, Any] | None] = [*bindings.get(policy_name, [])] or [None]
        out += [_policy_selection(policy_name, constraints, binding, conditions) for binding in found]
    return out


def _policy_selection(
    name: str, constraints: Mapping[str, Any], binding: Mapping[str, Any] | None, conditions: tuple[str, ...]
) -> Selection:
    what = f"MutatingAdmissionPolicy {name}"
    if binding is None:
        return Selection(what, inactive="no MutatingAdmissionPolicyBinding names it: the API server does not run it")
    if not _creates_pods(apidata.items(constraints, "resourceRules", "matchConstraints.resourceRules")):
        return Selection(what, inactive="its resourceRules do not include CREATE of pods")
    resources = apidata.obj(binding, "matchResources", "spec.matchResources")
    try:
        namespace = [label_selector_from_api(constraints.get("namespaceSelector"), f"{name}.namespaceSelector")]
        pod = [label_selector_from_api(constraints.get("objectSelector"), f"{name}.objectSelector")]
        if resources:
            namespace.append(label_selector_from_api(resources.get("namespaceSelector"), "binding.namespaceSelector"))
            pod.append(label_selector_from_api(resources.get("objectSelector"), "binding.objectSelector"))
    except ShapeError as err:
        return Selection(what, inactive=str(err))
    return Selection(what, tuple(namespace), tuple(pod), conditions)


def _creates_pods(rules: Sequence[Any]) -> bool:
    """Whether the rules include CREATE of pods in the core group's v1 (or wildcards for them)."""
    for rule in rules:
        if not isinstance(rule, Mapping):
            continue

        def has(key: str, value: str, rule: Mapping[str, Any] = rule) -> bool:
            values = rule.get(key) or []
            return value in values or "*" in values

        if (
            has("operations", "CREATE")
            and has("resources", "pods")
            and has("apiGroups", "")
            and has("apiVersions", "v1")
        ):
            return True
    return False


def _keys(selector: LabelSelector) -> list[str]:
    return [k for k, _ in selector.match_labels] + [r.key for r in selector.match_expressions]
