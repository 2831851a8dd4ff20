"""`status`'s first question: is the webhook registered, served and trusted? (pure)

The MutatingWebhookConfiguration has one entry `<rule>.netqos.io` per rule of the policy in force,
each with the rule's podSelector as objectSelector, a caBundle, and the failurePolicy, timeout and
namespaceSelector `webhook.manifests` ships; the Service has ready endpoints; the Deployment has
ready replicas; the serving certificate verifies against every entry's caBundle for
`netqos-webhook.<ns>.svc`, and it and the CA have 30 days or more left. Or, instead or beside it,
the admission policies `manifests --as admission-policy` makes: a MutatingAdmissionPolicy
`<rule>.netqos.io` per rule, bound, and the same as the generator makes for the policy in force.
A rule carried out by a bound policy needs no webhook entry; without a webhook configuration, its
Service, Deployment and certificate are not checked. A `register --url` registration (a webhook
outside the cluster) has no Service, Deployment or Secret: the certificate served at each URL is
checked instead, as the API server verifies it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from webhook import apidata
from webhook.admission_policy import MUTATING_KIND, mutating_policy
from webhook.apidata import ShapeError
from webhook.manifests import webhook_configuration
from webhook.names import CONFIGURATION_NAME, DEFAULT_SERVICE, RENEWAL_DAYS, TLS_SECRET, WEBHOOK_DOMAIN
from webhook.policy import Rule
from webhook.selector import label_selector_from_api
from webhook.status.model import (
    AdmissionPolicyEntry,
    Certificate,
    ClusterView,
    Entry,
    Registered,
    Report,
    Unknown,
)

if TYPE_CHECKING:  # webhook.certs imports cryptography: only when a certificate is inspected, so
    from cryptography import x509  # `status --help` stays light


DAYS_WARNING = RENEWAL_DAYS  # a certificate with fewer days left is a problem


def check(view: ClusterView, report: Report) -> Registered:
    """Check how the webhook is registered, into `report`; return what coverage needs of it."""
    shipped = webhook_configuration(view.policy, namespace=view.webhook_namespace)["webhooks"]
    if not_installed(view):
        report.not_installed = True
        ns = view.webhook_namespace
        # A namespace that does not exist is the likelier mistake (a wrong --webhook-namespace): say so.
        where = f"namespace {ns}" if view.namespace_exists(ns) else f"namespace {ns}, which does not exist"
        report.problems.append(
            f"netqos-webhook is not installed in {where} (no registration, no Deployment): "
            "no pod gets the preference; install it (kubectl apply -k deploy/base, then netqos-webhook register; or "
            "helm install), or name the namespace it runs in with --webhook-namespace NS"
        )
        return Registered([], shipped, {})
    policies = _admission_policies(view, report)
    entries = _registration(view, report, {w["name"]: w for w in shipped}, policies)
    webhook = report.configuration is not None
    report.configuration_unknown = isinstance(view.configuration, Unknown)
    report.registration_unknown = isinstance(view.configuration, Unknown) and isinstance(
        view.admission_policies, Unknown
    )
    report.installation = {
        (True, True): "webhook and admission policy",
        (True, False): "webhook",
        (False, True): "admission policy",
        (False, False): "unknown" if report.registration_unknown else "none",
    }[(webhook, bool(report.admission_policies))]
    served = [w for w in entries if apidata.obj(apidata.obj(w, "clientConfig", ""), "service", "")]
    by_url = [w for w in entries if apidata.text(apidata.obj(w, "clientConfig", ""), "url", "")]
    in_cluster = served or not by_url  # a `register --url` registration runs no Deployment, Service or Secret
    if (webhook and in_cluster) or (not webhook and not policies and not isinstance(view.configuration, Unknown)):
        _endpoints(view, report)
        _deployment(view, report)
        _certificates(view, report, served or entries)
    if by_url:
        _served_certificates(view, report, by_url)
    return Registered(entries, shipped, policies)


def not_installed(view: ClusterView) -> bool:
    """Nothing of the webhook is there: no MutatingWebhookConfiguration, no admission policy of
    ours, no Deployment (as after `helm uninstall` or `kubectl delete -k deploy/base`). What RBAC
    hides is not known to be absent, so it never counts as not installed. Then its Secret, Service
    and certificate are not checked: a certificate left behind verifies against no caBundle."""
    policies = view.admission_policies
    if view.configuration is not None or view.deployment is not None or isinstance(policies, Unknown):
        return False
    return not any(
        apidata.text(apidata.obj(p, "metadata", "metadata"), "name", "metadata.name").endswith(f".{WEBHOOK_DOMAIN}")
        for p in policies
    )


def _admission_policies(view: ClusterView, report: Report) -> dict[str, Mapping[str, Any]]:
    """Check our MutatingAdmissionPolicies (`<rule>.netqos.io`) and their bindings; return the
    bound ones by rule: the rules the API server carries out itself."""
    listed, bindings = view.admission_policies, view.admission_policy_bindings
    for value in (listed, bindings):
        if isinstance(value, Unknown):
            report.note_unknown(value)
    if isinstance(listed, Unknown):
        return {}
    bound_names = set()
    if not isinstance(bindings, Unknown):
        for binding in bindings:
            spec = apidata.obj(binding, "spec", "spec")
            bound_names.add(apidata.text(spec, "policyName", "spec.policyName"))
    rules = {r.name: r for r in view.policy.rules}
    fix = (
        "apply what netqos-webhook manifests --as admission-policy --config FILE prints for the policy in force "
        f"(policy: {view.policy_source})"
    )
    bound: dict[str, Mapping[str, Any]] = {}
    for obj in listed:
        name = apidata.text(apidata.obj(obj, "metadata", "metadata"), "name", "metadata.name")
        if not name.endswith(f".{WEBHOOK_DOMAIN}"):
            continue
        rule_name = name.removesuffix(f".{WEBHOOK_DOMAIN}")
        rule = rules.get(rule_name)
        is_bound = isinstance(bindings, Unknown) or name in bound_names
        matches = rule is not None and _same_spec(obj, mutating_policy(view.policy, rule, view.webhook_namespace))
        report.admission_policies.append(AdmissionPolicyEntry(name, rule_name, is_bound, matches))
        if not view.policy_known:  # bound or not is a fact; which rules it should carry is not known
            if is_bound:
                bound[rule_name] = obj
            continue
        if rule is None:
            report.problems.append(f"{MUTATING_KIND} {name} belongs to no rule of the policy in force; {fix}")
            continue
        if not is_bound:
            report.problems.append(
                f"{MUTATING_KIND} {name} has no binding: the API server does not run it, so pods rule {rule_name} "
                f"selects do not get the preference from it; {fix} (its MutatingAdmissionPolicyBinding)"
            )
            continue
        if not matches:
            report.problems.append(
                f"{MUTATING_KIND} {name} differs from what the generator makes for rule {rule_name}: the API server "
                f"mutates pods otherwise than the webhook would; {fix}"
            )
        bound[rule_name] = obj
    return bound


def _same_spec(have: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    """The fields the generator writes are as it writes them (selectors order-insensitive); fields
    the API server defaults are not compared."""
    spec, wanted = apidata.obj(have, "spec", "spec"), want["spec"]
    for key, value in wanted.items():
        if key == "matchConstraints":
            constraints = apidata.obj(spec, key, f"spec.{key}")
            for sub, sub_value in value.items():
                if sub.endswith("Selector"):
                    if _canonical(constraints.get(sub)) != _canonical(sub_value):
                        return False
                elif constraints.get(sub) != sub_value:
                    return False
        elif spec.get(key) != value:
            return False
    return True


def _registration(
    view: ClusterView, report: Report, shipped: Mapping[str, Any], policies: Mapping[str, Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """Check the entries; return ours (those named `*.netqos.io`). A rule a bound admission
    policy carries out needs no entry."""
    config = view.configuration
    if isinstance(config, Unknown):
        report.note_unknown(config)
        return []
    if config is None:
        if policies:
            return []
        report.problems.append(
            f"MutatingWebhookConfiguration {CONFIGURATION_NAME} does not exist: the API server calls no webhook, "
            "so no pod gets the preference; install it (kubectl apply -k deploy/base, then netqos-webhook register)"
        )
        return []
    report.configuration = CONFIGURATION_NAME
    rules = {r.name: r for r in view.policy.rules}
    webhooks: list[Mapping[str, Any]] = [
        apidata.expect(w, dict, "webhooks[]", "an object") for w in apidata.items(config, "webhooks", "webhooks")
    ]
    ours = [w for w in webhooks if apidata.text(w, "name", "webhooks[].name").endswith(f".{WEBHOOK_DOMAIN}")]
    fix = f"re-register for the policy in force: netqos-webhook register --config FILE (policy: {view.policy_source})"
    # Compared with the policy only when it is known to be the one served (`webhook.status.served`):
    # otherwise the advice would be to re-register for a policy no pod serves.
    compared: list[str] = report.problems if view.policy_known else []
    for webhook in ours:
        entry = _check_entry(webhook, rules, shipped, fix, compared)
        report.entries.append(entry)
        if not view.policy_known and not entry.ca_bundle:
            _no_ca_bundle(entry.name, report.problems)
    if not view.policy_known:
        report.unknown.append(
            f"whether MutatingWebhookConfiguration {CONFIGURATION_NAME}'s entries match the policy in force "
            "(the policy the webhook serves is not known)"
        )
        return ours
    present = {e.rule for e in report.entries} | set(policies)
    for rule_name in rules:
        if rule_name not in present:
            report.problems.append(
                f"rule {rule_name} has no webhook entry {rule_name}.{WEBHOOK_DOMAIN} in MutatingWebhookConfiguration "
                f"{CONFIGURATION_NAME}: pods only this rule selects are never sent to the webhook; {fix}"
            )
    return ours


def _check_entry(
    webhook: Mapping[str, Any], rules: Mapping[str, Rule], shipped: Mapping[str, Any], fix: str, problems: list[str]
) -> Entry:
    """One `<rule>.netqos.io` entry against its rule and the shipped entry; problems appended."""
    name = webhook["name"]
    rule_name = name.removesuffix(f".{WEBHOOK_DOMAIN}")
    rule = rules.get(rule_name)
    selector = webhook.get("objectSelector")
    matches = rule is not None and _canonical(selector) == _canonical(rule.pod_selector.to_api())
    ca_bundle = bool(_ca_bundle(webhook))
    failure_policy = apidata.text(webhook, "failurePolicy", f"{name}.failurePolicy")
    timeout = apidata.integer(webhook, "timeoutSeconds", f"{name}.timeoutSeconds")
    entry = Entry(name, rule_name, ca_bundle, matches, failure_policy, timeout)
    if rule is None:
        problems.append(f"webhook entry {name} belongs to no rule of the policy in force; {fix}")
        return entry
    if not matches:
        problems.append(
            f"webhook entry {name}: objectSelector {_show(selector)} differs from rule {rule_name}'s podSelector "
            f"{_show(rule.pod_selector.to_api())}: the API server calls the webhook for other pods than the policy "
            f"selects; {fix}"
        )
    if not ca_bundle:
        _no_ca_bundle(name, problems)
    for key in ("failurePolicy", "timeoutSeconds", "namespaceSelector"):
        have, want = webhook.get(key), shipped[name][key]
        same = _canonical(have) == _canonical(want) if key == "namespaceSelector" else have == want
        if not same:
            problems.append(f"webhook entry {name}: {key} is {_show(have)}, netqos-webhook ships {_show(want)}; {fix}")
    return entry


def _no_ca_bundle(name: str, problems: list[str]) -> None:
    problems.append(
        f"webhook entry {name} has no caBundle: the API server cannot verify the webhook, every call fails "
        "and pods are created without the preference; run netqos-webhook register, or let cert-manager's "
        "CA injector fill it (deploy/overlays/cert-manager)"
    )


def _endpoints(view: ClusterView, report: Report) -> None:
    slices = view.endpoint_slices
    if isinstance(slices, Unknown):
        report.note_unknown(slices)
        return
    ready = sum(  # an unset ready condition means ready
        1
        for s in slices
        for e in apidata.items(s, "endpoints", "endpoints")
        if apidata.boolean(apidata.obj(e, "conditions", "conditions"), "ready", "conditions.ready") is not False
    )
    report.ready_endpoints = ready
    if ready == 0:
        report.problems.append(
            f"Service {DEFAULT_SERVICE} in namespace {view.webhook_namespace} has no ready endpoints: every call "
            f"fails and pods are created without the preference; check the pods "
            f"(kubectl -n {view.webhook_namespace} get pods -l app.kubernetes.io/name=netqos-webhook)"
        )


def _deployment(view: ClusterView, report: Report) -> None:
    deployment = view.deployment
    if isinstance(deployment, Unknown):
        report.note_unknown(deployment)
        return
    ns = view.webhook_namespace
    if deployment is None:
        if not view.namespace_exists(ns):
            report.problems.append(
                f"namespace {ns} does not exist, so neither does the webhook's Deployment {DEFAULT_SERVICE}; install "
                "it (kubectl apply -k deploy/base), or name the namespace it runs in with --webhook-namespace NS"
            )
            return
        report.problems.append(
            f"Deployment {DEFAULT_SERVICE} does not exist in namespace {ns}; install it (kubectl apply -k deploy/base)"
        )
        return
    status, spec = apidata.obj(deployment, "status", "status"), apidata.obj(deployment, "spec", "spec")
    ready = apidata.integer(status, "readyReplicas", "status.readyReplicas")
    wanted = apidata.integer(spec, "replicas", "spec.replicas", 1)
    report.deployment = {"ready_replicas": ready, "replicas": wanted}
    if ready == 0:
        report.problems.append(
            f"Deployment {DEFAULT_SERVICE} in namespace {ns} has no ready replica (0/{wanted}); "
            f"see kubectl -n {ns} describe deployment {DEFAULT_SERVICE}"
        )


def _certificates(view: ClusterView, report: Report, entries: Sequence[Mapping[str, Any]]) -> None:
    from webhook.certs import first_certificate

    secret = view.secret
    ns = view.webhook_namespace
    bundles = [(w["name"], _ca_bundle(w)) for w in entries if w.get("clientConfig")]
    ca_pem: bytes | None = None
    if isinstance(secret, Unknown):
        report.note_unknown(secret)
    else:
        if secret is None:
            report.problems.append(
                f"Secret {TLS_SECRET} does not exist in namespace {ns}: the webhook has no certificate to serve; "
                "run netqos-webhook register (or use deploy/overlays/cert-manager)"
            )
        else:
            data = apidata.string_map(secret, "data", "data")
            ca_pem = _b64(data.get("ca.crt"))
            cert = first_certificate(_b64(data.get("tls.crt")))
            if cert is None:
                report.problems.append(f"Secret {TLS_SECRET} in namespace {ns} holds no PEM certificate in tls.crt")
            else:
                report.certificate = _check_certificate(cert, bundles, f"{DEFAULT_SERVICE}.{ns}.svc", view.now, report)
    if ca_pem is None and bundles and bundles[0][1]:
        ca_pem = _b64(bundles[0][1])
    ca = first_certificate(ca_pem)
    if ca is not None:
        report.ca = _validity(ca, view.now)
        if report.ca.days_left < DAYS_WARNING:
            report.problems.append(
                f"the CA certificate {_expiry(report.ca)}: a new CA needs a new caBundle; "
                "plan its rotation (docs/operations.md, Certificates)"
            )


def _served_certificates(view: ClusterView, report: Report, entries: Sequence[Mapping[str, Any]]) -> None:
    """An out-of-cluster registration: the certificate each URL serves, verified against the
    entries' caBundles for the URL's host, as the API server verifies it when it calls."""
    for url in sorted({apidata.text(apidata.obj(w, "clientConfig", ""), "url", "") for w in entries}):
        report.urls.append(url)
        served = view.served_certificates.get(url, "not fetched")
        if isinstance(served, str):
            report.problems.append(
                f"the webhook at {url} could not be reached to check its certificate: {served}; every call fails "
                "and pods are created without the preference; start it (netqos-webhook serve) or register again"
            )
            continue
        from cryptography import x509 as loader  # as webhook.certs: only when a certificate is inspected

        from webhook.certs import first_certificate

        cert = loader.load_der_x509_certificate(served)
        bundles = [(w["name"], _ca_bundle(w)) for w in entries if _url(w) == url]
        host = urlsplit(url).hostname or ""
        report.certificate = _check_certificate(cert, bundles, host, view.now, report, f"served at {url}")
        ca = first_certificate(_b64(bundles[0][1])) if bundles and bundles[0][1] else None
        if ca is not None:
            report.ca = _validity(ca, view.now)


def _url(webhook: Mapping[str, Any]) -> str:
    return apidata.text(apidata.obj(webhook, "clientConfig", "clientConfig"), "url", "clientConfig.url")


def _check_certificate(
    cert: x509.Certificate,
    bundles: Sequence[tuple[str, str]],
    server_name: str,
    now: dt.datetime,
    report: Report,
    where: str = f"in Secret {TLS_SECRET}",
) -> Certificate:
    from webhook.certs import refusal

    validity = _validity(cert, now)
    failures = []
    for name, bundle in bundles:
        why = refusal(cert, _b64(bundle) or b"", server_name, now)
        if why:
            failures.append(f"webhook entry {name}: {why}")
    verifies = bool(bundles) and not failures
    if validity.days_left < DAYS_WARNING:
        report.problems.append(
            f"the serving certificate {where} {_expiry(validity)}; renew it "
            "(netqos-webhook certs --renew-before 30, then register; cert-manager renews by itself)"
        )
    for failure in failures:
        report.problems.append(f"the serving certificate does not verify for {server_name} against {failure}")
    return dataclasses.replace(validity, verifies_against_ca_bundle=verifies)


def _validity(cert: x509.Certificate, now: dt.datetime) -> Certificate:
    from webhook.certs import days_left

    return Certificate(_rfc3339(cert.not_valid_after_utc), days_left(cert, now))


def _expiry(cert: Certificate) -> str:
    if cert.days_left < 0:
        return f"expired on {cert.not_after} ({-cert.days_left} days ago)"
    return f"expires on {cert.not_after} ({cert.days_left} days left)"


def _ca_bundle(webhook: Mapping[str, Any]) -> str:
    return apidata.text(apidata.obj(webhook, "clientConfig", "clientConfig"), "caBundle", "clientConfig.caBundle")


def _canonical(raw: Any) -> Any:
    """A selector, order-insensitive; `{}` and absent are the same (both select everything)."""
    if not isinstance(raw, Mapping):
        return raw if raw is not None else ((), ())
    try:
        selector = label_selector_from_api(raw, "objectSelector")
    except ShapeError:
        return raw
    return (
        tuple(sorted(selector.match_labels)),
        tuple(sorted(r.canonical() for r in selector.match_expressions)),
    )


def _b64(value: Any) -> bytes | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def _rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
