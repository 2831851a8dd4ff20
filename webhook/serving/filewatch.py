"""Has a set of files changed? Asked often, answered from at most one look per interval.

The one primitive under `tls.CertificateRotator` and `reload.PolicyWatcher` (as
controller-runtime's certwatcher is under its webhook server). A look is one `stat` per path,
following symlinks, so a Secret or ConfigMap volume's `..data` swap shows as a new inode. No
thread and no inotify: the caller asks from a request it is serving anyway, and a look costs
microseconds once per interval.

A path that cannot be stat'ed reports `Look.GONE` once; when it comes back it reports
`Look.CHANGED`, whatever its content (the caller compares content if it cares).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from enum import Enum
from pathlib import Path

Signature = tuple[tuple[int, int, int, int], ...]


class Look(Enum):
    NOT_DUE = "not_due"  # looked less than an interval ago, or another thread is looking now
    UNCHANGED = "unchanged"
    CHANGED = "changed"  # the files differ from the last look; the caller rebuilds from them
    GONE = "gone"  # some path cannot be stat'ed (reported once until it is back)


def signature(paths: Sequence[str | Path]) -> Signature:
    """(device, inode, size, mtime) of each path; raises OSError when one cannot be stat'ed."""
    return tuple((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) for st in map(os.stat, paths))


class FileWatch:
    """`look()` tells whether `paths` changed since the previous look, at most once per `interval`."""

    def __init__(
        self,
        paths: Sequence[str | Path],
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        seen: Signature | None = None,
    ) -> None:
        """`seen`: the signature the caller's state was built from; None: the first look that
        finds the files reports CHANGED."""
        self.paths = tuple(paths)
        self.error: OSError | None = None  # why the files were GONE, for the caller's message
        self._interval = interval
        self._clock = clock
        self._seen = seen
        self._gone = False
        self._next = clock() + interval
        self._looking = threading.Lock()  # gthread workers: one thread looks, the others go on

    def due(self) -> bool:
        return self._clock() >= self._next

    def look(self, force: bool = False) -> Look:
        if not (force or self.due()) or not self._looking.acquire(blocking=False):
            return Look.NOT_DUE
        try:
            self._next = self._clock() + self._interval
            try:
                now = signature(self.paths)
            except OSError as err:
                self.error = err
                if self._gone:
                    return Look.UNCHANGED
                self._gone, self._seen = True, None
                return Look.GONE
            self._gone = False
            if now == self._seen:
                return Look.UNCHANGED
            self._seen = now
            return Look.CHANGED
        finally:
            self._looking.release()
