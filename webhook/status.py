"""`status`: does a live cluster carry out NetQoS? Pure: the cluster's API JSON in, a `Report` out.

Three questions, each answered from the objects `webhook.cluster.Reader` returned (the command
wires the two; nothing here does I/O):

1. Registration: the MutatingWebhookConfiguration has one entry `<rule>.netqos.io` per rule of the
   policy in force, each with the rule's podSelector as objectSelector, a caBundle, and the
   failurePolicy, timeout and namespaceSelector `webhook.manifests` ships; the Service has ready
   endpoints; the Deployment has ready replicas; the serving certificate verifies against every
   entry's caBundle for `netqos-webhook.<ns>.svc`, and it and the CA have 30 days or more left.
   Or, instead or beside it, the admission policies `manifests --as admission-policy` makes:
   a MutatingAdmissionPolicy `<rule>.netqos.io` per rule, bound, and the same as the generator
   makes for the policy in force. A rule carried out by a bound policy needs no webhook entry;
   without a webhook configuration, its Service, Deployment and certificate are not checked.
2. Coverage: each selected pod in an admitted namespace is classified by `webhook.policy.evaluate`,
   the decision `/mutate` makes, never a second copy of the rules: terms already there
   (`injected`), the pod's own affinity uses the rule's keys (`explicit`), `opted_out`, or the
   webhook would add terms now (`missing`: the pod was created without the preference).
3. Placement: the `net` class of each selected pod's node; for a pod not on a `net=high` node while
   one exists, why: `webhook.placement`, which ranks as `explain` does, given what the pods bound
   to the `net=high` nodes already take (NodeResourcesFit, NodePorts).

What RBAC forbids reading is `Unknown`: listed under `unknown`, never a problem. Pods and nodes
arrive as iterables and are reduced one at a time to small records, so memory grows with the
number of selected pods, not with the size of their JSON; the pods on `net=high` nodes are folded
into one usage tally per such node as they stream by. Objects are read through `webhook.apidata`:
the API server sends well-formed objects, so a `ShapeError` out of `analyse` means an API server
(or a stand-in) that sent something no Kubernetes stores.

`webhook.commands.status` reads the cluster and renders the report.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict, TypeVar
from urllib.parse import urlsplit

from webhook import apidata, owners, placement
from webhook.admission_policy import MUTATING_KIND, mutating_policy
from webhook.apidata import ShapeError
from webhook.errors import EXIT_FOUND, EXIT_OK, EXIT_RUNTIME
from webhook.manifests import webhook_configuration
from webhook.names import (
    CONFIGURATION_NAME,
    DEFAULT_SERVICE,
    NAMESPACE_NAME_LABEL,
    RENEWAL_DAYS,
    TLS_SECRET,
    WEBHOOK_DOMAIN,
)
from webhook.policy import Decision, Policy, Rule, evaluate, policy_warnings
from webhook.selector import LabelSelector, label_selector_from_api

if TYPE_CHECKING:  # webhook.certs imports cryptography: only when a certificate is inspected, so
    from cryptography import x509  # `status --help` stays light


DAYS_WARNING = RENEWAL_DAYS  # a certificate with fewer days left is a problem
COVERAGE = {
    Decision.UNCHANGED: "injected",
    Decision.SKIPPED_EXPLICIT: "explicit",
    Decision.SKIPPED_OPT_OUT: "opted_out",
    Decision.MUTATED: "missing",
}


@dataclass(frozen=True)
class Unknown:
    """What RBAC did not let us read: `what` completes "cannot read ..."."""

    what: str


class ObjectJSON(TypedDict, total=False):
    """A Kubernetes object as the API server sends it (JSON): the fields every kind has."""

    apiVersion: str
    kind: str
    metadata: dict[str, Any]


class WebhookConfigurationJSON(ObjectJSON, total=False):
    webhooks: list[dict[str, Any]]


class DeploymentJSON(ObjectJSON, total=False):
    spec: dict[str, Any]
    status: dict[str, Any]


class SecretJSON(ObjectJSON, total=False):
    type: str
    data: dict[str, str]  # base64


class ConfigMapJSON(ObjectJSON, total=False):
    data: dict[str, str]


Obj = TypeVar("Obj", bound=ObjectJSON)
# What a get returns: the object, None when it does not exist, or Unknown when RBAC forbids it.
Read: TypeAlias = Obj | None | Unknown
# (names of the net=high nodes, number of nodes) -> the pods bound to those nodes and not finished
# (a listing may hold pods of other nodes too: they are ignored), or Unknown.
PodsOnNodes = Callable[[Sequence[str], int], Iterable[Mapping[str, Any]] | Unknown]


@dataclass
class ClusterView:
    """Everything `analyse` reads. `pods` are the pods the policy's selectors listed (each pod
    once); `nodes` every Node. Both may be iterators: they are read once, one item at a time.
    `pods_on_nodes` reads what takes the net=high nodes' resources, only when a selected pod is
    not on one of them."""

    webhook_namespace: str
    policy: Policy
    policy_source: str
    configuration: Read[WebhookConfigurationJSON]
    deployment: Read[DeploymentJSON]
    endpoint_slices: Sequence[Mapping[str, Any]] | Unknown
    secret: Read[SecretJSON]
    namespaces: Mapping[str, Mapping[str, str]] | Unknown  # name -> labels
    nodes: Iterable[Mapping[str, Any]] | Unknown
    pods: Iterable[Mapping[str, Any]] | Unknown
    pods_on_nodes: PodsOnNodes
    now: dt.datetime
    policy_problem: str | None = None  # the cluster's policy could not be used
    # MutatingAdmissionPolicies and their bindings (every one in the cluster; ours are picked here)
    admission_policies: Sequence[Mapping[str, Any]] | Unknown = ()
    admission_policy_bindings: Sequence[Mapping[str, Any]] | Unknown = ()
    # url -> the certificate (DER) a `register --url` registration's server presents there, or why
    # it could not be fetched: for an out-of-cluster webhook, what the API server would verify
    served_certificates: Mapping[str, bytes | str] = field(default_factory=dict)
    pods_namespace: str | None = None  # -n: only the pods of this namespace


@dataclass(frozen=True)
class Entry:
    name: str
    rule: str
    ca_bundle: bool
    object_selector_matches_policy: bool
    failure_policy: str
    timeout_seconds: int


@dataclass(frozen=True)
class AdmissionPolicyEntry:
    """One MutatingAdmissionPolicy `<rule>.netqos.io`."""

    name: str
    rule: str
    bound: bool  # a MutatingAdmissionPolicyBinding names it: the API server runs it
    matches_policy: bool  # its spec is what the generator makes for the policy in force


@dataclass(frozen=True)
class Certificate:
    not_after: str
    days_left: int
    verifies_against_ca_bundle: bool | None = None  # None for the CA itself


@dataclass(frozen=True)
class MissingPod:
    namespace: str
    name: str
    owner: str | None  # Kind/name of the top owner (after `with_owners`), else the controller
    created: str


@dataclass(frozen=True)
class OffHigh:
    namespace: str
    name: str
    node: str  # "" while pending
    net: str | None
    why: tuple[str, ...]


@dataclass
class Report:
    installation: str = "none"  # webhook | admission policy | webhook and admission policy | none | unknown
    configuration: str | None = None  # its name; None when it does not exist, or could not be read (`unknown`)
    urls: list[str] = field(default_factory=list)  # where an out-of-cluster registration sends calls
    entries: list[Entry] = field(default_factory=list)
    admission_policies: list[AdmissionPolicyEntry] = field(default_factory=list)
    ready_endpoints: int | None = None
    deployment: dict[str, int] | None = None
    certificate: Certificate | None = None
    ca: Certificate | None = None
    policy_source: str = ""
    rules: list[str] = field(default_factory=list)
    pods: Counter[str] = field(default_factory=Counter)
    placement: Counter[str] = field(default_factory=Counter)
    high_nodes: int | None = None
    missing: list[MissingPod] = field(default_factory=list)
    not_on_high: list[OffHigh] = field(default_factory=list)
    movable: int | None = None  # pods `rebalance` would move now; None when unknown
    problems: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    configuration_unknown: bool = False  # RBAC hid the MutatingWebhookConfiguration
    registration_unknown: bool = False  # neither the configuration nor the admission policies could be read
    pods_unknown: bool = False  # the pods could not be read: coverage and placement are not known

    @property
    def checked_nothing(self) -> bool:
        """RBAC hid both questions: how the webhook is registered, and the pods."""
        return self.registration_unknown and self.pods_unknown

    @property
    def exit_code(self) -> int:
        if self.checked_nothing:  # not a clean bill of health: nothing was looked at
            return EXIT_RUNTIME
        return EXIT_FOUND if self.problems or self.missing else EXIT_OK


# ---------------------------------------------------------------------------------------------
# The analysis


def analyse(view: ClusterView) -> Report:
    report = Report(policy_source=view.policy_source, rules=[r.name for r in view.policy.rules])
    if view.policy_problem:
        report.problems.append(view.policy_problem)
    report.problems += [f"policy {view.policy_source}: {w}" for w in policy_warnings(view.policy)]
    shipped = webhook_configuration(view.policy, namespace=view.webhook_namespace)["webhooks"]
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
    _workloads(view, report, entries, shipped, policies)
    return report


def _unknown(report: Report, value: Unknown) -> None:
    report.unknown.append(f"cannot read {value.what} (forbidden by RBAC)")


def _admission_policies(view: ClusterView, report: Report) -> dict[str, Mapping[str, Any]]:
    """Check our MutatingAdmissionPolicies (`<rule>.netqos.io`) and their bindings; return the
    bound ones by rule: the rules the API server carries out itself."""
    listed, bindings = view.admission_policies, view.admission_policy_bindings
    for value in (listed, bindings):
        if isinstance(value, Unknown):
            _unknown(report, value)
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
        _unknown(report, config)
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
    for webhook in ours:
        report.entries.append(_check_entry(webhook, rules, shipped, fix, report.problems))
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
        problems.append(
            f"webhook entry {name} has no caBundle: the API server cannot verify the webhook, every call fails "
            "and pods are created without the preference; run netqos-webhook register, or let cert-manager's "
            "CA injector fill it (deploy/overlays/cert-manager)"
        )
    for key in ("failurePolicy", "timeoutSeconds", "namespaceSelector"):
        have, want = webhook.get(key), shipped[name][key]
        same = _canonical(have) == _canonical(want) if key == "namespaceSelector" else have == want
        if not same:
            problems.append(f"webhook entry {name}: {key} is {_show(have)}, netqos-webhook ships {_show(want)}; {fix}")
    return entry


def _endpoints(view: ClusterView, report: Report) -> None:
    slices = view.endpoint_slices
    if isinstance(slices, Unknown):
        _unknown(report, slices)
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
        _unknown(report, deployment)
        return
    ns = view.webhook_namespace
    if deployment is None:
        if not _namespace_exists(view, ns):
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


def _namespace_exists(view: ClusterView, namespace: str) -> bool:
    """Whether `namespace` exists; True when the Namespaces could not be read (not known otherwise)."""
    return isinstance(view.namespaces, Unknown) or namespace in view.namespaces


def _certificates(view: ClusterView, report: Report, entries: Sequence[Mapping[str, Any]]) -> None:
    from webhook.certs import first_certificate

    secret = view.secret
    ns = view.webhook_namespace
    bundles = [(w["name"], _ca_bundle(w)) for w in entries if w.get("clientConfig")]
    ca_pem: bytes | None = None
    if isinstance(secret, Unknown):
        _unknown(report, secret)
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


def _workloads(
    view: ClusterView,
    report: Report,
    entries: Sequence[Mapping[str, Any]],
    shipped: Sequence[Mapping[str, Any]],
    policies: Mapping[str, Mapping[str, Any]],
) -> None:
    nodes = None
    if isinstance(view.nodes, Unknown):
        _unknown(report, view.nodes)
    else:
        nodes = _Placement(placement.read_nodes(view.nodes), view.pods_on_nodes)
        report.high_nodes = len(nodes.nodes.high)
    if view.pods_namespace is not None and not _namespace_exists(view, view.pods_namespace):
        report.problems.append(
            f"namespace {view.pods_namespace} (-n) does not exist: it has no pods to check (kubectl get namespaces)"
        )
    if isinstance(view.pods, Unknown):
        _unknown(report, view.pods)
        report.pods_unknown = True
        return
    admits = _namespace_admission(view, entries, shipped, policies, report)
    for pod in view.pods:
        meta = apidata.obj(pod, "metadata", "metadata")
        if meta.get("deletionTimestamp") is not None:
            continue  # terminating (an evicted pod, among others): its replacement is what counts
        namespace = apidata.text(meta, "namespace", "metadata.namespace")
        labels = apidata.string_map(meta, "labels", "metadata.labels")
        if not any(r.pod_selector.matches(labels) and admits(r, namespace) for r in view.policy.rules):
            continue
        outcome = evaluate(view.policy, pod)
        coverage = COVERAGE.get(outcome.decision)
        if coverage is None:  # INVALID or ERROR: the webhook leaves such a pod alone
            report.problems.append(f"pod {namespace}/{meta.get('name')}: {'; '.join(outcome.warnings)}")
            continue
        report.pods["selected"] += 1
        report.pods[coverage] += 1
        if coverage == "missing":
            name, created = apidata.text(meta, "name", "metadata.name"), apidata.text(meta, "creationTimestamp", "")
            controller = owners.controller_of(pod)
            report.missing.append(MissingPod(namespace, name, str(controller) if controller else None, created))
        if nodes is not None:
            nodes.place(pod, report)
        elif not apidata.text(apidata.obj(pod, "spec", "spec"), "nodeName", "spec.nodeName"):
            report.placement["pending"] += 1  # no node to read: a pending pod is pending all the same
    if nodes is not None and not nodes.nodes.high and report.pods["selected"]:
        report.problems.append(
            "no node is labelled net=high: selected pods cannot be placed on a fast network; "
            "label the fast-network nodes (kubectl label node NAME net=high)"
        )


@dataclass
class _Placement:
    """The nodes, and why pods are not on a net=high one: the pods on those nodes are read on the
    first pod that needs them (none may)."""

    nodes: placement.Nodes
    pods_on_nodes: PodsOnNodes
    why_not_high: placement.WhyNotHigh | None = None

    def place(self, pod: Mapping[str, Any], report: Report) -> None:
        meta, spec = apidata.obj(pod, "metadata", "metadata"), apidata.obj(pod, "spec", "spec")
        node = apidata.text(spec, "nodeName", "spec.nodeName")
        net = self.nodes.net.get(node) if node else None
        net_class = self.nodes.net_class(node)
        report.placement[net_class] += 1
        if net_class == "high" or not self.nodes.high:
            return
        why = self._why_not_high(report)(pod)
        if not node and why == (placement.FEASIBLE_NOW,):
            why = (placement.FEASIBLE_PENDING,)
        namespace, name = (
            apidata.text(meta, "namespace", "metadata.namespace"),
            apidata.text(meta, "name", "metadata.name"),
        )
        report.not_on_high.append(OffHigh(namespace, name, node, net, why))

    def _why_not_high(self, report: Report) -> placement.WhyNotHigh:
        if self.why_not_high is None:
            high = self.nodes.high
            pods = self.pods_on_nodes([n.name for n in high], len(self.nodes.net))
            if isinstance(pods, Unknown):
                _unknown(report, pods)
                self.why_not_high = placement.WhyNotHigh(high, None)
            else:
                self.why_not_high = placement.WhyNotHigh(high, placement.high_usage(pods, high))
        return self.why_not_high


def _namespace_admission(
    view: ClusterView,
    entries: Sequence[Mapping[str, Any]],
    shipped: Sequence[Mapping[str, Any]],
    policies: Mapping[str, Mapping[str, Any]],
    report: Report,
) -> Callable[[Rule, str], bool]:
    """rule, namespace -> whether the API server would mutate the rule's pods there: the rule's
    registered entry's namespaceSelector, else its bound admission policy's, else the shipped one."""
    by_name = {w["name"]: w for w in shipped}
    for rule_name, obj in policies.items():
        constraints = apidata.obj(apidata.obj(obj, "spec", "spec"), "matchConstraints", "spec.matchConstraints")
        by_name[f"{rule_name}.{WEBHOOK_DOMAIN}"] = constraints
    by_name.update({w["name"]: w for w in entries})
    selectors: dict[str, LabelSelector] = {}
    for rule in view.policy.rules:
        entry = by_name.get(f"{rule.name}.{WEBHOOK_DOMAIN}")
        raw = entry.get("namespaceSelector") if entry is not None else None
        try:
            selectors[rule.name] = label_selector_from_api(raw, "namespaceSelector")
        except ShapeError as err:
            report.problems.append(f"webhook entry {rule.name}.{WEBHOOK_DOMAIN}: {err}")
            selectors[rule.name] = LabelSelector()
    namespaces = view.namespaces
    known: Mapping[str, Mapping[str, str]] = {}
    if isinstance(namespaces, Unknown):
        _unknown(report, namespaces)
    else:
        known = namespaces

    def admits(rule: Rule, namespace: str) -> bool:
        # Every namespace carries its name as a label (Kubernetes 1.21+): enough without list rights.
        labels = known.get(namespace) or {NAMESPACE_NAME_LABEL: namespace}
        return selectors[rule.name].matches(labels)

    return admits


def _ca_bundle(webhook: Mapping[str, Any]) -> str:
    return apidata.text(apidata.obj(webhook, "clientConfig", "clientConfig"), "caBundle", "clientConfig.caBundle")


# --- owners: the command reads what `owner_lookups` names, `with_owners` climbs one level ----------


def owner_lookups(report: Report) -> set[tuple[str, str, str]]:
    """(namespace, kind, name) of each controller that may itself be owned (ReplicaSet, Job)."""
    out = set()
    for pod in report.missing:
        if pod.owner:
            controller = owners.parse(pod.owner)
            if owners.climbs(controller):
                out.add((pod.namespace, controller.kind, controller.name))
    return out


def with_owners(report: Report, found: Mapping[tuple[str, str, str], Read[ObjectJSON]]) -> None:
    """Replace each missing pod's controller by its top owner, from the objects `found` read."""
    top: dict[tuple[str, str, str], str] = {}
    for (namespace, kind, name), obj in found.items():
        if isinstance(obj, Mapping):
            top[(namespace, kind, name)] = str(owners.top_owner(owners.Owner(kind, name), obj))
    report.missing = [
        dataclasses.replace(p, owner=top.get((p.namespace, *p.owner.partition("/")[::2]), p.owner)) if p.owner else p
        for p in report.missing
    ]


