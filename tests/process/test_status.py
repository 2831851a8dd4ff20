"""`netqos-webhook status` against a fake Kubernetes API server on loopback (harness/kubeapi.py),
through the real `kubernetes` client and a kubeconfig: each cluster snapshot below is one state a
real installation can be in, and the JSON report and exit code are asserted exactly.

The installation is deploy/base as shipped (its Deployment, its generated webhook configuration,
its policy), with certificates of fixed dates, so the report is the same on every day the clock
is fixed to.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import kubeapi
from harness.kubeapi import Snapshot, issue_tls, node, pod, workload
from tests.fixtures import CLASSIC_TERMS, FIXTURES, NETQOS_TERMS, REPO
from webhook.admission_policy import admission_policies as generate_admission_policies
from webhook.affinity import Requirement
from webhook.cli import main
from webhook.commands.clusterread import label_selector
from webhook.commands.rebalance import RebalanceArgs
from webhook.commands.rebalance import run as rebalance_run
from webhook.commands.status import StatusArgs, run
from webhook.manifests import webhook_configuration
from webhook.policy import evaluate
from webhook.policy_file import load_policy
from webhook.selector import LabelSelector

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
NS = "netqos-system"
SERVICE_NAMES = ["netqos-webhook", f"netqos-webhook.{NS}", f"netqos-webhook.{NS}.svc"]
QOS = {"qos": "latency-sensitive", "app": "web"}
OWN_NET = [{"weight": 50, "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["fast"]}]}}]
TOLERATE_HIGH = [{"key": "dedicated", "operator": "Equal", "value": "fast", "effect": "NoSchedule"}]


def shipped(path: str) -> Any:
    return yaml.safe_load((REPO / path).read_text())


@pytest.fixture(scope="module")
def tls() -> kubeapi.TLS:
    return issue_tls(SERVICE_NAMES, "2025-01-01", "2034-01-01")


# The pod template of the workloads' controllers: what `rebalance`'s prediction (status's movable
# count) makes each replacement from.
TEMPLATE = {"metadata": {"labels": QOS}, "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}}


class Cluster:
    """A snapshot under construction: the shipped installation, nodes and pods."""

    def __init__(self, tls: kubeapi.TLS) -> None:
        self.tls = tls
        config = shipped("deploy/base/webhook-configuration/mutatingwebhookconfiguration.yaml")
        for webhook in config["webhooks"]:
            webhook["clientConfig"]["caBundle"] = base64.b64encode(tls.ca_cert).decode()
        self.configuration: dict[str, Any] | None = config
        self.deployment = shipped("deploy/base/deployment.yaml")
        self.deployment["spec"]["template"]["spec"]["volumes"][1]["configMap"]["name"] = "netqos-webhook-policy-7bk2"
        self.policy = (REPO / "deploy/base/policy.yaml").read_text()
        self.ready = 2
        self.secret_tls: kubeapi.TLS | None = tls
        self.forbidden: set[str] = set()
        self.admission_policies: list[dict[str, Any]] = []  # manifests --as admission-policy
        self.nodes = [node("fast-1", "high"), node("fast-2", "high"), node("slow-1", "low"), node("plain-1")]
        self.workloads = [
            workload("Deployment", "shop", "web"),
            workload("ReplicaSet", "shop", "web-6f9c", owner=("Deployment", "web"), template=TEMPLATE),
        ]
        self.pods = [
            pod("shop", "web-6f9c-a", QOS, "fast-1", ("ReplicaSet", "web-6f9c"), preferred=NETQOS_TERMS),
            # injected before the default gained its constant: the classic terms count as injected
            pod("shop", "web-6f9c-b", QOS, "fast-2", ("ReplicaSet", "web-6f9c"), preferred=CLASSIC_TERMS),
            pod("shop", "db-0", {"app": "db"}, "slow-1", ("StatefulSet", "db")),  # not selected
            pod("kube-system", "probe", QOS, "slow-1"),  # a namespace the webhook never sees
            pod("shop", "job-1-x", QOS, "slow-1", ("Job", "job-1"), phase="Succeeded"),  # finished
        ]

    def snapshot(self) -> Snapshot:
        objs = kubeapi.installation(self.configuration, self.deployment, self.policy, self.secret_tls, NS, self.ready)
        objs += [kubeapi.namespace("shop"), *self.nodes, *self.workloads, *self.pods, *self.admission_policies]
        snapshot = Snapshot().add_all(objs)
        snapshot.forbidden |= self.forbidden
        return snapshot


def fresh_install(c: Cluster) -> None:
    pass


def webhook_missing(c: Cluster) -> None:
    c.configuration = None


def admission_policies(c: Cluster) -> None:
    """What `manifests --as admission-policy` prints for the shipped policy, applied."""
    policy = load_policy(REPO / "deploy/base/policy.yaml")
    c.admission_policies = [
        {**o, "metadata": {**o["metadata"], "uid": f"uid-{i}"}}
        for i, o in enumerate(generate_admission_policies(policy, warnings=True))
    ]


def admission_policy_instead_of_webhook(c: Cluster) -> None:
    admission_policies(c)
    c.configuration = None


def admission_policy_beside_webhook(c: Cluster) -> None:
    admission_policies(c)


def admission_policy_without_binding(c: Cluster) -> None:
    admission_policy_instead_of_webhook(c)
    c.admission_policies = [o for o in c.admission_policies if o["kind"] != "MutatingAdmissionPolicyBinding"]


def admission_policy_for_another_policy(c: Cluster) -> None:
    admission_policy_instead_of_webhook(c)
    (mutating,) = (o for o in c.admission_policies if o["kind"] == "MutatingAdmissionPolicy")
    mutating["spec"]["reinvocationPolicy"] = "Never"
    mutating["spec"]["matchConstraints"]["objectSelector"] = {"matchLabels": {"qos": "other"}}


def stale_ca_bundle(c: Cluster) -> None:
    c.secret_tls = issue_tls(SERVICE_NAMES, "2025-01-01", "2034-01-01")  # a new CA; the caBundle is the old one


def expired_certificate(c: Cluster) -> None:
    c.secret_tls = issue_tls(SERVICE_NAMES, "2025-01-01", "2026-05-01", ca=c.tls)


def drifted_object_selector(c: Cluster) -> None:
    assert c.configuration is not None
    c.configuration["webhooks"][0]["objectSelector"] = {"matchLabels": {"qos": "latency"}}


def failure_policy_and_timeout_changed(c: Cluster) -> None:
    assert c.configuration is not None
    c.configuration["webhooks"][0].update(failurePolicy="Fail", timeoutSeconds=20)


def created_before_install(c: Cluster) -> None:
    c.workloads += [
        workload("Deployment", "shop", "api"),
        workload("ReplicaSet", "shop", "api-55d", owner=("Deployment", "api"), template=TEMPLATE),
        workload("CronJob", "shop", "report"),
        workload("Job", "shop", "report-2905", owner=("CronJob", "report"), template=TEMPLATE),
    ]
    c.pods += [
        pod("shop", "api-55d-a", QOS, "slow-1", ("ReplicaSet", "api-55d"), created="2025-12-01T08:00:00Z"),
        pod("shop", "api-55d-b", QOS, "plain-1", ("ReplicaSet", "api-55d"), created="2025-12-01T08:00:05Z"),
        pod("shop", "report-2905-q", QOS, "fast-1", ("Job", "report-2905"), created="2025-12-02T00:00:00Z"),
        pod("default", "debug", QOS, None, created="2025-12-03T00:00:00Z"),
    ]


def explicit_and_opted_out(c: Cluster) -> None:
    c.pods += [
        pod("shop", "own-choice", QOS, "plain-1", preferred=OWN_NET),
        pod("shop", "opted-out", QOS, "slow-1", annotations={"netqos.io/inject": "false"}),
    ]


def with_allocatable(n: dict[str, Any], cpu: str = "1", pods: str = "110") -> dict[str, Any]:
    """A node whose status.allocatable the resource filter reads."""
    n["status"] = {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": pods}}
    return n


def requesting(p: dict[str, Any], cpu: str | None = None, host_port: int | None = None) -> dict[str, Any]:
    """A pod whose container requests `cpu` and binds `host_port` on its node."""
    container = p["spec"]["containers"][0]
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    if host_port is not None:
        container["ports"] = [{"containerPort": 8080, "hostPort": host_port, "protocol": "TCP"}]
    return p


def sized_cluster(c: Cluster, on_fast: tuple[dict[str, Any], ...], **question: Any) -> None:
    """Fast nodes of 1 CPU holding `on_fast`; web-6f9c-c, placed on slow-1, asks for `question`."""
    c.nodes = [with_allocatable(node("fast-1", "high")), with_allocatable(node("fast-2", "high")), *c.nodes[2:]]
    c.pods = [
        *on_fast,
        requesting(
            pod("shop", "web-6f9c-c", QOS, "slow-1", ("ReplicaSet", "web-6f9c"), preferred=NETQOS_TERMS), **question
        ),
    ]


def web(name: str, node_: str, phase: str | None = None) -> dict[str, Any]:
    return pod("shop", name, QOS, node_, ("ReplicaSet", "web-6f9c"), preferred=NETQOS_TERMS, phase=phase)


def high_nodes_full(c: Cluster) -> None:
    # Placed on slow-1 while both fast nodes were full; they still are (fast-1 by two pods alike).
    on_fast = (
        requesting(web("web-6f9c-a", "fast-1"), "400m"),
        requesting(web("web-6f9c-d", "fast-1"), "400m"),
        requesting(web("web-6f9c-b", "fast-2"), "1"),
    )
    sized_cluster(c, on_fast, cpu="500m")


def high_node_full_and_high_node_port_taken(c: Cluster) -> None:
    sized_cluster(
        c,
        (requesting(web("web-6f9c-a", "fast-1"), "900m"), requesting(web("web-6f9c-b", "fast-2"), "100m", 9000)),
        cpu="200m",
        host_port=9000,
    )


def high_node_with_room(c: Cluster) -> None:
    # fast-1's finished pod takes nothing: the scheduler counts only pods that are not finished.
    sized_cluster(
        c,
        (
            requesting(web("web-6f9c-a", "fast-1"), "200m"),
            requesting(web("web-6f9c-b", "fast-2"), "1"),
            requesting(pod("shop", "batch-1", {"app": "batch"}, "fast-1", phase="Succeeded"), "800m"),
        ),
        cpu="500m",
    )
    # The same template but for its request: it fits on no fast node.
    c.pods.append(requesting(web("web-6f9c-e", "slow-1"), "900m"))


def high_node_pod_limit_reached(c: Cluster) -> None:
    sized_cluster(c, (requesting(web("web-6f9c-a", "fast-1"), "1"), web("web-6f9c-b", "fast-2")), cpu="100m")
    c.nodes[1]["status"]["allocatable"]["pods"] = "1"


def high_nodes_tainted(c: Cluster) -> None:
    taint = {"key": "dedicated", "value": "fast", "effect": "NoSchedule"}
    c.nodes = [node("fast-1", "high", [taint]), node("fast-2", "high", unschedulable=True), *c.nodes[2:]]
    c.pods = [
        pod("shop", "web-6f9c-a", QOS, "slow-1", ("ReplicaSet", "web-6f9c"), preferred=NETQOS_TERMS),
        pod(
            "shop",
            "web-6f9c-b",
            QOS,
            "fast-1",
            ("ReplicaSet", "web-6f9c"),
            preferred=NETQOS_TERMS,
            tolerations=TOLERATE_HIGH,
        ),
    ]


def no_high_node(c: Cluster) -> None:
    c.nodes = [node("slow-1", "low"), node("plain-1"), node("other-1", "medium")]
    c.pods = [
        pod("shop", "web-6f9c-a", QOS, "plain-1", ("ReplicaSet", "web-6f9c"), preferred=NETQOS_TERMS),
        pod("shop", "web-6f9c-b", QOS, "other-1", ("ReplicaSet", "web-6f9c"), preferred=NETQOS_TERMS),
    ]


def policy_changed_without_registering(c: Cluster) -> None:
    c.policy = (FIXTURES / "explain/policy-two-rules.yaml").read_text()


def policy_mounted_as_one_file_with_sub_path(c: Cluster) -> None:
    """The ConfigMap's key mounted as a single file (`subPath`), the policy changed since registering."""
    container = c.deployment["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [a.replace("/config/policy.yaml", "/etc/netqos/policy.yaml") for a in container["args"]]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    mount.update(mountPath="/etc/netqos/policy.yaml", subPath="policy.yaml")
    policy_changed_without_registering(c)


def invalid_policy_in_the_configmap(c: Cluster) -> None:
    c.policy = "apiVersion: netqos.io/v1alpha1\nkind: NetQoSPolicy\nrules: []\n"


def no_ready_endpoints(c: Cluster) -> None:
    c.ready = 0


def secrets_and_namespaces_forbidden(c: Cluster) -> None:
    c.forbidden |= {"secrets", "namespaces"}


# --- the expected reports -----------------------------------------------------------------------

ENTRY = {
    "name": "netqos.netqos.io",
    "rule": "netqos",
    "ca_bundle": True,
    "object_selector_matches_policy": True,
    "failure_policy": "Ignore",
    "timeout_seconds": 10,
}
CERT = {"not_after": "2034-01-01T00:00:00Z", "days_left": 2771, "verifies_against_ca_bundle": True}
POLICY_SOURCE = "ConfigMap netqos-system/netqos-webhook-policy-7bk2 key policy.yaml"
FRESH = {
    "installation": "webhook",
    "webhook": {
        "configuration": "netqos-webhook",
        "entries": [ENTRY],
        "ready_endpoints": 2,
        "urls": [],
        "deployment": {"ready_replicas": 2, "replicas": 2},
        "certificate": CERT,
        "ca": {"not_after": "2036-01-01T00:00:00Z", "days_left": 3501},
    },
    "admission_policies": [],
    "policy": {"source": POLICY_SOURCE, "rules": ["netqos"]},
    "pods": {"selected": 2, "injected": 2, "explicit": 0, "opted_out": 0, "missing": 0, "injected_earlier": 0},
    "placement": {"high": 2, "other": 0, "unlabelled": 0, "low": 0, "pending": 0, "movable": 0},
    "high_nodes": 2,
    "missing": [],
    "not_on_high": [],
    "problems": [],
    "unknown": [],
}
FEASIBLE_NOW = (
    "a net=high node is feasible now: the pod was placed when none was, or other score plugins outweighed the "
    "preference (run explain)"
)
FEASIBLE_PENDING = (
    "a net=high node is feasible now: the scheduler has not bound the pod yet (kubectl describe pod shows its "
    "FailedScheduling events)"
)
THREE_INJECTED = {"selected": 3, "injected": 3, "explicit": 0, "opted_out": 0, "missing": 0, "injected_earlier": 0}
TWO_ON_HIGH = {"high": 2, "other": 0, "unlabelled": 0, "low": 1, "pending": 0, "movable": 0}
# Nodes without the net label, enough that the two net=high nodes are a tenth of the nodes
PLAIN = [node(f"plain-{i}") for i in range(1, 18)]
BOUND = "fieldSelector=spec.nodeName%21%3D%2Cstatus.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"
FIX = f"re-register for the policy in force: netqos-webhook register --config FILE (policy: {POLICY_SOURCE})"


def expect(**changes: Any) -> dict[str, Any]:
    out: dict[str, Any] = copy.deepcopy(FRESH)
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = out
        for p in parents:
            target = target[p]
        target[last] = value
    return out


def off_high(
    name: str, node_: str, net: str | None, why: list[str], ns: str = "shop", target: str = "net=high"
) -> dict[str, Any]:
    return {"namespace": ns, "name": name, "node": node_, "net": net, "why": why, "target": target}


POLICY_ENTRY = {"name": "netqos.netqos.io", "rule": "netqos", "bound": True, "matches_policy": True}
NO_WEBHOOK = {
    "configuration": None,
    "entries": [],
    "ready_endpoints": None,
    "urls": [],
    "deployment": None,
    "certificate": None,
    "ca": None,
}
POLICY_FIX = (
    "apply what netqos-webhook manifests --as admission-policy --config FILE prints for the policy in force "
    f"(policy: {POLICY_SOURCE})"
)

SCENARIOS: list[tuple[Callable[[Cluster], None], dict[str, Any], int]] = [
    (fresh_install, FRESH, 0),
    (
        admission_policy_instead_of_webhook,
        expect(installation="admission policy", webhook=NO_WEBHOOK, admission_policies=[POLICY_ENTRY]),
        0,
    ),
    (
        admission_policy_beside_webhook,
        expect(installation="webhook and admission policy", admission_policies=[POLICY_ENTRY]),
        0,
    ),
    (
        admission_policy_without_binding,
        expect(
            installation="admission policy",
            webhook__configuration=None,
            webhook__entries=[],
            webhook__certificate={**CERT, "verifies_against_ca_bundle": False},
            admission_policies=[{**POLICY_ENTRY, "bound": False}],
            problems=[
                "MutatingAdmissionPolicy netqos.netqos.io has no binding: the API server does not run it, so pods "
                f"rule netqos selects do not get the preference from it; {POLICY_FIX} (its "
                "MutatingAdmissionPolicyBinding)",
                "MutatingWebhookConfiguration netqos-webhook does not exist: the API server calls no webhook, so no "
                "pod gets the preference; install it (kubectl apply -k deploy/base, then netqos-webhook register)",
            ],
        ),
        3,
    ),
    (
        admission_policy_for_another_policy,
        expect(
            installation="admission policy",
            webhook=NO_WEBHOOK,
            admission_policies=[{**POLICY_ENTRY, "matches_policy": False}],
            problems=[
                "MutatingAdmissionPolicy netqos.netqos.io differs from what the generator makes for rule netqos: the "
                f"API server mutates pods otherwise than the webhook would; {POLICY_FIX}"
            ],
        ),
        3,
    ),
    (
        webhook_missing,
        expect(
            installation="none",
            webhook__configuration=None,
            webhook__entries=[],
            webhook__certificate={**CERT, "verifies_against_ca_bundle": False},
            problems=[
                "MutatingWebhookConfiguration netqos-webhook does not exist: the API server calls no webhook, so no "
                "pod gets the preference; install it (kubectl apply -k deploy/base, then netqos-webhook register)"
            ],
        ),
        3,
    ),
    (
        stale_ca_bundle,
        expect(
            webhook__certificate={**CERT, "verifies_against_ca_bundle": False},
            problems=[
                "the serving certificate does not verify for netqos-webhook.netqos-system.svc against webhook entry "
                "netqos.netqos.io: no certificate in its caBundle signed it (a stale caBundle, or a new CA)"
            ],
        ),
        3,
    ),
    (
        expired_certificate,
        expect(
            webhook__certificate={
                "not_after": "2026-05-01T00:00:00Z",
                "days_left": -31,
                "verifies_against_ca_bundle": False,
            },
            problems=[
                "the serving certificate in Secret netqos-webhook-tls expired on 2026-05-01T00:00:00Z (31 days "
                "ago); renew it (netqos-webhook certs --renew-before 30, then register; cert-manager renews by itself)",
                "the serving certificate does not verify for netqos-webhook.netqos-system.svc against webhook entry "
                "netqos.netqos.io: the certificate is not valid now",
            ],
        ),
        3,
    ),
    (
        drifted_object_selector,
        expect(
            webhook__entries=[{**ENTRY, "object_selector_matches_policy": False}],
            problems=[
                'webhook entry netqos.netqos.io: objectSelector {"matchLabels":{"qos":"latency"}} differs from rule '
                'netqos\'s podSelector {"matchLabels":{"qos":"latency-sensitive"}}: the API server calls the '
                f"webhook for other pods than the policy selects; {FIX}"
            ],
        ),
        3,
    ),
    (
        failure_policy_and_timeout_changed,
        expect(
            webhook__entries=[{**ENTRY, "failure_policy": "Fail", "timeout_seconds": 20}],
            problems=[
                f'webhook entry netqos.netqos.io: failurePolicy is "Fail", netqos-webhook ships "Ignore"; {FIX}',
                f"webhook entry netqos.netqos.io: timeoutSeconds is 20, netqos-webhook ships 10; {FIX}",
            ],
        ),
        3,
    ),
    (
        created_before_install,
        expect(
            pods={"selected": 6, "injected": 2, "explicit": 0, "opted_out": 0, "missing": 4, "injected_earlier": 0},
            # rebalance would move one pod of Deployment api now (one per owner and run)
            placement={"high": 3, "other": 0, "unlabelled": 1, "low": 1, "pending": 1, "movable": 1},
            missing=[
                {"namespace": "default", "name": "debug", "owner": None, "created": "2025-12-03T00:00:00Z"},
                {
                    "namespace": "shop",
                    "name": "api-55d-a",
                    "owner": "Deployment/api",
                    "created": "2025-12-01T08:00:00Z",
                },
                {
                    "namespace": "shop",
                    "name": "api-55d-b",
                    "owner": "Deployment/api",
                    "created": "2025-12-01T08:00:05Z",
                },
                {
                    "namespace": "shop",
                    "name": "report-2905-q",
                    "owner": "CronJob/report",
                    "created": "2025-12-02T00:00:00Z",
                },
            ],
            not_on_high=[
                off_high("debug", "", None, [FEASIBLE_PENDING], ns="default"),
                off_high("api-55d-a", "slow-1", "low", [FEASIBLE_NOW]),
                off_high("api-55d-b", "plain-1", None, [FEASIBLE_NOW]),
            ],
        ),
        3,
    ),
    (
        explicit_and_opted_out,
        expect(
            pods={"selected": 4, "injected": 2, "explicit": 1, "opted_out": 1, "missing": 0, "injected_earlier": 0},
            placement={"high": 2, "other": 0, "unlabelled": 1, "low": 1, "pending": 0, "movable": 0},
            not_on_high=[
                off_high("opted-out", "slow-1", "low", [FEASIBLE_NOW]),
                off_high("own-choice", "plain-1", None, [FEASIBLE_NOW]),
            ],
        ),
        0,
    ),
    (
        high_nodes_full,
        expect(
            pods={**THREE_INJECTED, "selected": 4, "injected": 4},
            placement={**TWO_ON_HIGH, "high": 3},
            not_on_high=[off_high("web-6f9c-c", "slow-1", "low", ["2/2 net=high node(s): Insufficient cpu"])],
        ),
        0,
    ),
    (
        high_node_full_and_high_node_port_taken,
        expect(
            pods=THREE_INJECTED,
            placement=TWO_ON_HIGH,
            not_on_high=[
                off_high(
                    "web-6f9c-c",
                    "slow-1",
                    "low",
                    [
                        "1/2 net=high node(s): Insufficient cpu",
                        "1/2 net=high node(s): node(s) didn't have free ports for the requested pod ports",
                    ],
                )
            ],
        ),
        0,
    ),
    (
        high_node_with_room,
        expect(
            pods={**THREE_INJECTED, "selected": 4, "injected": 4},
            placement={**TWO_ON_HIGH, "low": 2, "movable": 1},  # web-6f9c-c fits, and moves
            not_on_high=[
                off_high("web-6f9c-c", "slow-1", "low", [FEASIBLE_NOW]),
                off_high("web-6f9c-e", "slow-1", "low", ["2/2 net=high node(s): Insufficient cpu"]),
            ],
        ),
        0,
    ),
    (
        high_node_pod_limit_reached,
        expect(
            pods=THREE_INJECTED,
            placement=TWO_ON_HIGH,
            not_on_high=[
                off_high(
                    "web-6f9c-c",
                    "slow-1",
                    "low",
                    ["1/2 net=high node(s): Insufficient cpu", "1/2 net=high node(s): Too many pods"],
                )
            ],
        ),
        0,
    ),
    (
        high_nodes_tainted,
        expect(
            placement={"high": 1, "other": 0, "unlabelled": 0, "low": 1, "pending": 0, "movable": 0},
            not_on_high=[
                off_high(
                    "web-6f9c-a",
                    "slow-1",
                    "low",
                    [
                        "1/2 net=high node(s): node(s) had untolerated taint {dedicated: fast}",
                        "1/2 net=high node(s): node(s) were unschedulable",
                    ],
                )
            ],
        ),
        0,
    ),
    (
        no_high_node,
        expect(
            placement={"high": 0, "other": 1, "unlabelled": 1, "low": 0, "pending": 0, "movable": 0},
            high_nodes=0,
            problems=[
                "no node is labelled net=high: selected pods cannot be placed on a fast network; label the "
                "fast-network nodes (kubectl label node NAME net=high)"
            ],
        ),
        3,
    ),
    (
        policy_changed_without_registering,
        expect(
            policy={"source": POLICY_SOURCE, "rules": ["netqos", "zone-a"]},
            pods={"selected": 2, "injected": 0, "explicit": 0, "opted_out": 0, "missing": 2, "injected_earlier": 0},
            missing=[
                {"namespace": "shop", "name": "web-6f9c-a", "owner": "Deployment/web", "created": kubeapi.EPOCH},
                {"namespace": "shop", "name": "web-6f9c-b", "owner": "Deployment/web", "created": kubeapi.EPOCH},
            ],
            problems=[
                "rule zone-a has no webhook entry zone-a.netqos.io in MutatingWebhookConfiguration netqos-webhook: "
                f"pods only this rule selects are never sent to the webhook; {FIX}"
            ],
        ),
        3,
    ),
    (
        policy_mounted_as_one_file_with_sub_path,
        expect(
            policy={"source": POLICY_SOURCE, "rules": ["netqos", "zone-a"]},
            pods={"selected": 2, "injected": 0, "explicit": 0, "opted_out": 0, "missing": 2, "injected_earlier": 0},
            missing=[
                {"namespace": "shop", "name": "web-6f9c-a", "owner": "Deployment/web", "created": kubeapi.EPOCH},
                {"namespace": "shop", "name": "web-6f9c-b", "owner": "Deployment/web", "created": kubeapi.EPOCH},
            ],
            problems=[
                "rule zone-a has no webhook entry zone-a.netqos.io in MutatingWebhookConfiguration netqos-webhook: "
                f"pods only this rule selects are never sent to the webhook; {FIX}"
            ],
        ),
        3,
    ),
    (
        # no pod could say which policy it keeps (the fake EndpointSlice names none): no policy is
        # known to be in force, so nothing is compared with one, nor re-registration advised
        # (the pods answering: tests/e2e/test_status_served_policy.py)
        invalid_policy_in_the_configmap,
        expect(
            policy={
                "source": "the built-in default policy (only to list pods: the policy the webhook serves is not known)",
                "rules": ["netqos"],
            },
            pods=dict.fromkeys(FRESH["pods"]),
            placement=dict.fromkeys(FRESH["placement"]),
            high_nodes=None,
            problems=[
                f"the ConfigMap is invalid: policy file {POLICY_SOURCE}: rules: must be a non-empty list of "
                "rules (got []); which policy the running pods keep could not be read (the webhook's Service has no "
                "ready pod); the registration is not compared with any policy until it is known: fix the ConfigMap"
            ],
            unknown=[
                "whether MutatingWebhookConfiguration netqos-webhook's entries match the policy in force (the policy "
                "the webhook serves is not known)",
                "which selected pods carry the preference (the policy the webhook serves is not known)",
            ],
        ),
        3,
    ),
    (
        no_ready_endpoints,
        expect(
            webhook__ready_endpoints=0,
            webhook__deployment={"ready_replicas": 0, "replicas": 2},
            problems=[
                "Service netqos-webhook in namespace netqos-system has no ready endpoints: every call fails and pods "
                "are created without the preference; check the pods (kubectl -n netqos-system get pods -l "
                "app.kubernetes.io/name=netqos-webhook)",
                "Deployment netqos-webhook in namespace netqos-system has no ready replica (0/2); see kubectl -n "
                "netqos-system describe deployment netqos-webhook",
            ],
        ),
        3,
    ),
    (
        secrets_and_namespaces_forbidden,
        expect(
            webhook__certificate=None,
            unknown=[
                "cannot read Secret netqos-webhook-tls in namespace netqos-system (forbidden by RBAC)",
                "cannot read the Namespaces (forbidden by RBAC)",
            ],
        ),
        0,
    ),
]


@pytest.mark.parametrize(("scenario", "expected", "code"), SCENARIOS, ids=[s[0].__name__ for s in SCENARIOS])
def test_status_reports_each_cluster_state_exactly(
    scenario: Callable[[Cluster], None], expected: dict[str, Any], code: int, tls: kubeapi.TLS, tmp_path: Path
) -> None:
    cluster = Cluster(tls)
    scenario(cluster)
    with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
        out = io.StringIO()
        got = run(StatusArgs(kubeconfig=str(api.kubeconfig), output="json"), out, now=NOW)
    assert json.loads(out.getvalue()) == expected
    assert got == code


# --- pods of other schedulers: --scheduler-config -------------------------------------------------

SCHEDULERS = str(FIXTURES / "scheduler-config-netqos.yaml")  # default-scheduler, netqos-scheduler, network-aware
POOL_B = str(FIXTURES / "scheduler-config-pool-b.yaml")  # pool-b-scheduler: only nodes labelled pool=b
ENFORCED = "2/2 net=high node(s): node(s) didn't match scheduler-enforced node affinity"
NO_CPU = "2/2 net=high node(s): Insufficient cpu"


def guessed(scheduler: str, files: tuple[str, ...] = ()) -> str:
    todo = (
        f"--scheduler-config {' '.join(files)} has no profile of that name (only default-scheduler, netqos-scheduler, "
        "network-aware); give that scheduler's KubeSchedulerConfiguration with another --scheduler-config FILE"
        if files
        else "give that scheduler's KubeSchedulerConfiguration with --scheduler-config FILE"
    )
    return (
        f"judged by kube-scheduler's default profile: the profile of the pod's scheduler, {scheduler}, is not known; "
        + todo
    )


# (the web pods' and their template's schedulerName, --scheduler-config files, why web-6f9c-c (room on a
# net=high node for it) and web-6f9c-e (no room) are not on one, how many pods rebalance would move)
OTHER_SCHEDULERS = [
    ("netqos-scheduler", (), [FEASIBLE_NOW, guessed("netqos-scheduler")], [NO_CPU, guessed("netqos-scheduler")], 0),
    ("netqos-scheduler", (SCHEDULERS,), [FEASIBLE_NOW], [NO_CPU], 1),
    ("pool-b-scheduler", (POOL_B,), [ENFORCED], [ENFORCED], 0),
    ("pool-b-scheduler", (SCHEDULERS, POOL_B), [ENFORCED], [ENFORCED], 0),
    (
        "gpu-scheduler",
        (SCHEDULERS,),
        [FEASIBLE_NOW, guessed("gpu-scheduler", (SCHEDULERS,))],
        [NO_CPU, guessed("gpu-scheduler", (SCHEDULERS,))],
        0,
    ),
]


@pytest.mark.parametrize(
    ("scheduler", "files", "why_room", "why_full", "movable"),
    OTHER_SCHEDULERS,
    ids=[f"{s} with {len(f)} file(s)" for s, f, *_ in OTHER_SCHEDULERS],
)
def test_a_pod_of_another_scheduler_is_judged_and_counted_by_its_profile_when_a_scheduler_config_gives_it(
    scheduler: str,
    files: tuple[str, ...],
    why_room: list[str],
    why_full: list[str],
    movable: int,
    tls: kubeapi.TLS,
    tmp_path: Path,
) -> None:
    cluster = Cluster(tls)
    high_node_with_room(cluster)
    for obj in cluster.pods:
        if obj["metadata"]["name"].startswith("web-6f9c-"):
            obj["spec"]["schedulerName"] = scheduler
    cluster.workloads[1]["spec"]["template"]["spec"]["schedulerName"] = scheduler  # what a replacement runs under
    with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
        out = io.StringIO()
        args = StatusArgs(kubeconfig=str(api.kubeconfig), output="json", scheduler_config=files)
        assert run(args, out, now=NOW) == 0
    assert json.loads(out.getvalue()) == expect(
        pods={**THREE_INJECTED, "selected": 4, "injected": 4},
        placement={**TWO_ON_HIGH, "low": 2, "movable": movable},
        not_on_high=[
            off_high("web-6f9c-c", "slow-1", "low", why_room),
            off_high("web-6f9c-e", "slow-1", "low", why_full),
        ],
    )


# --- the cluster's release: its scheduler's filters -----------------------------------------------

# NodeDeclaredFeatures filters from 1.36 (absent in 1.34, alpha and off in 1.35), last: a pod with
# hostNetwork and hostUsers false needs UserNamespacesHostNetworkSupport, which no node declares
# here; fast-1 has room for the pod, fast-2 none (NodeResourcesFit rejects it first)
UNDECLARED = [
    "1/2 net=high node(s): Insufficient cpu",
    "1/2 net=high node(s): node(s) didn't match Pod's required features",
]
OUTSIDE = "Kubernetes 1.33 is outside the versions netqos-webhook knows (1.34 to 1.37); computing as 1.34"
RELEASES = [
    ({"major": "1", "minor": "34", "gitVersion": "v1.34.4"}, [FEASIBLE_NOW], []),
    ({"major": "1", "minor": "35", "gitVersion": "v1.35.4"}, [FEASIBLE_NOW], []),
    ({"major": "1", "minor": "36", "gitVersion": "v1.36.3"}, UNDECLARED, []),
    ({"major": "1", "minor": "37", "gitVersion": "v1.37.2"}, UNDECLARED, []),
    ({"major": "1", "minor": "33", "gitVersion": "v1.33.9"}, [FEASIBLE_NOW], [OUTSIDE]),
]


@pytest.mark.parametrize(("version", "why", "unknown"), RELEASES, ids=[v["gitVersion"] for v, *_ in RELEASES])
def test_a_pod_off_the_fast_nodes_is_judged_by_the_filters_of_the_clusters_own_release(
    version: dict[str, str], why: list[str], unknown: list[str], tls: kubeapi.TLS, tmp_path: Path
) -> None:
    cluster = Cluster(tls)
    high_node_with_room(cluster)
    cluster.pods = [p for p in cluster.pods if p["metadata"]["name"] != "web-6f9c-e"]
    stranded = next(p for p in cluster.pods if p["metadata"]["name"] == "web-6f9c-c")
    stranded["spec"] |= {"hostNetwork": True, "hostUsers": False}
    snapshot = cluster.snapshot()
    snapshot.version = version
    with kubeapi.serve(snapshot, tmp_path) as api:
        out = io.StringIO()
        run(StatusArgs(kubeconfig=str(api.kubeconfig), output="json"), out, now=NOW)
    report = json.loads(out.getvalue())
    assert report["not_on_high"] == [off_high("web-6f9c-c", "slow-1", "low", why)]
    assert report["unknown"] == unknown


# --- status and rebalance judge a pod alike ------------------------------------------------------

ONE_WEB_POD_PER_NODE = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}


