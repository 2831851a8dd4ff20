"""`netqos-webhook explain`: the wiring to `webhook.explain`, which owns its flags and output."""

from __future__ import annotations

import argparse

from webhook.policy_file import load_policy


def run(options: argparse.Namespace) -> int:
    """`options` are the flags `webhook.explain.add_arguments` defined, plus --config."""
    from webhook import explain

    return explain.run(explain.options_from(options), load_policy(options.config))
