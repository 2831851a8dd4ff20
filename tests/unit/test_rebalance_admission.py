"""rebalance predicts a replacement as the API server would admit it: from the API server's own
dry-run answer where the command got one, else from `webhook.admitted`'s model of the admission
steps (LimitRanger's defaults, the pod strategy's merge of mismatchLabelKeys, ...); each candidate
says which."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from harness.kubeapi import node, pod
from tests.unit.test_rebalance import LONG_AGO, NOW, QOS, controller_of, registered, sized
from webhook import admitted, evictability, rebalance
from webhook.policy_file import default_policy

TENANT = {**QOS, "tenant": "a"}
ONE_CPU = {"requests": {"cpu": "1"}}
# The tenant-isolation term (KEP-3633): keep away from pods of any other tenant. The API server
# merges `tenant NotIn (a)` into its selector; unmerged, it keeps away from every tenant's pods.
ISOLATED = {
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchExpressions": [{"key": "tenant", "operator": "Exists"}]},
                    "mismatchLabelKeys": ["tenant"],
                    "topologyKey": "kubernetes.io/hostname",
                },
            }
        ]
    }
}


def running(name: str, node_name: str, labels: dict[str, str], owner: str, resources: Any = None) -> dict[str, Any]:
    p = pod("shop", name, labels, node_name, ("ReplicaSet", owner), LONG_AGO)
    if resources is not None:
        p["spec"]["containers"][0]["resources"] = resources
    return p


def template(labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "app", "image": "app:1"}], **spec}}


def plan_of(
    pods: list[dict[str, Any]],
    template_of_web: dict[str, Any],
    objects: admitted.Objects | None = None,
    answer: rebalance.DryRun | None = None,
) -> rebalance.Plan:
    """fast-1 (net=high, 2 CPUs) and slow-1 (net=low, 16 CPUs); `web`'s ReplicaSet has
    `template_of_web`; the API server's dry run answers `answer` for its replacement (None: not asked)."""
    policy = default_policy()
    inventory = rebalance.Inventory(policy, rebalance.Options(now=NOW, min_replicas=0))
    for n in (sized(node("fast-1", "high"), cpu="2"), sized(node("slow-1", "low"), cpu="16")):
        inventory.add_node(n)
    for p in pods:
        inventory.add_pod(p)
    if objects is not None:
        inventory.admission = objects
    candidate = next(p for p in pods if p["metadata"]["name"] == "web-x")
    controllers = {("shop", "ReplicaSet", "web"): controller_of(candidate, template_of_web)}
    if answer is not None:
        inventory.dry_runs = dict.fromkeys(inventory.replacement_pods(controllers), answer)
    return rebalance.plan(inventory, registered(policy), controllers, budgets=evictability.Budgets([]))


def limit_range(cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "defaults", "namespace": "shop"},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": cpu}}]},
    }


# fast-1 has 1 CPU free; the candidate runs on slow-1; its template requests nothing
STRANDED = [running("web-x", "slow-1", QOS, "web", ONE_CPU), running("other", "fast-1", {"app": "db"}, "db", ONE_CPU)]


@pytest.mark.parametrize(
    ("case", "objects", "action", "constraint"),
    [
        ("no LimitRange: the replacement requests nothing and fits fast-1", admitted.Objects({}, {}), "evict", ""),
        (
            "a LimitRange's default of 2 CPUs: fast-1 cannot hold it",
            admitted.Objects.of([limit_range("2")], []),
            "skip",
            "placement",
        ),
        ("a LimitRange's default of 1 CPU fits", admitted.Objects.of([limit_range("1")], []), "evict", ""),
    ],
)
def test_the_model_gives_the_replacement_its_namespaces_default_requests(
    case: str, objects: admitted.Objects, action: str, constraint: str
) -> None:
    [row] = plan_of(STRANDED, template(QOS), objects).candidates
    assert (row.action, row.constraint, row.admission) == (action, constraint, rebalance.MODELLED), case
    if action == "skip":
        assert row.reason == "no net=high node fits the replacement: 1/1 net=high node(s): Insufficient cpu"


def test_the_dry_runs_answer_is_the_replacement_whatever_the_model_says() -> None:
    """The API server's answer carries what no model knows (here: a mutating webhook that sets 2
    CPUs); without a LimitRange read, the model alone would move the pod."""
    answer = copy.deepcopy(template(QOS))
    answer["metadata"]["namespace"] = "shop"
    answer["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
    [modelled] = plan_of(STRANDED, template(QOS), admitted.Objects({}, {})).candidates
    [row] = plan_of(STRANDED, template(QOS), admitted.Objects({}, {}), rebalance.DryRun(answer)).candidates
    assert (modelled.action, modelled.admission) == ("evict", rebalance.MODELLED)
    assert (row.action, row.constraint, row.admission) == ("skip", "placement", rebalance.DRY_RUN)


def test_a_replacement_the_api_server_refuses_is_never_evicted_saying_why() -> None:
    refused = rebalance.DryRun(
        refused='HTTP 403 Forbidden: pods "web-x7k2q" is forbidden: maximum cpu usage per Container'
    )
    [row] = plan_of(STRANDED, template(QOS), admitted.Objects({}, {}), refused).candidates
    assert (row.action, row.constraint, row.admission) == ("skip", "replacement", rebalance.DRY_RUN)
    assert row.reason == f"the API server refuses to create its replacement (dry run): {refused.refused}"


def test_a_replacement_the_model_rejects_is_never_evicted_saying_why() -> None:
    [row] = plan_of(STRANDED, template(QOS, runtimeClassName="kata"), admitted.Objects({}, {})).candidates
    assert (row.action, row.constraint) == ("skip", "replacement")
    assert row.reason == (
        'the API server would refuse to create its replacement: pod rejected: RuntimeClass "kata" not found'
    )


@pytest.mark.parametrize(
    ("case", "mismatch", "action"),
    [
        # merged, the term keeps away from tenant b's pod on fast-1 only: slow-1 wins by 200
        ("mismatchLabelKeys merged: fast-1, with another tenant's pod, loses", ["tenant"], "skip"),
        # without the key, the term keeps away from the candidate on slow-1 as much as from fast-1
        ("no mismatchLabelKeys: both nodes hold a tenant's pod, fast-1 wins", [], "evict"),
    ],
)
def test_the_replacements_affinity_terms_carry_the_merged_label_keys(
    case: str, mismatch: list[str], action: str
) -> None:
    affinity = copy.deepcopy(ISOLATED)
    term = affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    term["mismatchLabelKeys"] = mismatch
    pods = [
        running("web-x", "slow-1", TENANT, "web", ONE_CPU),
        running("other", "fast-1", {"app": "db", "tenant": "b"}, "db", {"requests": {"cpu": "100m"}}),
    ]
    [row] = plan_of(pods, template(TENANT, affinity=affinity), admitted.Objects({}, {})).candidates
    assert row.action == action, (case, row.reason)
