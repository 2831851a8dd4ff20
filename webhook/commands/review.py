"""`netqos-webhook review`: the offline dry run, through the same code as `POST /mutate`."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import yaml

from webhook.errors import UsageError


@dataclass(frozen=True)
class ReviewArgs:
    file: str  # a path, or - for stdin
    output: str = "response"
    config: str | None = None


def run(args: ReviewArgs) -> int:
    import jsonpatch

    from webhook.admission import BadReview, create_review, review, wire_patch
    from webhook.documents import read_document
    from webhook.policy_file import load_policy

    document: Any = read_document(args.file, "input")
    policy = load_policy(args.config)
    if isinstance(document, dict) and document.get("kind") == "Pod":
        document = create_review(document, "netqos-webhook-review")
    elif not (isinstance(document, dict) and document.get("kind") == "AdmissionReview"):
        kind = document.get("kind") if isinstance(document, dict) else type(document).__name__
        raise UsageError(f"{args.file}: expected a Pod or an AdmissionReview, got kind {kind!r}")
    try:
        result = review(policy, document)
    except BadReview as err:
        raise UsageError(f"{args.file}: {err}") from None
    if args.output == "response":
        print(json.dumps(result.response, indent=2))
    else:
        ops = wire_patch(result.response)
        if args.output == "patch":
            print(json.dumps(ops, indent=2))
        else:  # apply what we would send, so the output proves the patch and not just the policy
            pod = jsonpatch.apply_patch(document["request"].get("object"), ops)
            print(yaml.safe_dump(pod, sort_keys=False), end="")
    for warning in result.response["response"].get("warnings", ()):
        print(f"Warning: {warning}", file=sys.stderr)
    return 0