def test_a_pod_whose_anti_affinity_every_fast_node_fails_is_not_called_feasible_and_rebalance_agrees(
    tls: kubeapi.TLS, tmp_path: Path
) -> None:
    """fast-1 has room for web-6f9c-c but holds a pod of web, which its required anti-affinity
    refuses (InterPodAffinity's Filter, which reads every node's pods); so does fast-2 for the
    pod its controller would create (its template requests nothing). Status says so, as
    rebalance's plan does, instead of "a net=high node is feasible now"."""
    cluster = Cluster(tls)
    high_node_with_room(cluster)
    cluster.pods = [p for p in cluster.pods if p["metadata"]["name"] != "web-6f9c-e"]
    stranded = next(p for p in cluster.pods if p["metadata"]["name"] == "web-6f9c-c")
    stranded["spec"]["affinity"] |= ONE_WEB_POD_PER_NODE
    template = cluster.workloads[1]["spec"]["template"]["spec"]
    template["affinity"] = {**template.get("affinity", {}), **ONE_WEB_POD_PER_NODE}
    with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
        out = io.StringIO()
        run(StatusArgs(kubeconfig=str(api.kubeconfig), output="json"), out, now=NOW)
        plan = io.StringIO()
        rebalance_run(RebalanceArgs(kubeconfig=str(api.kubeconfig), output="json"), plan, now=NOW)
    report = json.loads(out.getvalue())
    why = ["2/2 net=high node(s): node(s) didn't match pod anti-affinity rules"]
    assert report["not_on_high"] == [off_high("web-6f9c-c", "slow-1", "low", why)]
    assert report["placement"]["movable"] == 0
    [row] = json.loads(plan.getvalue())["candidates"]
    assert (row["name"], row["action"]) == ("web-6f9c-c", "skip")
    assert row["reason"] == f"no net=high node fits the replacement: {'; '.join(why)}"


