"""The worst-case review: a Pod with as many preferred node-affinity terms as fit in a request body
of --max-body-bytes (3 MiB, the API server's own limit), reviewed in process.

    python -m benchmarks.worst_case [--smoke] [--json]

Rows, CPU milliseconds per call (median of several calls, `time.process_time`):
- `admission.handle`: the whole body-to-response path of one /mutate request (JSON decode, the
  policy, the patch, the response): what one worker spends while it answers nothing else.
- `policy.evaluate`: the policy's pass over the pod (`webhook.policy`): one walk over its terms.
- `terms as models`: reading the same terms into `PreferredTerm` models and their identities,
  which the policy's pass did before it walked the terms once (kept here for the comparison).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson

from webhook import admission
from webhook.affinity import PREFERRED, preferred_term_from_api
from webhook.names import DEFAULT_MAX_BODY_BYTES
from webhook.policy import Decision, evaluate
from webhook.policy_file import default_policy


def term(i: int) -> dict[str, Any]:
    """A short term of the pod's own (its key is not the policy's), so as many as possible fit."""
    return {
        "weight": 1 + i % 100,
        "preference": {"matchExpressions": [{"key": f"k{i}", "operator": "In", "values": ["v"]}]},
    }


def review_with(terms: int) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "worst-case", "namespace": "default", "labels": {"qos": "latency-sensitive"}},
        "spec": {
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
            "affinity": {"nodeAffinity": {PREFERRED: [term(i) for i in range(terms)]}},
        },
    }
    return dict(admission.create_review(pod, "benchmark"))


def most_terms(limit: int) -> int:
    """The most terms whose review body stays within `limit` bytes (bisection)."""
    low, high = 1, limit // 40
    while low < high:
        mid = (low + high + 1) // 2
        if len(orjson.dumps(review_with(mid))) <= limit:
            low = mid
        else:
            high = mid - 1
    return low


def cpu_ms(fn: Callable[[], Any], calls: int) -> float:
    samples = []
    for _ in range(calls):
        start = time.process_time()
        fn()
        samples.append((time.process_time() - start) * 1000)
    return statistics.median(samples)


def run(smoke: bool = False) -> dict[str, Any]:
    limit = 64 * 1024 if smoke else DEFAULT_MAX_BODY_BYTES
    calls = 1 if smoke else 7
    terms = most_terms(limit)
    document = review_with(terms)
    body = orjson.dumps(document)
    policy = default_policy()
    pod = document["request"]["object"]
    result = admission.handle(policy, body)
    if result.decision is not Decision.MUTATED:  # benchmark the path we mean to, or say so
        raise SystemExit(f"worst_case: the policy decided {result.decision}, expected mutated")
    raw_terms = pod["spec"]["affinity"]["nodeAffinity"][PREFERRED]

    def as_models() -> None:
        for i, t in enumerate(raw_terms):
            _ = preferred_term_from_api(t, f"{PREFERRED}[{i}]").identity

    return {
        "body_bytes": len(body),
        "terms": terms,
        "admission.handle": cpu_ms(lambda: admission.handle(policy, body), calls),
        "policy.evaluate": cpu_ms(lambda: evaluate(policy, pod), calls),
        "terms as models": cpu_ms(as_models, calls),
    }


def render(row: dict[str, Any]) -> str:
    return (
        "| review bytes | preferred terms | admission.handle ms | policy.evaluate ms | terms as models ms |\n"
        "|---:|---:|---:|---:|---:|\n"
        f"| {row['body_bytes']} | {row['terms']} | {row['admission.handle']:.0f} | {row['policy.evaluate']:.0f} | "
        f"{row['terms as models']:.0f} |\n"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="a 64 KiB body: checks the code path, not speed")
    p.add_argument("--json", action="store_true", help="print the row as JSON instead of a table")
    args = p.parse_args(argv)
    row = run(args.smoke)
    print(json.dumps(row, indent=2) if args.json else render(row), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
