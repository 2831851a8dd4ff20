"""status says what rebalance's plan found of a pod's placement where its own, cheaper judge
(the pods of the net=high nodes alone) called a net=high node feasible: the plan's filter
reasons, or the probability that the scheduler's sample holds the node."""

from __future__ import annotations

import pytest

from webhook import placement, status
from webhook.status import OffHigh, Report

FEASIBLE = (placement.FEASIBLE_NOW,)
FULL = ("2/2 net=high node(s): Insufficient cpu",)
ANTI = ("1/1 net=high node(s): node(s) didn't match pod anti-affinity rules",)
RARE = ("a net=high node is feasible now, but kube-scheduler scores 144 of the 300 feasible nodes ...",)


@pytest.mark.parametrize(
    ("why", "plan_says", "shown"),
    [
        (FEASIBLE, ANTI, ANTI),  # the plan ran InterPodAffinity over every node's pods
        (FEASIBLE, RARE, RARE),  # the plan weighed the scheduler's sample
        (FEASIBLE, (), FEASIBLE),  # the plan found nothing against it (or did not judge it)
        ((placement.FEASIBLE_WITHOUT_USAGE,), ANTI, ANTI),
        (FULL, ANTI, FULL),  # a pod status already finds no room for keeps its own reasons
        ((placement.FEASIBLE_PENDING,), ANTI, (placement.FEASIBLE_PENDING,)),  # pending pods are no candidates
    ],
    ids=["unfit", "rare", "nothing-said", "usage-unread", "already-unfit", "pending"],
)
def test_status_says_what_the_plan_found_where_it_called_a_fast_node_feasible(why, plan_says, shown):
    report = Report(
        not_on_high=[OffHigh("shop", "web-0", "slow-1", "low", why), OffHigh("shop", "web-1", "slow-1", "low", why)]
    )
    status.with_plan(report, {("shop", "web-0"): plan_says})
    assert [p.why for p in report.not_on_high] == [shown, why]
