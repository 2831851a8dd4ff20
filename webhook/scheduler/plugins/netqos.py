"""The NetQoS scheduler plugin's port: the pod label it serves, the node label it scores and its
score table (net=high 100, net=low 0, any other value or none 10), and the fast nodes a policy
prefers (its first score table's best class, else the plugin's net=high).

Sources: /work/shared/reference/netqos-scheduler-plugin.txt, docs/scheduling.md.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from webhook.names import MAX_NODE_SCORE
from webhook.policy import Policy, Rule
from webhook.scheduler.framework import Reads, ScorePlugin
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile, Target
from webhook.scoretable import ScoreTable

NAME = "NetQoS"  # the NetQoS scheduler plugin, in a profile that enables it
# The NetQoS scheduler plugin's port: the pod label it serves and the node label it scores.
NETQOS_POD_LABEL = ("qos", "latency-sensitive")
NETQOS_NODE_LABEL = "net"
NETQOS_TABLE: Mapping[str, int] = {"high": MAX_NODE_SCORE, "low": 0}  # any other value, or none: 10
NETQOS_UNLISTED = 10
NETQOS_TARGET = Target(NETQOS_NODE_LABEL, frozenset(v for v, s in NETQOS_TABLE.items() if s == MAX_NODE_SCORE))
NETQOS_SLOW = frozenset(v for v, s in NETQOS_TABLE.items() if s < NETQOS_UNLISTED)  # low


def fast_target(policy: Policy) -> Target:
    """The nodes `policy` prefers most: the key of its first score table and the values that score
    highest there (above any other value); the NetQoS plugin's `net=high` when no rule has a table
    (terms written by hand)."""
    return _table_target(_fast_table(policy.rules))


def slow_values(policy: Policy) -> frozenset[str]:
    """The values of `fast_target`'s key that `policy` scores lowest, below any other value (the
    plugin's `net=low`): empty when no listed value scores below the unlisted ones."""
    return _table_slow(_fast_table(policy.rules))


def rule_target(policy: Policy, rule: Rule) -> Target:
    """The nodes `rule` prefers most: its own table's key and top-scoring values (`net In [low]`
    for a rule whose table scores low best), else, for terms written by hand, `fast_target`."""
    return _table_target(_fast_table((rule,) + policy.rules))


def rule_slow_values(policy: Policy, rule: Rule) -> frozenset[str]:
    """`slow_values` of `rule`'s own table (`rule_target`'s key)."""
    return _table_slow(_fast_table((rule,) + policy.rules))


def judging_rule(policy: Policy, labels: Mapping[str, str]) -> Rule | None:
    """The rule a pod with `labels` is placed by: the first that selects it and has a score table
    with a best class (`rule_target`), else the first that selects it; None when none does. A pod
    several rules select carries each one's terms; the first table's best class is its target."""
    selecting = [rule for rule in policy.rules if rule.pod_selector.matches(labels)]
    return next((rule for rule in selecting if _fast_table((rule,)) is not None), next(iter(selecting), None))


def _table_target(table: ScoreTable | None) -> Target:
    if table is None:
        return NETQOS_TARGET
    top = max(score for _, score in table.scores)
    return Target(table.key, frozenset(value for value, score in table.scores if score == top))


def _table_slow(table: ScoreTable | None) -> frozenset[str]:
    if table is None:
        return NETQOS_SLOW
    bottom = min(score for _, score in table.scores)
    if bottom >= table.unlisted:
        return frozenset()
    return frozenset(value for value, score in table.scores if score == bottom)


def _fast_table(rules: Iterable[Rule]) -> ScoreTable | None:
    """The first score table of `rules` whose best listed value scores above the unlisted ones."""
    for rule in rules:
        table = rule.table
        if table is not None and table.scores and max(score for _, score in table.scores) > table.unlisted:
            return table
    return None


def netqos_score(pod_labels: Mapping[str, str], node_labels: Mapping[str, str]) -> int:
    """The NetQoS plugin's score table (see docs/scheduling.md for the plugin's fall-through)."""
    key, value = NETQOS_POD_LABEL
    if pod_labels.get(key) != value:
        return 0
    net = node_labels.get(NETQOS_NODE_LABEL)
    return NETQOS_TABLE.get(net, NETQOS_UNLISTED) if net is not None else NETQOS_UNLISTED


def _netqos_score(labels: Any, node: Node, usage: NodeUsage) -> int:
    return netqos_score(labels, node.labels)


def _netqos_key(pod: PodInfo, profile: Profile) -> Hashable:
    return pod.labels.get(NETQOS_POD_LABEL[0])


SCORE = ScorePlugin(NAME, lambda pod, snapshot, profile: pod.labels, _netqos_score, None, Reads.NODE, _netqos_key)