# --- small readers ------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class PolicyLocation:
    """Where the webhook's Deployment serves its policy from: the --config file, and the ConfigMap
    key the kubelet puts there, or why that file is not one status can read."""

    path: str  # the --config argument
    config_map: str | None = None  # None: the file is not a ConfigMap key
    key: str = ""
    elsewhere: str = ""  # when config_map is None: where the file comes from instead


def policy_location(deployment: Mapping[str, Any]) -> PolicyLocation | None:
    """Where the policy file the webhook's Deployment serves comes from (its --config argument,
    through the volume mounted there, as the kubelet mounts it), or None when it serves the
    built-in policy."""
    template = apidata.obj(apidata.obj(deployment, "spec", "spec"), "template", "spec.template")
    spec = apidata.obj(template, "spec", "spec.template.spec")
    volumes = {apidata.text(v, "name", "volumes[].name"): v for v in apidata.items(spec, "volumes", "volumes")}
    for container in apidata.items(spec, "containers", "containers"):
        path = _config_argument(container)
        if path is None:
            continue
        mounted = _mounted_file(container, path)
        if isinstance(mounted, str):
            return PolicyLocation(path, elsewhere=mounted)
        volume_name, file = mounted
        config_map = apidata.obj(volumes.get(volume_name, {}), "configMap", f"volumes[{volume_name}].configMap")
        if not config_map:
            kinds = sorted(k for k in volumes.get(volume_name, {}) if k != "name")
            what = f"a {kinds[0]} volume" if kinds else "a volume the pod does not define"
            return PolicyLocation(path, elsewhere=f"volume {volume_name} is {what}, not a ConfigMap")
        key = file
        for item in apidata.items(config_map, "items", "configMap.items"):
            if apidata.text(item, "path", "items[].path") == file:
                key = apidata.text(item, "key", "items[].key")
        return PolicyLocation(path, apidata.text(config_map, "name", "configMap.name"), key)
    return None


