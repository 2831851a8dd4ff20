"""What `status` reads and what it reports: the cluster's objects as the command read them
(`ClusterView`, with `Unknown` where RBAC forbade a read) and the `Report` the registration and
coverage checks fill in (pure)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypedDict, TypeVar

from webhook.errors import EXIT_FOUND, EXIT_OK, EXIT_RUNTIME
from webhook.evictability import UNKNOWN_SCHEDULER
from webhook.kubeversion import KubeVersion
from webhook.policy import Policy
from webhook.scheduler.model import Profile, Target
from webhook.scheduler.plugins.netqos import NETQOS_TARGET


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
    # False when `policy` only lists the pods: the ConfigMap is unusable and what the webhook's pods
    # serve could not be told (`webhook.status.served`); the registration is then not compared with it
    policy_known: bool = True
    # MutatingAdmissionPolicies and their bindings (every one in the cluster; ours are picked here)
    admission_policies: Sequence[Mapping[str, Any]] | Unknown = ()
    admission_policy_bindings: Sequence[Mapping[str, Any]] | Unknown = ()
    # url -> the certificate (DER) a `register --url` registration's server presents there, or why
    # it could not be fetched: for an out-of-cluster webhook, what the API server would verify
    served_certificates: Mapping[str, bytes | str] = field(default_factory=dict)
    pods_namespace: str | None = None  # -n: only the pods of this namespace
    # schedulerName -> the profile its pods are judged by (`status --scheduler-config`); a pod of
    # default-scheduler without one is judged by kube-scheduler's default profile, a pod of another
    # scheduler by default-scheduler's, with `unknown_scheduler` (what to do) among its reasons
    profiles: Mapping[str, Profile] = field(default_factory=dict)
    unknown_scheduler: str = UNKNOWN_SCHEDULER
    # the cluster's release, whose scheduler `profiles` are adjusted to (None: not read), and what
    # could not be known of it (/version forbidden, a release outside those known): under `unknown`
    version: KubeVersion | None = None
    version_notes: Sequence[str] = ()

    def namespace_exists(self, namespace: str) -> bool:
        """Whether `namespace` exists; True when the Namespaces could not be read (not known otherwise)."""
        return isinstance(self.namespaces, Unknown) or namespace in self.namespaces


@dataclass(frozen=True)
class Registered:
    """What coverage needs of the registration: our webhook entries as registered, the entries
    `webhook.manifests` ships (whose namespaceSelector applies where nothing is registered), and
    the bound admission policies by rule."""

    entries: Sequence[Mapping[str, Any]]
    shipped: Sequence[Mapping[str, Any]]
    policies: Mapping[str, Mapping[str, Any]]


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
    net: str | None  # the node's value of the target's key
    why: tuple[str, ...]
    target: Target = NETQOS_TARGET  # the best class of the pod's rule (`placement.by_rule`)


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
    high_nodes: int | None = None  # the target's nodes: "high" names them in `-o json` (an API)
    target: Target = NETQOS_TARGET  # the policy's fast nodes (`netqos.fast_target`)
    missing: list[MissingPod] = field(default_factory=list)
    not_on_high: list[OffHigh] = field(default_factory=list)
    movable: int | None = None  # pods `rebalance` would move now; None when unknown
    problems: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    configuration_unknown: bool = False  # RBAC hid the MutatingWebhookConfiguration
    registration_unknown: bool = False  # neither the configuration nor the admission policies could be read
    pods_unknown: bool = False  # the pods could not be read: coverage and placement are not known
    not_installed: bool = False  # no registration, no admission policy, no Deployment

    @property
    def checked_nothing(self) -> bool:
        """RBAC hid both questions: how the webhook is registered, and the pods."""
        return self.registration_unknown and self.pods_unknown

    @property
    def exit_code(self) -> int:
        if self.checked_nothing:  # not a clean bill of health: nothing was looked at
            return EXIT_RUNTIME
        return EXIT_FOUND if self.problems or self.missing else EXIT_OK

    def note_unknown(self, value: Unknown) -> None:
        """What RBAC did not let us read: listed under `unknown`, never a problem."""
        self.unknown.append(f"cannot read {value.what} (forbidden by RBAC)")
