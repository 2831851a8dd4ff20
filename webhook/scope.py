"""Which namespaces and pods the registration calls the webhook for: one place for the scope
`manifests` writes (each entry's namespaceSelector, objectSelector and rules, the webhook name),
and for what `status`, `rebalance`, `explain` and `review` conclude from it.

- one webhook entry per rule, named `<rule>.netqos.io` (`webhook_name`: a fully qualified name
  with three segments, unique because rule names are), whose objectSelector is the rule's
  podSelector;
- only `CREATE` of `pods` in `v1` of the core group, namespaced (`pod_create_rule`);
- a namespaceSelector that excludes `kube-system` and the webhook's own namespace by the
  `kubernetes.io/metadata.name` label every namespace carries since Kubernetes 1.21
  (`namespace_selector`), so the webhook's own pods never wait for the webhook.
"""

from __future__ import annotations

from typing import Any

from webhook.names import DEFAULT_NAMESPACE, NAMESPACE_NAME_LABEL, WEBHOOK_DOMAIN
from webhook.policy import Rule

ALWAYS_EXCLUDED_NAMESPACES = ("kube-system",)
# The outcome for a pod in a namespace the registration excludes: the API server never calls the
# webhook for it (review and explain report it as a decision, beside the policy's own).
NOT_CALLED = "not_called"


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