# --- the command line: exit codes, one-line errors, the table ------------------------------------


def test_cli_exit_code_is_0_for_a_healthy_cluster_and_3_for_missing_pods(
    tls: kubeapi.TLS, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for scenario, code in ((fresh_install, 0), (created_before_install, 3)):
        cluster = Cluster(tls)
        scenario(cluster)
        with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
            assert main(["status", "--kubeconfig", str(api.kubeconfig), "-o", "json"]) == code
        assert set(json.loads(capsys.readouterr().out)) >= {
            "webhook",
            "pods",
            "placement",
            "missing",
            "not_on_high",
            "problems",
        }


def test_table_groups_missing_pods_by_top_owner_and_prints_the_command_that_recreates_them(
    tls: kubeapi.TLS, tmp_path: Path
) -> None:
    cluster = Cluster(tls)
    created_before_install(cluster)
    with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
        out = io.StringIO()
        assert run(StatusArgs(kubeconfig=str(api.kubeconfig)), out, now=NOW) == 3
    table = out.getvalue()
    assert "  shop/Deployment/api: 2 pod(s) created since 2025-12-01T08:00:00Z: api-55d-a, api-55d-b" in table
    assert "    recreate: kubectl -n shop rollout restart deployment/api" in table
    # rebalance --missing recreates a Deployment's pods safely; a Job's pod would restart its work
    lines = table.splitlines()
    assert [(lines[i - 1], line) for i, line in enumerate(lines) if line.startswith("    or:")] == [
        (
            "    recreate: kubectl -n shop rollout restart deployment/api",
            "    or:       netqos-webhook rebalance --missing --apply (a pod per owner per run, through the "
            "Eviction API)",
        )
    ]
    assert "  shop/CronJob/report: 1 pod(s)" in table
    assert table.index("WEBHOOK") < table.index("PODS") < table.index("MISSING") < table.index("NOT ON A net=high")


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--kubeconfig", "/nonexistent/kubeconfig"], 2, "cannot read kubeconfig /nonexistent/kubeconfig"),
        (["--config", "/nonexistent/policy.yaml"], 2, "/nonexistent/policy.yaml"),
        (
            ["--scheduler-config", str(FIXTURES / "explain/scheduler-config-bad.yaml")],
            2,
            "scheduler-config-bad.yaml: profiles[0].pluginConfig[0].args.scoringStrategy.type is 'Packed'",
        ),
        (
            ["--scheduler-config", SCHEDULERS, "--scheduler-config", SCHEDULERS],
            2,
            "both have a profile of schedulerName 'default-scheduler': give each scheduler's configuration once",
        ),
    ],
    ids=["unreadable kubeconfig", "unreadable policy file", "unusable scheduler config", "a scheduler given twice"],
)
def test_unusable_input_is_one_line_on_stderr_and_exit_2(
    argv: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", *argv]) == code
    err = capsys.readouterr().err
    assert err.startswith("netqos-webhook status: ") and message in err and err.count("\n") == 1


def test_an_unreachable_cluster_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with kubeapi.serve(Snapshot(), tmp_path) as api:
        url = api.url
    kubeconfig = kubeapi.write_kubeconfig(tmp_path / "gone", url)  # the server has stopped: nothing listens
    assert main(["status", "--kubeconfig", str(kubeconfig)]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the Kubernetes API server at" in err and err.count("\n") == 1


def test_pods_are_listed_with_the_rule_selector_server_side_and_paginated(tls: kubeapi.TLS, tmp_path: Path) -> None:
    cluster = Cluster(tls)
    cluster.pods += [pod("shop", f"bulk-{i:04}", QOS, "fast-1", preferred=NETQOS_TERMS) for i in range(1100)]
    cluster.pods += [pod("shop", f"other-{i:04}", {"app": "x"}, "slow-1") for i in range(300)]
    with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
        out = io.StringIO()
        assert run(StatusArgs(kubeconfig=str(api.kubeconfig), output="json"), out, now=NOW) == 0
        pod_requests = [r for r in api.requests if r.startswith("/api/v1/pods")]
    assert json.loads(out.getvalue())["pods"]["selected"] == 1102
    assert len(pod_requests) == 3  # 1102 selected pods in pages of 500
    for request in pod_requests:
        assert "labelSelector=qos%3Dlatency-sensitive" in request
        assert "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed" in request
        assert "limit=500" in request
    assert "continue=" in pod_requests[1]


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        (
            [node("fast-1", "high"), node("fast-2", "high"), node("slow-1", "low"), *PLAIN],
            [
                "fieldSelector=spec.nodeName%3Dfast-1%2Cstatus.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed",
                "fieldSelector=spec.nodeName%3Dfast-2%2Cstatus.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed",
            ],
        ),
        (
            [node("fast-1", "high"), node("fast-2", "high"), node("slow-1", "low"), node("plain-1")],
            [BOUND],
        ),
    ],
    ids=["high nodes at most a tenth: one list per high node", "high nodes more than a tenth: one list of bound pods"],
)
def test_pods_on_high_nodes_are_listed_by_node_or_all_bound_pods_at_once(
    nodes: list[dict[str, Any]], expected: list[str], tls: kubeapi.TLS, tmp_path: Path
) -> None:
    cluster = Cluster(tls)
    cluster.nodes = nodes
    high_nodes_full(cluster)
    with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
        assert run(StatusArgs(kubeconfig=str(api.kubeconfig), output="json"), io.StringIO(), now=NOW) == 0
        unselected = [r for r in api.requests if r.startswith("/api/v1/pods") and "labelSelector" not in r]
    assert [r.split("&")[0].removeprefix("/api/v1/pods?") for r in unselected] == expected


