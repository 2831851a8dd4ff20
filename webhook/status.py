"""`status`: does a live cluster carry out NetQoS? Pure: the cluster's API JSON in, a `Report` out.

Three questions, each answered from the objects `webhook.cluster.Reader` returned (the command
wires the two; nothing here does I/O):

1. Registration: the MutatingWebhookConfiguration has one entry `<rule>.netqos.io` per rule of the
   policy in force, each with the rule's podSelector as objectSelector, a caBundle, and the
   failurePolicy, timeout and namespaceSelector `webhook.manifests` ships; the Service has ready
   endpoints; the Deployment has ready replicas; the serving certificate verifies against every
   entry's caBundle for `netqos-webhook.<ns>.svc`, and it and the CA have 30 days or more left.
2. Coverage: each selected pod in an admitted namespace is classified by `webhook.policy.evaluate`,
   the decision `/mutate` makes, never a second copy of the rules: terms already there
   (`injected`), the pod's own affinity uses the rule's keys (`explicit`), `opted_out`, or the
   webhook would add terms now (`missing`: the pod was created without the preference).
3. Placement: the `net` class of each selected pod's node; for a pod not on a `net=high` node while
   one exists, why, from `webhook.scheduling` exactly as `explain` ranks nodes (`_why_not_high`
   is the one place that ranks), given what the pods bound to the `net=high` nodes already take
   (NodeResourcesFit, NodePorts).

What RBAC forbids reading is `Unknown`: listed under `unknown`, never a problem. Pods and nodes
arrive as iterables and are reduced one at a time to small records, so memory grows with the
number of selected pods, not with the size of their JSON; the pods on `net=high` nodes are folded
into one usage tally per such node as they stream by.
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
from typing import Any

import orjson
from cryptography import x509
from cryptography.exceptions import InvalidSignature

from webhook import scheduling
from webhook.affinity import REQUIRED, requirements_from_api
from webhook.apidata import ShapeError
from webhook.manifests import webhook_configuration
from webhook.names import CONFIGURATION_NAME, DEFAULT_SERVICE, NAMESPACE_NAME_LABEL, TLS_SECRET, WEBHOOK_DOMAIN
from webhook.policy import Decision, Policy, Rule, evaluate
from webhook.selector import LabelSelector

DAYS_WARNING = 30  # a certificate with fewer days left is a problem
NET_CLASSES = ("high", "other", "unlabelled", "low", "pending")
COVERAGE = {
    Decision.UNCHANGED: "injected",
    Decision.SKIPPED_EXPLICIT: "explicit",
    Decision.SKIPPED_OPT_OUT: "opted_out",
    Decision.MUTATED: "missing",
}
FEASIBLE_NOW = (
    "a net=high node is feasible now: the pod was placed when none was, "
    "or other score plugins outweighed the preference (run explain)"
)
FEASIBLE_WITHOUT_USAGE = (
    "a net=high node passes the filters that do not depend on the pods on it "
    "(resource fit and host ports not evaluated: the pods on net=high nodes could not be read)"
)
FEASIBLE_PENDING = (
    "a net=high node is feasible now: the scheduler has not bound the pod yet "
    "(kubectl describe pod shows its FailedScheduling events)"
)
USAGE_TEMPLATES = 4096  # distinct pod specs remembered while tallying the pods on net=high nodes
EXIT_OK = 0
EXIT_PROBLEMS = 3
# A top owner's kind -> how to recreate its pods (the table prints it; status never runs it).
RECREATE = {
    "Deployment": "kubectl -n {ns} rollout restart deployment/{name}",
    "StatefulSet": "kubectl -n {ns} rollout restart statefulset/{name}",
    "DaemonSet": "kubectl -n {ns} rollout restart daemonset/{name}",
    "CronJob": "the next Job of cronjob/{name} is covered; its running pods keep their placement",
    "Job": "kubectl -n {ns} delete job {name}, then create it again",
    "ReplicaSet": "kubectl -n {ns} delete pods of replicaset/{name}; it creates new ones",
}


@dataclass(frozen=True)
class Unknown:
    """What RBAC did not let us read: `what` completes "cannot read ..."."""

    what: str


Read = Any  # a decoded object, None when it does not exist, or Unknown
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
    configuration: Read
    deployment: Read
    endpoint_slices: Sequence[Mapping[str, Any]] | Unknown
    secret: Read
    namespaces: Mapping[str, Mapping[str, str]] | Unknown  # name -> labels
    nodes: Iterable[Mapping[str, Any]] | Unknown
    pods: Iterable[Mapping[str, Any]] | Unknown
    pods_on_nodes: PodsOnNodes
    now: dt.datetime
    policy_problem: str | None = None  # the cluster's policy could not be used


@dataclass(frozen=True)
class Entry:
    name: str
    rule: str
    ca_bundle: bool
    object_selector_matches_policy: bool
    failure_policy: str
    timeout_seconds: int


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
    configuration: str | None = None
    entries: list[Entry] = field(default_factory=list)
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
    problems: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_PROBLEMS if self.problems or self.missing else EXIT_OK


# ---------------------------------------------------------------------------------------------
# The analysis


def analyse(view: ClusterView) -> Report:
    report = Report(policy_source=view.policy_source, rules=[r.name for r in view.policy.rules])
    if view.policy_problem:
        report.problems.append(view.policy_problem)
    shipped = webhook_configuration(view.policy, namespace=view.webhook_namespace)["webhooks"]
    entries = _registration(view, report, {w["name"]: w for w in shipped})
    _endpoints(view, report)
    _deployment(view, report)
    _certificates(view, report, entries)
    _workloads(view, report, entries, shipped)
    return report


def _unknown(report: Report, value: Any) -> bool:
    if isinstance(value, Unknown):
        report.unknown.append(f"cannot read {value.what} (forbidden by RBAC)")
        return True
    return False


def _registration(view: ClusterView, report: Report, shipped: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Check the entries; return ours (those named `*.netqos.io`)."""
    config = view.configuration
    if _unknown(report, config):
        return []
    if config is None:
        report.problems.append(
            f"MutatingWebhookConfiguration {CONFIGURATION_NAME} does not exist: the API server calls no webhook, "
            "so no pod gets the preference; install it (kubectl apply -k deploy/base, then netqos-webhook register)"
        )
        return []
    report.configuration = CONFIGURATION_NAME
    rules = {r.name: r for r in view.policy.rules}
    ours = [w for w in config.get("webhooks") or () if str(w.get("name", "")).endswith(f".{WEBHOOK_DOMAIN}")]
    fix = f"re-register for the policy in force: netqos-webhook register --config FILE (policy: {view.policy_source})"
    for webhook in ours:
        report.entries.append(_check_entry(webhook, rules, shipped, fix, report.problems))
    present = {e.rule for e in report.entries}
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
    ca_bundle = bool((webhook.get("clientConfig") or {}).get("caBundle"))
    entry = Entry(
        name, rule_name, ca_bundle, matches, str(webhook.get("failurePolicy", "")), _int(webhook, "timeoutSeconds")
    )
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
    ready = sum(
        1
        for s in slices
        for e in s.get("endpoints") or ()
        if (e.get("conditions") or {}).get("ready") is not False  # unset means ready
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
    if _unknown(report, deployment):
        return
    ns = view.webhook_namespace
    if deployment is None:
        report.problems.append(
            f"Deployment {DEFAULT_SERVICE} does not exist in namespace {ns}; install it (kubectl apply -k deploy/base)"
        )
        return
    status, spec = deployment.get("status") or {}, deployment.get("spec") or {}
    ready, wanted = _int(status, "readyReplicas"), _int(spec, "replicas", 1)
    report.deployment = {"ready_replicas": ready, "replicas": wanted}
    if ready == 0:
        report.problems.append(
            f"Deployment {DEFAULT_SERVICE} in namespace {ns} has no ready replica (0/{wanted}); "
            f"see kubectl -n {ns} describe deployment {DEFAULT_SERVICE}"
        )


def _certificates(view: ClusterView, report: Report, entries: Sequence[Mapping[str, Any]]) -> None:
    secret = view.secret
    ns = view.webhook_namespace
    bundles = [(w["name"], (w.get("clientConfig") or {}).get("caBundle")) for w in entries if w.get("clientConfig")]
    ca_pem: bytes | None = None
    if not _unknown(report, secret):
        if secret is None:
            report.problems.append(
                f"Secret {TLS_SECRET} does not exist in namespace {ns}: the webhook has no certificate to serve; "
                "run netqos-webhook register (or use deploy/overlays/cert-manager)"
            )
        else:
            data = secret.get("data") or {}
            ca_pem = _b64(data.get("ca.crt"))
            cert = _first_certificate(_b64(data.get("tls.crt")))
            if cert is None:
                report.problems.append(f"Secret {TLS_SECRET} in namespace {ns} holds no PEM certificate in tls.crt")
            else:
                report.certificate = _check_certificate(cert, bundles, f"{DEFAULT_SERVICE}.{ns}.svc", view.now, report)
    if ca_pem is None and bundles and bundles[0][1]:
        ca_pem = _b64(bundles[0][1])
    ca = _first_certificate(ca_pem)
    if ca is not None:
        report.ca = _validity(ca, view.now)
        if report.ca.days_left < DAYS_WARNING:
            report.problems.append(
                f"the CA certificate {_expiry(report.ca)}: a new CA needs a new caBundle; "
                "plan its rotation (docs/operations.md, Certificates)"
            )


def _check_certificate(
    cert: x509.Certificate, bundles: Sequence[tuple[str, Any]], server_name: str, now: dt.datetime, report: Report
) -> Certificate:
    validity = _validity(cert, now)
    failures = []
    for name, bundle in bundles:
        why = _verify(cert, _b64(bundle) or b"", server_name, now)
        if why:
            failures.append(f"webhook entry {name}: {why}")
    verifies = bool(bundles) and not failures
    if validity.days_left < DAYS_WARNING:
        report.problems.append(
            f"the serving certificate in Secret {TLS_SECRET} {_expiry(validity)}; renew it "
            "(netqos-webhook certs --renew-before 30, then register; cert-manager renews by itself)"
        )
    for failure in failures:
        report.problems.append(f"the serving certificate does not verify for {server_name} against {failure}")
    return dataclasses.replace(validity, verifies_against_ca_bundle=verifies)


def _verify(cert: x509.Certificate, bundle: bytes, server_name: str, now: dt.datetime) -> str | None:
    """Why the API server would refuse `cert` for `server_name` trusting `bundle`, or None."""
    try:
        cas = x509.load_pem_x509_certificates(bundle)
    except ValueError:
        return "its caBundle holds no PEM certificate"
    if not any(_signed_by(cert, ca) for ca in cas):
        return "no certificate in its caBundle signed it (a stale caBundle, or a new CA)"
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        return "the certificate is not valid now"
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return f"it has no subjectAltName (needs {server_name})"
    if server_name not in names.get_values_for_type(x509.DNSName):
        return f"its subjectAltName does not name {server_name}"
    return None


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _validity(cert: x509.Certificate, now: dt.datetime) -> Certificate:
    after = cert.not_valid_after_utc
    return Certificate(_rfc3339(after), (after - now).days)


def _expiry(cert: Certificate) -> str:
    if cert.days_left < 0:
        return f"expired on {cert.not_after} ({-cert.days_left} days ago)"
    return f"expires on {cert.not_after} ({cert.days_left} days left)"


# --- pods and nodes ---------------------------------------------------------------------------------


@dataclass
class _Nodes:
    net: dict[str, str | None]  # node name -> its net label
    high: list[scheduling.Node]
    # What the pods on each net=high node take: read on first need; None when RBAC forbids it.
    usage: dict[str, scheduling.NodeUsage] | None = None
    usage_read: bool = False


def _workloads(
    view: ClusterView, report: Report, entries: Sequence[Mapping[str, Any]], shipped: Sequence[Mapping[str, Any]]
) -> None:
    nodes = None
    if isinstance(view.nodes, Unknown):
        _unknown(report, view.nodes)
    else:
        nodes = _read_nodes(view.nodes)
        report.high_nodes = len(nodes.high)
    if isinstance(view.pods, Unknown):
        _unknown(report, view.pods)
        return
    admits = _namespace_admission(view, entries, shipped, report)
    reasons_cache: dict[bytes, tuple[str, ...]] = {}
    for pod in view.pods:
        meta = pod.get("metadata") or {}
        namespace, labels = meta.get("namespace", ""), meta.get("labels") or {}
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
            report.missing.append(
                MissingPod(namespace, meta.get("name", ""), _controller(meta), meta.get("creationTimestamp", ""))
            )
        if nodes is not None:
            _place(pod, nodes, view.pods_on_nodes, report, reasons_cache)
    if nodes is not None and not nodes.high and report.pods["selected"]:
        report.problems.append(
            "no node is labelled net=high: selected pods cannot be placed on a fast network; "
            "label the fast-network nodes (kubectl label node NAME net=high)"
        )


def _read_nodes(items: Iterable[Mapping[str, Any]]) -> _Nodes:
    nodes = _Nodes({}, [])
    for item in items:
        meta = item.get("metadata") or {}
        net = (meta.get("labels") or {}).get(scheduling.NETQOS_NODE_LABEL)
        nodes.net[meta.get("name", "")] = net
        if net == "high":
            try:
                nodes.high.append(scheduling.node_from_api(item))
            except ShapeError:  # a node the scheduler could not read either: it places nothing
                continue
    return nodes


def _high_usage(
    pods: Iterable[Mapping[str, Any]] | Unknown, high: Sequence[scheduling.Node]
) -> dict[str, scheduling.NodeUsage] | Unknown:
    """Each net=high node's usage by the pods bound to it (NodeInfo.Requested, UsedPorts), folded
    one pod at a time: memory holds one tally per high node, never the pods. What a pod takes
    depends on its containers, overhead and pod-level resources only, so pods of one template are
    read once (at most USAGE_TEMPLATES of them are remembered)."""
    if isinstance(pods, Unknown):
        return pods
    tallies = {node.name: scheduling.UsageTally() for node in high}
    views: dict[bytes, scheduling.PodView] = {}
    for pod in pods:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        tally = tallies.get(spec.get("nodeName") or "") if isinstance(spec, Mapping) else None
        if tally is None or (isinstance(status, Mapping) and status.get("phase") in ("Succeeded", "Failed")):
            continue
        key = orjson.dumps([spec.get(f) for f in ("containers", "initContainers", "overhead", "resources")])
        view = views.get(key)
        if view is None:
            try:
                view = scheduling.pod_view(pod)
            except ShapeError:  # the API server stores no such pod; one that slipped in takes nothing here
                continue
            if len(views) < USAGE_TEMPLATES:
                views[key] = view
        tally.add(view)
    return {name: tally.usage() for name, tally in tallies.items()}


def _place(
    pod: Mapping[str, Any],
    nodes: _Nodes,
    pods_on_nodes: PodsOnNodes,
    report: Report,
    cache: dict[bytes, tuple[str, ...]],
) -> None:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    node = spec.get("nodeName") or ""
    if not node:
        net_class, net = "pending", None
    else:
        net = nodes.net.get(node)
        net_class = "unlabelled" if net is None else net if net in ("high", "low") else "other"
    report.placement[net_class] += 1
    if net_class != "high" and nodes.high:
        if not nodes.usage_read:
            nodes.usage_read = True
            usage = _high_usage(pods_on_nodes([n.name for n in nodes.high], len(nodes.net)), nodes.high)
            if isinstance(usage, Unknown):
                _unknown(report, usage)
            else:
                nodes.usage = usage
        why = _why_not_high(pod, nodes.high, nodes.usage, cache)
        if not node and why == (FEASIBLE_NOW,):
            why = (FEASIBLE_PENDING,)
        report.not_on_high.append(OffHigh(meta.get("namespace", ""), meta.get("name", ""), node, net, why))


def _why_not_high(
    pod: Mapping[str, Any],
    high: Sequence[scheduling.Node],
    usage: Mapping[str, scheduling.NodeUsage] | None,
    cache: dict[bytes, tuple[str, ...]],
) -> tuple[str, ...]:
    """Why `pod` is not on a net=high node: the filter reasons of every high node for it now (as
    if it were scheduled again, so its own spec.nodeName is left out), from the ranking `explain`
    shows, given what the pods on the high nodes take (`usage`, None when unknown). The pod in
    question is on no high node, so it is never counted in `usage`: as `node_filter_reasons`, it
    does not compete with itself. Reasons are counted per node as the scheduler's FitError does.

    The one use of `webhook.scheduling` here. Pods of one template share the answer, cached under
    `_filter_key`: a pod is only read (`pod_view`, the costly part) for a key not seen yet.
    """
    key = _filter_key(pod)
    if key not in cache:
        try:
            view = dataclasses.replace(scheduling.pod_view(pod), node_name="")
        except ShapeError as err:  # not cached: the error may be in a field the key leaves out
            return (f"cannot evaluate the pod's scheduling fields: {err}",)
        ranking = scheduling.rank(view, high, usage)
        if ranking.feasible:
            cache[key] = (FEASIBLE_NOW if usage is not None else FEASIBLE_WITHOUT_USAGE,)
        else:
            counts = Counter(r for n in ranking.nodes for r in n.reasons)
            total = len(high)
            cache[key] = tuple(sorted(f"{c}/{total} net=high node(s): {r}" for r, c in counts.items()))
    return cache[key]


def _filter_key(pod: Mapping[str, Any]) -> bytes:
    """The pod fields PreFilter and Filter read (`scheduling.filter_reasons`): node selector,
    required node affinity, tolerations; the requests of containers, init containers, overhead and
    pod-level resources; host ports. Containers go in whole, a superset of what is read, so the key
    cannot go stale when the filters read another container field, and pods of one template still
    share it. spec.nodeName is left out: the pod is judged as if unbound."""
    spec = pod.get("spec") or {}
    if not isinstance(spec, Mapping):
        return orjson.dumps([spec])
    affinity = spec.get("affinity") or {}
    node_affinity = (affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else affinity) or {}
    required = node_affinity.get(REQUIRED) if isinstance(node_affinity, Mapping) else node_affinity
    fields = ("nodeSelector", "tolerations", "containers", "initContainers", "overhead", "resources")
    return orjson.dumps([required, *(spec.get(f) for f in fields)], option=orjson.OPT_SORT_KEYS)


def _namespace_admission(
    view: ClusterView, entries: Sequence[Mapping[str, Any]], shipped: Sequence[Mapping[str, Any]], report: Report
) -> Callable[[Rule, str], bool]:
    """rule, namespace -> whether the API server would call the webhook there: the rule's
    registered entry's namespaceSelector (the shipped one when there is no entry)."""
    by_name = {w["name"]: w for w in shipped}
    by_name.update({w["name"]: w for w in entries})
    selectors: dict[str, LabelSelector] = {}
    for rule in view.policy.rules:
        raw = by_name.get(f"{rule.name}.{WEBHOOK_DOMAIN}", {}).get("namespaceSelector")
        try:
            selectors[rule.name] = _selector(raw)
        except ShapeError as err:
            report.problems.append(f"webhook entry {rule.name}.{WEBHOOK_DOMAIN}: namespaceSelector: {err}")
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


def _controller(meta: Mapping[str, Any]) -> str | None:
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            return f"{ref.get('kind')}/{ref.get('name')}"
    return None


# --- owners: the command reads what `owner_lookups` names, `with_owners` climbs one level ----------

CLIMB = {"ReplicaSet": "Deployment", "Job": "CronJob"}


def owner_lookups(report: Report) -> set[tuple[str, str, str]]:
    """(namespace, kind, name) of each controller that may itself be owned (ReplicaSet, Job)."""
    out = set()
    for pod in report.missing:
        if pod.owner:
            kind, _, name = pod.owner.partition("/")
            if kind in CLIMB:
                out.add((pod.namespace, kind, name))
    return out


def with_owners(report: Report, found: Mapping[tuple[str, str, str], Read]) -> None:
    """Replace each missing pod's controller by its top owner, from the objects `found` read."""
    top: dict[tuple[str, str, str], str] = {}
    for key, obj in found.items():
        if isinstance(obj, Mapping):
            owner = _controller(obj.get("metadata") or {})
            if owner and owner.partition("/")[0] == CLIMB[key[1]]:
                top[key] = owner
    report.missing = [
        dataclasses.replace(p, owner=top.get((p.namespace, *p.owner.partition("/")[::2]), p.owner)) if p.owner else p
        for p in report.missing
    ]


# ---------------------------------------------------------------------------------------------
# Output


def to_json(report: Report) -> dict[str, Any]:
    """The documented shape (README, "Check it works in your cluster"); keys may be added, never changed."""

    def cert(c: Certificate | None, verified: bool) -> dict[str, Any] | None:
        if c is None:
            return None
        out: dict[str, Any] = {"not_after": c.not_after, "days_left": c.days_left}
        if verified:
            out["verifies_against_ca_bundle"] = bool(c.verifies_against_ca_bundle)
        return out

    return {
        "webhook": {
            "configuration": report.configuration,
            "entries": [dataclasses.asdict(e) for e in report.entries],
            "ready_endpoints": report.ready_endpoints,
            "deployment": report.deployment,
            "certificate": cert(report.certificate, True),
            "ca": cert(report.ca, False),
        },
        "policy": {"source": report.policy_source, "rules": report.rules},
        "pods": {k: report.pods[k] for k in ("selected", "injected", "explicit", "opted_out", "missing")},
        "placement": {k: report.placement[k] for k in NET_CLASSES},
        "high_nodes": report.high_nodes,
        # Built by hand: dataclasses.asdict deep-copies, which costs seconds for 30,000 pods.
        "missing": [
            {"namespace": p.namespace, "name": p.name, "owner": p.owner, "created": p.created} for p in report.missing
        ],
        "not_on_high": [
            {"namespace": p.namespace, "name": p.name, "node": p.node, "net": p.net, "why": list(p.why)}
            for p in report.not_on_high
        ],
        "problems": report.problems,
        "unknown": report.unknown,
    }


def render_json(report: Report) -> str:
    return orjson.dumps(to_json(report), option=orjson.OPT_INDENT_2).decode() + "\n"


def render_table(report: Report, limit: int = 20) -> str:
    """For people: registration first, then counts, then the pods to act on (lists cut at `limit`)."""
    lines = ["WEBHOOK"]
    lines.append(f"  configuration     {report.configuration or 'MISSING'}")
    for e in report.entries:
        flags = [
            "caBundle " + ("ok" if e.ca_bundle else "EMPTY"),
            "objectSelector " + ("= policy" if e.object_selector_matches_policy else "DRIFTED"),
            f"failurePolicy {e.failure_policy}",
            f"timeout {e.timeout_seconds}s",
        ]
        lines.append(f"  entry {e.name:<12} rule {e.rule}: {', '.join(flags)}")
    lines.append(f"  ready endpoints   {_or_unknown(report.ready_endpoints)}")
    if report.deployment is not None:
        lines.append(f"  deployment        {report.deployment['ready_replicas']}/{report.deployment['replicas']} ready")
    if report.certificate is not None:
        c = report.certificate
        verifies = "verifies against caBundle" if c.verifies_against_ca_bundle else "does NOT verify against caBundle"
        lines.append(f"  certificate       until {c.not_after} ({c.days_left} days), {verifies}")
    if report.ca is not None:
        lines.append(f"  CA                until {report.ca.not_after} ({report.ca.days_left} days)")
    lines.append(f"  policy            {report.policy_source}: rules {', '.join(report.rules) or '-'}")
    lines.append("")
    p = report.pods
    lines.append(
        f"PODS      selected {p['selected']}: injected {p['injected']}, explicit {p['explicit']}, "
        f"opted out {p['opted_out']}, missing {p['missing']}"
    )
    lines.append("PLACEMENT " + ", ".join(f"{k} {report.placement[k]}" for k in NET_CLASSES))
    if report.missing:
        lines += ["", "MISSING THE PREFERENCE (created without it; recreate to fix)"]
        groups: dict[tuple[str, str | None], list[MissingPod]] = {}
        for pod in report.missing:
            groups.setdefault((pod.namespace, pod.owner), []).append(pod)
        for (ns, owner), pods in _cut(sorted(groups.items(), key=lambda g: (g[0][0], g[0][1] or "")), limit, lines):
            oldest = min(p.created for p in pods)
            names = ", ".join(p.name for p in pods[:3]) + (f" and {len(pods) - 3} more" if len(pods) > 3 else "")
            lines.append(f"  {ns}/{owner or 'Pod (no owner)'}: {len(pods)} pod(s) created since {oldest}: {names}")
            lines.append(f"    recreate: {_recreate(ns, owner, pods)}")
    if report.not_on_high:
        lines += ["", "NOT ON A net=high NODE"]
        for pod in _cut(report.not_on_high, limit, lines):
            where = f"on {pod.node} (net={pod.net or '<none>'})" if pod.node else "pending"
            lines.append(f"  {pod.namespace}/{pod.name} {where}: {'; '.join(pod.why)}")
    lines += ["", f"PROBLEMS ({len(report.problems)})" if report.problems else "PROBLEMS none"]
    lines += [f"  - {problem}" for problem in report.problems]
    lines += [f"  ? {u}" for u in report.unknown]
    lines += [
        "",
        f"RESULT {len(report.problems)} problem(s), {len(report.missing)} pod(s) missing the preference: "
        f"exit {report.exit_code}",
    ]
    return "\n".join(lines) + "\n"


def _cut(items: Sequence[Any], limit: int, lines: list[str]) -> Iterable[Any]:
    yield from items[:limit]
    if len(items) > limit:
        lines.append(f"  ... and {len(items) - limit} more (-o json lists all)")


def _recreate(ns: str, owner: str | None, pods: Sequence[MissingPod]) -> str:
    if owner is None:
        return f"delete and re-create the pod(s) from their manifests (kubectl -n {ns} delete pod {pods[0].name} ...)"
    kind, _, name = owner.partition("/")
    return RECREATE.get(kind, "recreate them through their owner {kind}/{name}").format(ns=ns, name=name, kind=kind)


def _or_unknown(value: Any) -> str:
    return "unknown" if value is None else str(value)


# --- small readers ------------------------------------------------------------------------------


def _selector(raw: Any) -> LabelSelector:
    """A LabelSelector from API data (None selects everything)."""
    if raw is None:
        return LabelSelector()
    if not isinstance(raw, Mapping):
        raise ShapeError("(selector)", "an object", raw)
    labels = raw.get("matchLabels") or {}
    exprs = requirements_from_api(raw.get("matchExpressions"), "matchExpressions")
    return LabelSelector(tuple(labels.items()), exprs)


def _canonical(raw: Any) -> Any:
    """A selector, order-insensitive; `{}` and absent are the same (both select everything)."""
    if not isinstance(raw, Mapping):
        return raw if raw is not None else ((), ())
    try:
        selector = _selector(raw)
    except ShapeError:
        return raw
    return (
        tuple(sorted(selector.match_labels)),
        tuple(sorted(r.canonical() for r in selector.match_expressions)),
    )


def _int(obj: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = obj.get(key)
    return value if isinstance(value, int) else default


def _b64(value: Any) -> bytes | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def _first_certificate(pem: bytes | None) -> x509.Certificate | None:
    if not pem:
        return None
    try:
        return x509.load_pem_x509_certificates(pem)[0]
    except ValueError:
        return None


def _rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def policy_location(deployment: Mapping[str, Any]) -> tuple[str, str] | None:
    """(ConfigMap name, key) of the policy file the webhook's Deployment serves (its --config
    argument, through the volume mounted there), or None when it serves the built-in policy."""
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in spec.get("containers") or ():
        words = [*(container.get("command") or ()), *(container.get("args") or ())]
        path = None
        for i, word in enumerate(words):
            if word.startswith("--config="):
                path = word.split("=", 1)[1]
            elif word == "--config" and i + 1 < len(words):
                path = words[i + 1]
        if path is None:
            continue
        for mount in container.get("volumeMounts") or ():
            prefix = mount.get("mountPath", "").rstrip("/") + "/"
            if not path.startswith(prefix):
                continue
            key = mount.get("subPath") or path[len(prefix) :]
            for volume in spec.get("volumes") or ():
                if volume.get("name") == mount.get("name") and volume.get("configMap"):
                    config_map = volume["configMap"]
                    for item in config_map.get("items") or ():
                        if item.get("path") == key:
                            key = item.get("key")
                    return config_map.get("name"), key
    return None
