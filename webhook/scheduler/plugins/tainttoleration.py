"""TaintToleration: Filter rejects a node with a NoSchedule or NoExecute taint the pod does not
tolerate; Score counts the PreferNoSchedule taints it does not tolerate, normalised reversed
(fewest: 100).

Sources: kubernetes/kubernetes v1.36 pkg/scheduler/framework/plugins/tainttoleration/
taint_toleration.go (Filter, Score, NormalizeScore), staging/src/k8s.io/component-helpers/
scheduling/corev1/helpers.go (FindMatchingUntoleratedTaint, DoNotScheduleTaintsFilterFunc).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webhook.scheduler.framework import DEFAULT_NORMALIZE_REVERSE, FilterPlugin, Reads, ScorePlugin
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile, Taint, Toleration

NAME = "TaintToleration"
FILTER_EFFECTS = ("NoSchedule", "NoExecute")  # helper.DoNotScheduleTaintsFilterFunc


def untolerated_taint_reason(taint: Taint) -> str:
    """TaintToleration's reason, naming the first untolerated taint.

    This is the wording of kube-scheduler up to v1.34. From v1.35 (kubernetes/kubernetes#134740,
    backported to v1.34 patch releases) the scheduler writes "node(s) had untolerated taint(s)"
    and logs the taint instead, to keep taint values out of pod status; explain reads nodes the
    user can read anyway, so it names the taint.
    """
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def taint_toleration(pod: PodInfo, node: Node, usage: NodeUsage, profile: Profile) -> tuple[str, ...]:
    """TaintToleration: the first NoSchedule or NoExecute taint the pod does not tolerate."""
    taint = first_untolerated_taint(pod.tolerations, node.taints)
    return (untolerated_taint_reason(taint),) if taint is not None else ()


def first_untolerated_taint(tolerations: Sequence[Toleration], taints: Sequence[Taint]) -> Taint | None:
    """FindMatchingUntoleratedTaint over the NoSchedule and NoExecute taints, in node order."""
    for taint in taints:
        if taint.effect in FILTER_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def intolerable_prefer_no_schedule(tolerations: Sequence[Toleration], taints: Sequence[Taint]) -> int:
    """TaintToleration.Score: how many PreferNoSchedule taints no toleration tolerates."""
    return sum(1 for t in taints if t.effect == "PreferNoSchedule" and not any(tol.tolerates(t) for tol in tolerations))


def _taint_score(tolerations: Any, node: Node, usage: NodeUsage) -> int:
    return intolerable_prefer_no_schedule(tolerations, node.taints)


FILTER = FilterPlugin(NAME, taint_toleration, Reads.NODE, lambda pod: pod.tolerations)
SCORE = ScorePlugin(
    NAME,
    lambda pod, snapshot, profile: pod.tolerations,
    _taint_score,
    DEFAULT_NORMALIZE_REVERSE,
    Reads.NODE,
    lambda pod, profile: pod.tolerations,
)