def test_every_bound_pod_is_read_for_the_movable_count_only_when_a_pod_could_move(
    tls: kubeapi.TLS, tmp_path: Path
) -> None:
    for scenario, lists in ((high_nodes_full, 0), (high_node_with_room, 1)):
        cluster = Cluster(tls)
        scenario(cluster)
        cluster.nodes += PLAIN  # the high nodes a tenth: their pods are listed node by node
        with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
            run(StatusArgs(kubeconfig=str(api.kubeconfig), output="json"), io.StringIO(), now=NOW)
            bound = [r for r in api.requests if r.startswith("/api/v1/pods?") and BOUND in r]
        assert len(bound) == lists, scenario.__name__


@pytest.mark.parametrize("scenario", [high_nodes_full, high_node_with_room])
def test_bound_pods_listed_for_the_high_nodes_usage_are_not_listed_again_for_the_movable_count(
    scenario: Callable[[Cluster], None], tls: kubeapi.TLS, tmp_path: Path
) -> None:
    """Where the net=high nodes' usage comes from one list of every bound pod, the plan of how many
    pods would move starts from what that list folded: the bound pods cross the wire once, and
    the count is the one a second read gives (the exact reports above)."""
    cluster = Cluster(tls)
    cluster.nodes = [n for n in cluster.nodes if n["metadata"]["name"] != "plain-1"]  # two of three are net=high
    scenario(cluster)
    with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
        out = io.StringIO()
        run(StatusArgs(kubeconfig=str(api.kubeconfig), output="json"), out, now=NOW)
        bound = [r for r in api.requests if r.startswith("/api/v1/pods?") and BOUND in r]
    assert len(bound) == 1
    cluster.nodes += PLAIN
    with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
        by_node = io.StringIO()
        run(StatusArgs(kubeconfig=str(api.kubeconfig), output="json"), by_node, now=NOW)
    assert json.loads(out.getvalue())["placement"]["movable"] == json.loads(by_node.getvalue())["placement"]["movable"]


