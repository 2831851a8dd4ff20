"""Which policy is in force when the webhook's ConfigMap cannot be used (pure).

The running webhook refuses an invalid policy file and keeps serving its last good policy
(`webhook.serving.reload`), so an invalid ConfigMap does not mean the built-in default is in
force: the pods say what they serve (`GET /policy`, read through the API server's pod proxy).
`choose` turns what the ConfigMap gave and what the ready pods answered into the policy `status`
judges by:

- every pod that answered serves one policy: that one, and the problem says the ConfigMap is
  invalid and the running pods keep it;
- the pods serve several, or none could be read: no policy is known to be in force; the built-in
  default only lists the pods, and the registration is not compared with it (`known` False), so
  `status` never advises re-registering for a policy no pod serves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.policy import Policy
from webhook.policy_file import PolicyError, policy_from_bytes

# How the command's reading says the ConfigMap's policy does not compile (clusterread.policy_of).
INVALID = "the webhook's policy is invalid: "
SHORT = 12  # hex digits of a policy's sha256 shown, as /readyz's `version`


@dataclass(frozen=True)
class Served:
    """What one pod answered at GET /policy, or why it could not be read (`error`)."""

    pod: str
    sha256: str = ""
    rules: tuple[str, ...] = ()
    document: str = ""
    source: str = ""
    error: str = ""

    @staticmethod
    def of(pod: str, answer: Mapping[str, Any]) -> Served:
        """From the JSON a pod's /policy answered (`webhook.serving.app`)."""
        rules = answer.get("rules")
        return Served(
            pod,
            str(answer.get("sha256") or ""),
            tuple(str(r) for r in rules) if isinstance(rules, list) else (),
            str(answer.get("document") or ""),
            str(answer.get("source") or ""),
        )


@dataclass(frozen=True)
class InForce:
    """The policy to judge by, where it came from, the problem to report, and whether it is known
    to be the policy the webhook serves."""

    policy: Policy
    source: str
    problem: str | None
    known: bool = True


def choose(config_map: InForce, served: Sequence[Served], reason: str = "") -> InForce:
    """`config_map` (what the ConfigMap gave: the built-in default and a problem when it is
    unusable) judged against what the ready pods serve. `reason`: why no pod was asked (no ready
    endpoint, RBAC), when `served` is empty."""
    if config_map.problem is None:
        return config_map
    why = config_map.problem.removeprefix(INVALID)
    unusable = f"the ConfigMap is invalid: {why}" if config_map.problem.startswith(INVALID) else config_map.problem
    answered = [s for s in served if not s.error]
    hashes = sorted({s.sha256 for s in answered})
    if len(hashes) == 1:
        one = next(s for s in answered if s.sha256 == hashes[0])
        source = f"the policy the webhook's pods serve (version {one.sha256[:SHORT]}, from {one.source or 'its file'})"
        try:
            policy = policy_from_bytes(one.document.encode(), f"pod {one.pod} /policy")
        except PolicyError as err:  # never from a webhook that compiled it: a stand-in answered
            return _unknown(config_map, f"{unusable}; pod {one.pod} serves a policy that does not compile: {err}")
        return InForce(policy, source, f"{unusable}; the running pods keep policy {one.sha256[:SHORT]}")
    if hashes:
        by_hash = "; ".join(f"{h[:SHORT]} (pods {', '.join(s.pod for s in answered if s.sha256 == h)})" for h in hashes)
        return _unknown(config_map, f"{unusable}; the running pods serve different policies: {by_hash}")
    failed = "; ".join(f"pod {s.pod}: {s.error}" for s in served if s.error) or reason or "no ready pod to ask"
    return _unknown(config_map, f"{unusable}; which policy the running pods keep could not be read ({failed})")


def _unknown(config_map: InForce, problem: str) -> InForce:
    return InForce(
        config_map.policy,
        f"{config_map.source} (only to list pods: the policy the webhook serves is not known)",
        f"{problem}; the registration is not compared with any policy until it is known: fix the ConfigMap",
        known=False,
    )
