"""The live registration's scope (`webhook.scope.Registration`): which pods the API server would
send to the webhook (or to a bound admission policy) now, and why not, for every way a
registration can leave a pod out or be inactive. `rebalance` never evicts a pod it cannot show
would be called for."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from webhook import scope
from webhook.admission_policy import admission_policies
from webhook.manifests import webhook_configuration
from webhook.policy_file import default_policy

SERVICE = ("netqos-system", "netqos-webhook")
LABELS = {"qos": "latency-sensitive", "app": "web"}
NAMESPACES = {
    "shop": {"kubernetes.io/metadata.name": "shop", "team": "a"},
    "batch": {"kubernetes.io/metadata.name": "batch", "team": "b"},
}


def ready(count: int) -> list[dict[str, Any]]:
    return [{"endpoints": [{"addresses": [f"10.0.0.{i}"], "conditions": {"ready": True}} for i in range(count)]}]


def configuration(**changes: Any) -> dict[str, Any]:
    config = webhook_configuration(default_policy(), ca_bundle=b"-----BEGIN CERTIFICATE-----")
    for entry in config["webhooks"]:
        entry.update(copy.deepcopy(changes))
    return config


def live(config: dict[str, Any] | None = None, endpoints: int = 2, **fields: Any) -> scope.Live:
    fields.setdefault("namespaces", NAMESPACES)
    return scope.Live(config if config is not None else configuration(), {SERVICE: ready(endpoints)}, **fields)


def policies(binding_resources: dict[str, Any] | None = None, bound: bool = True) -> dict[str, Any]:
    objs = admission_policies(default_policy())
    kept = [o for o in objs if o["kind"] == "MutatingAdmissionPolicy"]
    bindings = [o for o in objs if o["kind"] == "MutatingAdmissionPolicyBinding"] if bound else []
    for b in bindings:
        if binding_resources is not None:
            b["spec"]["matchResources"] = binding_resources
    return {"admission_policies": kept, "bindings": bindings}


EXCLUDE_BATCH = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["batch"]}]}
TEAM_A = {"matchLabels": {"team": "a"}}
URL = {"url": "https://127.0.0.1:8443/mutate", "caBundle": "LS0t"}

# (case, live registration, namespace, labels, the reason: "" when the webhook is surely called)
CASES = [
    ("the shipped registration calls for a selected pod", live(), "shop", LABELS, ""),
    (
        "a namespace the registration's namespaceSelector leaves out (the chart's excludeNamespaces)",
        live(configuration(namespaceSelector=EXCLUDE_BATCH)),
        "batch",
        LABELS,
        "the registration does not call the webhook in namespace batch (namespaceSelector of webhook entry "
        "netqos.netqos.io)",
    ),
    (
        "the webhook's own namespace",
        live(),
        "netqos-system",
        LABELS,
        "the registration does not call the webhook in namespace netqos-system (namespaceSelector of webhook "
        "entry netqos.netqos.io)",
    ),
    (
        "labels no objectSelector selects",
        live(),
        "shop",
        {"app": "web"},
        "the registration does not call the webhook for its labels (objectSelector of webhook entry netqos.netqos.io)",
    ),
    (
        "a namespaceSelector on a label RBAC hides",
        live(configuration(namespaceSelector=TEAM_A), namespaces=None),
        "shop",
        LABELS,
        "cannot read namespace shop's labels (forbidden by RBAC) for webhook entry netqos.netqos.io's "
        "namespaceSelector",
    ),
    (
        "a selector on the name label alone needs no right to read Namespaces",
        live(namespaces=None),
        "shop",
        LABELS,
        "",
    ),
    (
        "a namespaceSelector on a label the namespace has",
        live(configuration(namespaceSelector=TEAM_A)),
        "shop",
        LABELS,
        "",
    ),
    (
        "matchConditions cannot be evaluated here",
        live(configuration(matchConditions=[{"name": "not-canary", "expression": "true"}])),
        "shop",
        LABELS,
        "webhook entry netqos.netqos.io calls for it only under matchConditions not-canary, which "
        "cannot be evaluated here",
    ),
    (
        "a Service with no ready endpoints",
        live(endpoints=0),
        "shop",
        LABELS,
        "no active registration calls the webhook: webhook entry netqos.netqos.io: Service "
        "netqos-webhook in namespace netqos-system has no ready endpoints: every call fails and pods are created "
        "without the preference",
    ),
    (
        "endpoints RBAC hides",
        scope.Live(configuration(), {}, namespaces=NAMESPACES),
        "shop",
        LABELS,
        "no active registration calls the webhook: webhook entry netqos.netqos.io: cannot read the "
        "endpoints of Service netqos-webhook in namespace netqos-system (forbidden by RBAC)",
    ),
    (
        "no caBundle",
        live(webhook_configuration(default_policy())),
        "shop",
        LABELS,
        "no active registration calls the webhook: webhook entry netqos.netqos.io: no caBundle: the API "
        "server cannot verify the webhook, every call fails",
    ),
    (
        "rules without CREATE of pods",
        live(
            configuration(
                rules=[{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}]
            )
        ),
        "shop",
        LABELS,
        "no active registration calls the webhook: webhook entry netqos.netqos.io: its rules do not "
        "include CREATE of pods",
    ),
    (
        "an out-of-cluster url is active",
        scope.Live(configuration(clientConfig=URL), {}, namespaces=NAMESPACES),
        "shop",
        LABELS,
        "",
    ),
    (
        "not registered",
        scope.Live(None, {}, namespaces=NAMESPACES),
        "shop",
        LABELS,
        "no active registration calls the webhook: MutatingWebhookConfiguration netqos-webhook does not exist and "
        "no MutatingAdmissionPolicy *.netqos.io is bound",
    ),
    (
        "the configuration RBAC hides",
        scope.Live(None, {}, namespaces=NAMESPACES, unreadable=("the MutatingWebhookConfiguration netqos-webhook",)),
        "shop",
        LABELS,
        "no active registration calls the webhook: cannot read the MutatingWebhookConfiguration netqos-webhook "
        "(forbidden by RBAC)",
    ),
    (
        "a bound admission policy instead of the webhook",
        scope.Live(None, {}, namespaces=NAMESPACES, **policies()),
        "shop",
        LABELS,
        "",
    ),
    (
        "an admission policy without a binding",
        scope.Live(None, {}, namespaces=NAMESPACES, **policies(bound=False)),
        "shop",
        LABELS,
        "no active registration calls the webhook: MutatingAdmissionPolicy netqos.netqos.io: no "
        "MutatingAdmissionPolicyBinding names it: the API server does not run it",
    ),
    (
        "a binding whose matchResources leaves the namespace out",
        scope.Live(None, {}, namespaces=NAMESPACES, **policies({"namespaceSelector": TEAM_A})),
        "batch",
        LABELS,
        "the registration does not call the webhook in namespace batch (namespaceSelector of "
        "MutatingAdmissionPolicy netqos.netqos.io)",
    ),
]


@pytest.mark.parametrize(("case", "registration", "namespace", "labels", "reason"), CASES, ids=[c[0] for c in CASES])
def test_why_the_api_server_would_not_call_the_webhook_for_a_pod(
    case: str, registration: scope.Live, namespace: str, labels: dict[str, str], reason: str
) -> None:
    assert scope.Registration.read(registration).why_not_called(namespace, labels) == reason


def test_an_inactive_registration_is_a_problem_for_every_pod_and_an_active_one_none() -> None:
    assert scope.Registration.read(live()).problem() == ""
    assert scope.Registration.read(live(endpoints=0)).problem().startswith("no active registration")


def test_the_services_whose_endpoints_are_read_are_the_entries_own() -> None:
    config = configuration()
    config["webhooks"][0]["clientConfig"]["service"] = {"namespace": "elsewhere", "name": "hook", "port": 443}
    assert scope.services(config) == {("elsewhere", "hook")}
    assert scope.services(configuration(clientConfig=URL)) == set()
    assert scope.services(None) == set()