def test_pods_on_high_nodes_are_not_read_while_every_selected_pod_is_on_one(tls: kubeapi.TLS, tmp_path: Path) -> None:
    with kubeapi.serve(Cluster(tls).snapshot(), tmp_path) as api:
        assert run(StatusArgs(kubeconfig=str(api.kubeconfig), output="json"), io.StringIO(), now=NOW) == 0
        assert [r for r in api.requests if "spec.nodeName" in r] == []


def test_pods_on_high_nodes_forbidden_are_unknown_and_fit_is_not_claimed(tls: kubeapi.TLS, tmp_path: Path) -> None:
    cluster = Cluster(tls)
    high_nodes_full(cluster)
    cluster.forbidden.add("pods@cluster")  # a Role in namespace shop, no ClusterRole
    with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
        out = io.StringIO()
        code = run(StatusArgs(kubeconfig=str(api.kubeconfig), namespace="shop", output="json"), out, now=NOW)
    why = (
        "a net=high node passes the filters that do not depend on the pods on it (resource fit and host ports not "
        "evaluated: the pods on net=high nodes could not be read)"
    )
    assert json.loads(out.getvalue()) == expect(
        pods={**THREE_INJECTED, "selected": 4, "injected": 4},
        placement={**TWO_ON_HIGH, "high": 3, "movable": None},
        not_on_high=[off_high("web-6f9c-c", "slow-1", "low", [why])],
        unknown=[
            "cannot read the pods on net=high nodes (forbidden by RBAC)",
            "cannot read the pods of every node (forbidden by RBAC): how many pods rebalance would move",
        ],
    )
    assert code == 0


