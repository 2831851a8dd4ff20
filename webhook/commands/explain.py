"""`netqos-webhook explain`: the policy of --config, then `webhook.explain`, which owns the output."""

from __future__ import annotations

from typing import TYPE_CHECKING

from webhook.policy_file import load_policy

if TYPE_CHECKING:
    from webhook.explain import ExplainOptions


def run(options: ExplainOptions, config: str | None) -> int:
    from webhook import explain

    return explain.run(options, load_policy(config))