def _config_argument(container: Mapping[str, Any]) -> str | None:
    """The value of the container's last --config argument, None without one."""
    words = [*apidata.items(container, "command", "command"), *apidata.items(container, "args", "args")]
    path = None
    for i, word in enumerate(words):
        if word.startswith("--config="):
            path = word.split("=", 1)[1]
        elif word == "--config" and i + 1 < len(words):
            path = words[i + 1]
    return path


def _mounted_file(container: Mapping[str, Any], path: str) -> tuple[str, str] | str:
    """(volume name, path of the file inside the volume) for the file at `path`: the deepest
    mount holding it, as the kubelet stacks mounts. A mount with `subPath` puts that path of the
    volume at its mountPath, a single file when the argument is the mountPath itself. Otherwise
    (a str) where the file comes from instead."""
    best: Mapping[str, Any] | None = None
    for mount in apidata.items(container, "volumeMounts", "volumeMounts"):
        at = apidata.text(mount, "mountPath", "volumeMounts[].mountPath").rstrip("/")
        inside = path == at or path.startswith(f"{at}/")
        if inside and (best is None or len(at) > len(apidata.text(best, "mountPath", "mountPath").rstrip("/"))):
            best = mount
    if best is None:
        return "no volume is mounted there (a file of the image)"
    name = apidata.text(best, "name", "volumeMounts[].name")
    if apidata.text(best, "subPathExpr", "volumeMounts[].subPathExpr"):
        return f"volume {name} is mounted with subPathExpr, which only the kubelet expands"
    rest = path[len(apidata.text(best, "mountPath", "mountPath").rstrip("/")) :].strip("/")
    sub_path = apidata.text(best, "subPath", "volumeMounts[].subPath").strip("/")
    return name, "/".join(part for part in (sub_path, rest) if part)