def test_namespace_flag_lists_only_that_namespace(tls: kubeapi.TLS, tmp_path: Path) -> None:
    cluster = Cluster(tls)
    created_before_install(cluster)
    with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
        out = io.StringIO()
        run(StatusArgs(kubeconfig=str(api.kubeconfig), namespace="default", output="json"), out, now=NOW)
        assert any(r.startswith("/api/v1/namespaces/default/pods?") for r in api.requests)
    assert [p["name"] for p in json.loads(out.getvalue())["missing"]] == ["debug"]


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        (LabelSelector((("qos", "latency-sensitive"),)), "qos=latency-sensitive"),
        (LabelSelector(match_expressions=(Requirement("tier", "In", ("a", "b")),)), "tier in (a,b)"),
        (LabelSelector(match_expressions=(Requirement("tier", "NotIn", ("c",)),)), "tier notin (c)"),
        (LabelSelector(match_expressions=(Requirement("gpu", "Exists"),)), "gpu"),
        (LabelSelector(match_expressions=(Requirement("gpu", "DoesNotExist"),)), "!gpu"),
        (LabelSelector(), ""),
    ],
)
def test_label_selector_query_selects_what_the_selector_matches(selector: LabelSelector, text: str) -> None:
    assert label_selector(selector) == text
    parsed = kubeapi.parse_label_selector(text)
    for labels in (
        {},
        {"qos": "latency-sensitive"},
        {"tier": "a"},
        {"tier": "c"},
        {"gpu": ""},
        {"tier": "b", "gpu": "1"},
    ):
        assert kubeapi.labels_match(parsed, labels) == selector.matches(labels), labels


