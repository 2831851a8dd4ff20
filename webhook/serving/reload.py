"""The policy in force, re-read when its file changes, swapped in as one consistent snapshot.

A ConfigMap mounted as a volume is updated by the kubelet swapping a `..data` symlink, so the
policy file's path starts to resolve to a new file (new inode). Each worker checks the file at
most once per `interval` seconds, from the request that happens to come due (one `stat`; no
thread, no per-request I/O). When the content changed, the new file is compiled *completely*
and only then published by rebinding one reference. A review reads that reference once
(`current()`) and uses the snapshot it got to the end, so it sees one whole policy, old or new,
never a mix: the same per-cycle snapshot the kube-scheduler takes of its cache.

An invalid new file is refused: one ERROR log line naming the file and the problem,
`netqos_policy_reloads_total{result="failure"}` and `netqos_policy_file_rejected` 1, and the last
good policy stays in force until a valid file appears. A subPath mount never sees updates (the
kubelet does not swap it): mount the ConfigMap as a directory.

"The last good policy" is one policy for every worker of a server, not each worker's own: each
worker looks at the file on its own schedule, so one may load a version that another never sees
before the file is deleted or replaced by an invalid one, and the workers would then serve
different policies for as long as the file stays unusable. Every valid version a worker loads is
also written to `LastGood`, one file in a directory the master made before forking; a worker whose
policy file is missing or invalid takes the policy from there when it changes (a worker started
later included).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.documents import OBJECT_LIMIT, read_bytes
from webhook.policy import Policy
from webhook.policy_file import BUILTIN_SOURCE, DEFAULT_DOCUMENT, PolicyError, default_policy, policy_from_bytes
from webhook.serving import metrics
from webhook.serving.filewatch import FileWatch, Look

DEFAULT_INTERVAL = 1.0  # seconds between two checks of the file, per worker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PolicySnapshot:
    policy: Policy
    source: str  # the file, or BUILTIN_SOURCE
    sha256: str  # of the file's bytes (of the built-in document's canonical JSON for the default)
    loaded_at: float  # Unix time
    data: bytes = b""  # the file's bytes (the canonical JSON for the default): what GET /policy shows

    @property
    def version(self) -> str:
        """A short name for the snapshot, as /readyz and the logs show it."""
        return self.sha256[:12]

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "sha256": self.sha256,
            "version": self.version,
            "rules": [r.name for r in self.policy.rules],
            "loaded_at": round(self.loaded_at, 3),
        }


def load_snapshot(path: str | Path | None) -> PolicySnapshot:
    """The policy in `path` (the built-in default for None); raises `PolicyError`."""
    if path is None:
        canonical = json.dumps(DEFAULT_DOCUMENT, sort_keys=True, separators=(",", ":")).encode()
        digest = hashlib.sha256(canonical).hexdigest()
        return PolicySnapshot(default_policy(), BUILTIN_SOURCE, digest, time.time(), canonical)
    source = str(path)
    data = read_bytes(path, "policy", PolicyError, OBJECT_LIMIT)
    return PolicySnapshot(policy_from_bytes(data, source), source, hashlib.sha256(data).hexdigest(), time.time(), data)


def static_snapshot(policy: Policy, source: str = "<in-process policy>") -> PolicySnapshot:
    """A snapshot for a policy given as an object (tests, embedding): hashed by its repr."""
    return PolicySnapshot(policy, source, hashlib.sha256(repr(policy).encode()).hexdigest(), time.time())


class LastGood:
    """The last valid policy file any worker of one server loaded: one file in a directory shared
    by the workers, replaced atomically (write aside, then rename), so a reader sees a whole one."""

    NAME = "policy-last-good"

    def __init__(
        self, directory: str | Path, interval: float = DEFAULT_INTERVAL, clock: Callable[[], float] = time.monotonic
    ):
        self.path = Path(directory) / self.NAME
        self._watch = FileWatch((self.path,), interval, clock)

    def record(self, data: bytes) -> None:
        aside = self.path.with_name(f".{self.NAME}.{os.getpid()}")
        try:
            aside.write_bytes(data)
            os.replace(aside, self.path)
        except OSError as err:  # the other workers then keep what they have: logged, not fatal
            log.warning("cannot share the policy with the other workers through %s: %s", self.path, err.strerror)

    def changed(self) -> bytes | None:
        """The content, when it changed since the previous call (the first call: when there is one)."""
        if self._watch.look(force=True) is not Look.CHANGED:
            return None
        try:
            return self.path.read_bytes()
        except OSError:
            return None


class PolicyWatcher:
    """Hands out the policy snapshot in force; notices when the file changed (rate-limited)."""

    def __init__(
        self,
        initial: PolicySnapshot,
        path: str | Path | None,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        last_good: LastGood | None = None,
    ) -> None:
        """`last_good`: shared with the other workers of the server; None: this process alone."""
        self._snapshot = initial
        self._path = str(path) if path is not None else None
        # No signature seen yet: the first look reads the file once and compares its hash, so a
        # change between the master's load and this point is not missed.
        self._watch = FileWatch((self._path,), interval, clock) if self._path is not None else None
        self._refused: str | None = None  # sha256 of the last refused content, to log it once
        self._announced = False
        self._last_good = last_good
        self._unusable = False  # the file is missing, unreadable or invalid right now

    def share(self, last_good: LastGood) -> None:
        """Share the last good policy with the other workers through `last_good` (the master
        calls this before it forks them)."""
        self._last_good = last_good

    @property
    def watching(self) -> str | None:
        return self._path

    @property
    def file_refused(self) -> bool:
        """The policy file on disk is missing, unreadable or invalid right now, as this process
        last looked: the snapshot in force is an older one."""
        return self._unusable

    def current(self) -> PolicySnapshot:
        """The snapshot in force; use the one returned for the whole review."""
        if not self._announced:  # first use in this process (the worker): publish its metrics
            self._announced = True
            metrics.policy_in_force(self._snapshot.sha256)
        if self._watch is not None and self._watch.due():
            self.check()
        return self._snapshot

    def check(self) -> bool:
        """Look at the file now; swap in its policy if it changed and is valid. True if swapped."""
        if self._watch is None:
            return False
        look = self._watch.look(force=True)
        if look is Look.GONE:  # reported once, not every second, until the file is back
            self._unusable = True
            log.error(
                "policy file %s: cannot read it (%s); keeping the last good policy in force",
                self._path,
                getattr(self._watch.error, "strerror", self._watch.error),
                extra={"policy_version": self._snapshot.version},
            )
        swapped = look is Look.CHANGED and self._path is not None and self._reload(self._path)
        if self._unusable and self._last_good is not None:
            swapped = self._take_last_good(self._last_good) or swapped
        return swapped

    def _take_last_good(self, last_good: LastGood) -> bool:
        """While the file is unusable: the policy another worker loaded last, when it changed."""
        data = last_good.changed()
        if data is None:
            return False
        digest = hashlib.sha256(data).hexdigest()
        old = self._snapshot
        if digest == old.sha256:
            return False
        source = self._path or str(last_good.path)
        try:
            new = PolicySnapshot(policy_from_bytes(data, source), source, digest, time.time(), data)
        except PolicyError:  # a worker wrote only what it compiled; a foreign file is ignored
            return False
        self._snapshot = new
        metrics.policy_switched(new.sha256, old.sha256)
        log.info(
            "policy file %s is unusable: serving version %s (was %s), the last valid version a worker of this "
            "server loaded",
            self._path,
            new.version,
            old.version,
            extra={"policy_version": new.version, "previous_version": old.version},
        )
        return True

    def _reload(self, path: str) -> bool:
        old = self._snapshot
        try:
            data = Path(path).read_bytes()
        except OSError as err:
            self._unusable = True
            log.error(
                "policy file %s: cannot read it (%s); keeping the last good policy in force",
                path,
                err.strerror,
                extra={"policy_version": old.version},
            )
            return False
        digest = hashlib.sha256(data).hexdigest()
        if digest == old.sha256:
            self._unusable = False
            if self._refused:  # the valid content came back: nothing to swap, but no longer refused
                self._refused = None
                metrics.policy_in_force(old.sha256)
            return False  # touched or re-linked, same content
        if digest == self._refused:
            self._unusable = True
            return False
        try:
            new = PolicySnapshot(policy_from_bytes(data, path), path, digest, time.time(), data)
        except PolicyError as err:
            self._unusable = True
            self._refused = digest
            metrics.policy_reload(ok=False)
            log.error(
                "refused the changed policy file: %s; the last good policy (%s here) stays in force until the "
                "file is fixed",
                err,
                old.version,
                extra={"policy_version": old.version, "refused_sha256": digest},
            )
            return False
        self._snapshot = new  # the swap: one reference, so a review sees old or new, never a mix
        self._refused = None
        self._unusable = False
        if self._last_good is not None:
            self._last_good.record(data)
        metrics.policy_in_force(new.sha256, previous=old.sha256)
        metrics.policy_reload(ok=True)
        log.info(
            "policy reloaded from %s: version %s (was %s), rules %s",
            path,
            new.version,
            old.version,
            ", ".join(r.name for r in new.policy.rules),
            extra={"policy_version": new.version, "previous_version": old.version},
        )
        return True
