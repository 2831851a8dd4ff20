"""In-process micro-benchmark of the review path, without sockets, TLS, gunicorn or Flask.

    scripts/bench --micro            (or: python -m benchmarks.micro [--smoke] [--json])

Rows:
- `policy+patch`: `policy.evaluate` on an already-decoded pod, then `patch.diff` of the pod
  against what the policy says it should become: the decision and the patch ops.
- `admission.handle`: the whole body-to-response path the app calls: JSON decode, validation,
  policy, diff, patch encoding (JSON + base64), response document.
- `encode response`: JSON-encoding the response document alone.

Each figure is the median of several timing rounds (each round repeats the call enough times
to last about 0.2 s), in microseconds per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import timeit
from collections.abc import Callable
from typing import Any

from harness import reviews
from webhook import admission
from webhook.patch import diff
from webhook.policy import Decision, evaluate
from webhook.policy_file import default_policy


def per_call_us(fn: Callable[[], Any], rounds: int, round_seconds: float) -> float:
    timer = timeit.Timer(fn)
    number = 1
    while timer.timeit(number) < round_seconds:
        number *= 2
    return statistics.median(timer.timeit(number) / number for _ in range(rounds)) * 1e6


def run(smoke: bool = False) -> list[dict[str, Any]]:
    policy = default_policy()
    rounds, seconds = (2, 0.01) if smoke else (7, 0.2)
    rows = []
    for name, (document, patched) in reviews.scenarios().items():
        review = reviews.fresh(document)
        review["request"]["uid"] = "1b4e28ba-2fa1-41d2-883f-0016d3cca427"
        pod = review["request"]["object"]
        body = reviews.encode(review)

        outcome = evaluate(policy, pod)
        expected = Decision.MUTATED if patched else Decision.NOT_SELECTED
        if outcome.decision is not expected:  # benchmark the path we mean to, or say so
            raise SystemExit(f"micro: {name}: policy decided {outcome.decision}, expected {expected}")
        if bool(diff(pod, outcome.pod)) != patched:
            raise SystemExit(f"micro: {name}: patch presence is not {patched}")
        result = admission.handle(policy, body)

        # Loop values bound as defaults: each function is timed within its own iteration anyway.
        def policy_and_patch(pod: dict[str, Any] = pod) -> None:
            out = evaluate(policy, pod)
            diff(pod, out.pod)

        rows.append(
            {
                "case": name,
                "what": "policy+patch",
                "body_bytes": len(body),
                "us": per_call_us(policy_and_patch, rounds, seconds),
            }
        )
        rows.append(
            {
                "case": name,
                "what": "admission.handle",
                "body_bytes": len(body),
                "us": per_call_us(lambda body=body: admission.handle(policy, body), rounds, seconds),
            }
        )
        rows.append(
            {
                "case": name,
                "what": "encode response",
                "body_bytes": len(body),
                "us": per_call_us(lambda result=result: admission.encode(result.response), rounds, seconds),
            }
        )
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| pod | review bytes | policy+patch µs | admission.handle µs | encode response µs |",
        "|---|---:|---:|---:|---:|",
    ]
    cases: dict[str, dict[str, Any]] = {}
    for r in rows:
        cases.setdefault(r["case"], {"body_bytes": r["body_bytes"]})[r["what"]] = r["us"]
    for case, c in cases.items():
        lines.append(
            f"| {case} | {c['body_bytes']} | {c['policy+patch']:.1f} | {c['admission.handle']:.1f} | "
            f"{c['encode response']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="a fraction of a second; checks the code path, not speed")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    args = p.parse_args(argv)
    rows = run(args.smoke)
    print(json.dumps(rows, indent=2) if args.json else render(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
