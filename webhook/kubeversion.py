"""The Kubernetes versions netqos-webhook knows: 1.34 to 1.37, the minor releases it is tested on
(README, the support matrix; each on its real control plane, tests/e2e).

Pure. A version is a minor release (`1.35`); patches do not change what the commands compute.
Read from a flag (`--kubernetes-version 1.35`, `v1.35.4` too), or from an API server's /version
(`gitVersion`, else `major`/`minor`, which providers write as "35+"). A version outside the range
is scored as the nearest one the project knows, and the caller says so (`nearest`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.errors import UsageError


@dataclass(frozen=True, order=True)
class KubeVersion:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


SUPPORTED = tuple(KubeVersion(1, minor) for minor in (34, 35, 36, 37))
OLDEST, NEWEST = SUPPORTED[0], SUPPORTED[-1]


class BadVersion(UsageError, ValueError):
    """A version that is not MAJOR.MINOR[.PATCH]; the message names where it was written."""


def parse(text: str, where: str = "--kubernetes-version") -> KubeVersion:
    """`1.35`, `v1.35`, `1.35.4`, `v1.35.4-eks-1a2b3c`: the major and minor release."""
    core = text.strip().removeprefix("v").split("-", 1)[0].split("+", 1)[0]
    parts = core.split(".")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
        raise BadVersion(f"{where} {text!r} is not a Kubernetes version; write MAJOR.MINOR, e.g. {NEWEST}")
    return KubeVersion(int(parts[0]), int(parts[1]))


def from_server(info: Mapping[str, Any]) -> KubeVersion:
    """The version an API server's /version reports: gitVersion (v1.35.4), else major and minor
    (providers add a "+" to the minor)."""
    git = info.get("gitVersion")
    if isinstance(git, str) and git:
        return parse(git, "the API server's /version gitVersion")
    major, minor = str(info.get("major", "")), str(info.get("minor", "")).rstrip("+")
    return parse(f"{major}.{minor}", "the API server's /version major.minor")


def nearest(version: KubeVersion) -> tuple[KubeVersion, str | None]:
    """The known version to compute as for `version`, and a warning when it is not `version`."""
    if version in SUPPORTED:
        return version, None
    chosen = OLDEST if version < OLDEST else NEWEST
    known = f"{OLDEST} to {NEWEST}"
    return chosen, f"Kubernetes {version} is outside the versions netqos-webhook knows ({known}); computing as {chosen}"
