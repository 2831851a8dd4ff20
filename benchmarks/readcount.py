"""What a command reads from the API server: `python -m benchmarks.readcount OUT -- ARGS...` runs
`netqos-webhook ARGS...` in this interpreter with `webhook.cluster.Reader._decode` counted, and
writes to OUT (JSON) how many answers it decoded (gets and list pages), how many of them were
list pages, the objects those pages held and the bytes of every answer. The count wraps the one
function every answer passes through, so the command runs as it does alone, plus a few
additions per answer.

`python -m benchmarks.readcount --floor KUBECONFIG` is the floor the scale benchmarks measure
beside the commands: a plain paginated list of every pod (`limit=500`, kubectl's chunk size)
through the same client and decoder (orjson), its items dropped; it prints the same counts.
"""

from __future__ import annotations

import json
import sys
from typing import Any


class Counts:
    def __init__(self) -> None:
        self.answers = 0
        self.lists = 0
        self.objects = 0
        self.bytes = 0

    def add(self, data: bytes, decoded: Any) -> None:
        self.answers += 1
        self.bytes += len(data)
        items = decoded.get("items") if isinstance(decoded, dict) else None
        if isinstance(items, list):
            self.lists += 1
            self.objects += len(items)

    def as_json(self) -> dict[str, int]:
        return {"answers": self.answers, "lists": self.lists, "objects": self.objects, "bytes": self.bytes}


def counted(counts: Counts) -> None:
    """Count every answer `Reader` decodes into `counts`."""
    from webhook import cluster

    decode = cluster.Reader._decode

    def _decode(self: cluster.Reader, data: bytes, what: str) -> dict[str, Any]:
        decoded = decode(self, data, what)
        counts.add(data, decoded)
        return decoded

    cluster.Reader._decode = _decode  # type: ignore[method-assign]


def floor(kubeconfig: str) -> Counts:
    """Every pod, a page of 500 at a time, decoded and dropped."""
    from webhook import cluster

    counts = Counts()
    counted(counts)
    with cluster.Reader(cluster.connect(kubeconfig)) as reader:
        for _ in reader.list("Pod"):
            pass
    return counts


def main(argv: list[str]) -> int:
    if argv[:1] == ["--floor"]:
        print(json.dumps(floor(argv[1]).as_json()))
        return 0
    out, separator, *command = argv
    assert separator == "--", "usage: python -m benchmarks.readcount OUT -- ARGS..."
    from webhook.cli import main as cli

    counts = Counts()
    counted(counts)
    try:
        return cli(command)
    finally:
        with open(out, "w") as f:
            json.dump(counts.as_json(), f)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
