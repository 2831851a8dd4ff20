"""`status`: does a live cluster carry out NetQoS? Pure: the cluster's API JSON in, a `Report` out.

Three questions, each answered from the objects `webhook.cluster.Reader` returned (the command
wires the two; nothing here does I/O):

1. Registration (`registration`): the MutatingWebhookConfiguration's `<rule>.netqos.io` entries
   or the bound MutatingAdmissionPolicies, the Service's endpoints, the Deployment, the
   certificates (or, for a `register --url` registration, the certificate served at each URL).
2. Coverage (`coverage`): each selected pod in an admitted namespace classified by
   `webhook.policy.evaluate`, the decision `/mutate` makes: `injected`, `explicit`, `opted_out`
   or `missing`.
3. Placement (`coverage`): the `net` class of each selected pod's node, and for a pod not on a
   `net=high` node while one exists, why (`webhook.placement`).

`model` holds what is read (`ClusterView`) and what is reported (`Report`); `policy_location`
where the webhook's Deployment serves its policy from. The two checks import `model` only, never
each other: `analyse` here composes them.

What RBAC forbids reading is `Unknown`: listed under `unknown`, never a problem. Pods and nodes
arrive as iterables and are reduced one at a time to small records, so memory grows with the
number of selected pods, not with the size of their JSON; the pods on `net=high` nodes are folded
into one usage tally per such node as they stream by. Objects are read through `webhook.apidata`:
the API server sends well-formed objects, so a `ShapeError` out of `analyse` means an API server
(or a stand-in) that sent something no Kubernetes stores.

`webhook.commands.status` reads the cluster and renders the report.
"""

from __future__ import annotations

from webhook.policy import policy_warnings
from webhook.scheduler.config import profile_notes
from webhook.status import coverage, registration
from webhook.status.coverage import COVERAGE, EARLIER, could_fit, owner_lookups, with_owners, with_plan
from webhook.status.model import (
    AdmissionPolicyEntry,
    Certificate,
    ClusterView,
    ConfigMapJSON,
    DeploymentJSON,
    Entry,
    MissingPod,
    ObjectJSON,
    OffHigh,
    PodsOnNodes,
    Read,
    Report,
    SecretJSON,
    Unknown,
    WebhookConfigurationJSON,
)
from webhook.status.policy_location import PolicyLocation, policy_location
from webhook.status.registration import DAYS_WARNING
from webhook.status.served import InForce, Served, choose

__all__ = [
    "COVERAGE",
    "DAYS_WARNING",
    "AdmissionPolicyEntry",
    "Certificate",
    "ClusterView",
    "ConfigMapJSON",
    "DeploymentJSON",
    "Entry",
    "MissingPod",
    "ObjectJSON",
    "OffHigh",
    "PodsOnNodes",
    "PolicyLocation",
    "Read",
    "Report",
    "SecretJSON",
    "Unknown",
    "WebhookConfigurationJSON",
    "EARLIER",
    "InForce",
    "Served",
    "analyse",
    "choose",
    "could_fit",
    "owner_lookups",
    "policy_location",
    "with_owners",
    "with_plan",
]


def analyse(view: ClusterView) -> Report:
    report = Report(policy_source=view.policy_source, rules=[r.name for r in view.policy.rules])
    if view.policy_problem:
        report.problems.append(view.policy_problem)
    report.problems += [f"policy {view.policy_source}: {w}" for w in policy_warnings(view.policy)]
    report.unknown += view.version_notes
    report.unknown += profile_notes(view.profiles.values())  # what the --scheduler-config files say, not evaluated
    registered = registration.check(view, report)
    if not view.policy_known:  # which pods should carry which terms is not known: judged by no policy
        report.pods_unknown = True
        report.unknown.append("which selected pods carry the preference (the policy the webhook serves is not known)")
        return report
    coverage.check(view, report, registered)
    return report