# --- docs/commands.md shows the command's real output -------------------------------------------

README_BEGIN, README_END = "<!-- status output: begin -->\n", "<!-- status output: end -->\n"


def readme_cluster(c: Cluster) -> None:
    """The cluster of the status sample in docs/commands.md: pods from before the install,
    an opted-out pod, one whose own affinity names `net`."""
    created_before_install(c)
    explicit_and_opted_out(c)


def test_readme_shows_the_real_output_of_status(tls: kubeapi.TLS, tmp_path: Path) -> None:
    cluster = Cluster(tls)
    readme_cluster(cluster)
    with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
        out = io.StringIO()
        code = run(StatusArgs(kubeconfig=str(api.kubeconfig)), out, now=NOW)  # the clock fixed, for stable dates
    shown = "".join(f"    {line}".rstrip() + "\n" for line in ["$ netqos-webhook status", *out.getvalue().splitlines()])
    shown += f"    $ echo $?\n    {code}\n"
    readme = (REPO / "docs/commands.md").read_text()
    assert README_BEGIN in readme and README_END in readme, "docs/commands.md lacks the status output markers"
    block = readme.split(README_BEGIN, 1)[1].split(README_END, 1)[0]
    assert block == "\n" + shown + "\n", f"docs/commands.md's status output is stale; it is now:\n{shown}"


def test_config_overrides_the_policy_the_webhook_serves(tls: kubeapi.TLS, tmp_path: Path) -> None:
    cluster = Cluster(tls)
    policy = FIXTURES / "explain/policy-two-rules.yaml"
    with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
        out = io.StringIO()
        code = run(StatusArgs(kubeconfig=str(api.kubeconfig), config=str(policy), output="json"), out, now=NOW)
    report = json.loads(out.getvalue())
    assert report["policy"] == {"source": str(policy), "rules": ["netqos", "zone-a"]}
    assert report["pods"]["selected"] == 2, "a pod two rules select is counted once"
    assert code == 3


def test_table_cuts_long_lists_and_says_how_many_more() -> None:
    from webhook.commands.status import render_table
    from webhook.status import OffHigh, Report

    report = Report(not_on_high=[OffHigh("shop", f"p{i:02}", "slow-1", "low", ("why",)) for i in range(25)])
    table = render_table(report, limit=20)
    assert "shop/p19 on slow-1" in table and "shop/p20" not in table
    assert "  ... and 5 more (-o json lists all)" in table


# --- pod affinity's namespaceSelector in the count of pods rebalance would move --------------------

BESIDE_PAYMENTS_DB = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"app": "db"}},
                "namespaceSelector": {"matchLabels": {"team": "payments"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}
BESIDE_NO_DB = "2/2 net=high node(s): node(s) didn't match pod affinity rules"


@pytest.mark.parametrize(
    "forbidden, movable, why",
    [
        pytest.param(set(), 1, FEASIBLE_NOW, id="namespaces-listed"),
        pytest.param({"namespaces"}, 0, BESIDE_NO_DB, id="namespaces-forbidden"),
    ],
)
def test_the_movable_count_matches_a_replacements_namespace_selector_against_the_namespaces_labels(
    forbidden: set[str], movable: int, why: str, tls: kubeapi.TLS, tmp_path: Path
) -> None:
    """web-6f9c-c (on slow-1) must run beside app=db of a namespace labelled team=payments, as its
    controller's replacements must: payments' db runs on fast-1, which has room. With the
    Namespaces' labels read, the replacement fits there and the pod would move; where RBAC hides
    them, a namespace has its name label alone, and no net=high node fits."""
    cluster = Cluster(tls)
    high_node_with_room(cluster)
    cluster.pods = [p for p in cluster.pods if p["metadata"]["name"] != "web-6f9c-e"]
    stranded = next(p for p in cluster.pods if p["metadata"]["name"] == "web-6f9c-c")
    stranded["spec"]["affinity"] |= BESIDE_PAYMENTS_DB
    cluster.workloads[1]["spec"]["template"]["spec"]["affinity"] = BESIDE_PAYMENTS_DB
    cluster.pods.append(pod("payments", "db-0", {"app": "db"}, "fast-1", ("StatefulSet", "db")))
    payments = kubeapi.namespace("payments")
    payments["metadata"]["labels"]["team"] = "payments"
    snapshot = cluster.snapshot().add_all([payments])
    snapshot.forbidden |= forbidden
    with kubeapi.serve(snapshot, tmp_path) as api:
        out = io.StringIO()
        run(StatusArgs(kubeconfig=str(api.kubeconfig), output="json"), out, now=NOW)
    report = json.loads(out.getvalue())
    assert report["placement"]["movable"] == movable
    assert report["not_on_high"] == [off_high("web-6f9c-c", "slow-1", "low", [why])]


# --- each rule's own best class, and pods of an earlier policy ------------------------------------

TWO_TABLES = FIXTURES / "policy-two-tables.yaml"  # netqos: net=high best; batch: net=low best
BATCH = {"qos": "batch", "app": "batch"}
# what an earlier policy's rule netqos injected: net=high at another weight, under its annotation
EARLIER_TERMS = [
    {"weight": 50, "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]}}
]


def two_rules(c: Cluster) -> None:
    """The two-rule policy served and registered; a web pod on fast-1 and one mutated under an earlier
    policy on plain-1; a batch pod on low-1 (where its rule asks) and one on fast-1."""
    policy = load_policy(TWO_TABLES)
    c.policy = TWO_TABLES.read_text()
    c.configuration = webhook_configuration(policy, namespace=NS, ca_bundle=c.tls.ca_cert)
    c.nodes = [node("fast-1", "high"), node("low-1", "low"), node("plain-1")]
    batch_template = {**TEMPLATE, "metadata": {"labels": BATCH}}
    c.workloads += [
        workload("Deployment", "shop", "batch"),
        workload("ReplicaSet", "shop", "batch-7d", owner=("Deployment", "batch"), template=batch_template),
    ]
    mutated = lambda p: dict(evaluate(policy, p).pod)  # noqa: E731 - as the webhook left it
    c.pods = [
        mutated(pod("shop", "web-6f9c-a", QOS, "fast-1", ("ReplicaSet", "web-6f9c"))),
        pod(
            "shop",
            "web-6f9c-old",
            QOS,
            "plain-1",
            ("ReplicaSet", "web-6f9c"),
            preferred=EARLIER_TERMS,
            annotations={"netqos.io/injected": "netqos"},
        ),
        mutated(pod("shop", "batch-7d-a", BATCH, "low-1", ("ReplicaSet", "batch-7d"))),
        mutated(pod("shop", "batch-7d-b", BATCH, "fast-1", ("ReplicaSet", "batch-7d"))),
    ]


def test_each_rules_pods_are_placed_by_its_best_class_and_pods_of_an_earlier_policy_are_counted_apart(
    tls: kubeapi.TLS, tmp_path: Path
) -> None:
    cluster = Cluster(tls)
    two_rules(cluster)
    with kubeapi.serve(cluster.snapshot(), tmp_path) as api:
        out = io.StringIO()
        code = run(StatusArgs(kubeconfig=str(api.kubeconfig), output="json"), out, now=NOW)
        table = io.StringIO()
        run(StatusArgs(kubeconfig=str(api.kubeconfig)), table, now=NOW)
    report = json.loads(out.getvalue())
    # the earlier policy's terms are not the author's own: not explicit, and not missing either
    assert report["pods"] == {
        "selected": 4,
        "injected": 3,
        "explicit": 0,
        "opted_out": 0,
        "missing": 0,
        "injected_earlier": 1,
    }
    # batch-7d-a on net=low is where its rule asks; batch-7d-b on net=high is its rule's lowest class
    assert report["placement"] == {"high": 2, "other": 0, "unlabelled": 1, "low": 1, "pending": 0, "movable": 2}
    assert report["high_nodes"] == 2
    net_low = "a net=low node is feasible now: the pod was placed when none was, or other score plugins outweighed "
    assert report["not_on_high"] == [
        off_high("web-6f9c-old", "plain-1", None, [FEASIBLE_NOW]),
        off_high("batch-7d-b", "fast-1", "high", [net_low + "the preference (run explain)"], target="net=low"),
    ]
    assert (report["problems"], report["missing"], code) == ([], [], 0)
    assert "PODS      selected 4: injected 3, explicit 0, opted out 0, missing 0, injected by an earlier policy 1" in (
        table.getvalue()
    )
    assert "  shop/batch-7d-b on fast-1 (net=high) (wants net=low): " + net_low in table.getvalue()
