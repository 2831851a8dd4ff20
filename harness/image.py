"""The project's image, built from its Dockerfile on a machine without a registry, and loaded into
the containerd of every real node of a cluster (`scripts/image`).

- the base: the Dockerfile's FROM (`python:<version>-slim-bookworm`) cannot be pulled here, so a
  stand-in is made from Debian packages: `mmdebstrap --variant=minbase` of bookworm with python3
  and pip, without the EXTERNALLY-MANAGED marker (the official python images have none, and the
  Dockerfile's `pip install` relies on that), documentation, perl or apt lists; it is tagged with
  the Dockerfile's FROM, so the Dockerfile is built unchanged. Its Python is Debian's (3.11), not
  the official image's; the Dockerfile's user, entrypoint and command are its own.
- the build: `buildah bud` of the unchanged Dockerfile (buildah reads the BuildKit `RUN --mount`
  the Dockerfile uses, and never fetches the `# syntax=` frontend), with the machine's CA bundle
  mounted for pip's downloads, as a `docker save` archive in the cache;
- the load: `ctr images import` into each node's containerd, as `kind load docker-image` does.

`dockerfile()` reads what tests compare against the local build: FROM, USER, ENTRYPOINT, CMD.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from harness import nodes as realnodes
from harness.controlplane import default_directory
from webhook import __version__

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "Dockerfile"
IMAGE = f"netqos-webhook:{__version__}"  # deploy/base/deployment.yaml's image
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "python3-pip")
# Not needed to run Python or pip; mmdebstrap's usrmerge step brings perl in.
BASE_PURGE = ("usrmerge", "libfile-find-rule-perl", "libnumber-compare-perl", "libtext-glob-perl", "perl")
TOOLS = {"buildah": "buildah", "mmdebstrap": "mmdebstrap"}  # command -> Debian package
BASE_LABEL = "io.netqos.base-recipe"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
BUILD_TIMEOUT = 1800.0


class ImageError(RuntimeError):
    """The image could not be built or loaded; the message says which step and why."""


@dataclass(frozen=True)
class Dockerfile:
    """What the Dockerfile says about the image a user builds with `docker build`."""

    bases: tuple[str, ...]  # each stage's FROM image
    user: str | None
    entrypoint: list[str] | None
    cmd: list[str] | None


def dockerfile(path: Path = DOCKERFILE) -> Dockerfile:
    bases: list[str] = []
    user = None
    entrypoint = cmd = None
    for raw in _instructions(path.read_text()):
        word, _, rest = raw.partition(" ")
        word = word.upper()
        if word == "FROM":
            bases.append(rest.split()[0])
        elif word == "USER":
            user = rest.strip()
        elif word == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif word == "CMD":
            cmd = json.loads(rest)
    return Dockerfile(tuple(bases), user, entrypoint, cmd)


def _instructions(text: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    found, current = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        found.append(current + stripped)
        current = ""
    return found


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "netqos-webhook" / "images"


def archive_path(name: str = IMAGE) -> Path:
    """Where the image `name` is saved, its directory made: buildah's store may hold the base
    already (it outlives the cache), so the base step, which makes the directory too, may not run."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    return cache_dir() / f"{name.replace(':', '-')}.tar"


def _run(*command: str, timeout: float = BUILD_TIMEOUT, cwd: Path | None = None) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if result.returncode != 0:
        raise ImageError(f"{' '.join(command[:4])}... exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result.stdout


def unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "building the image needs root (buildah, mmdebstrap)"
    missing = [pkg for cmd, pkg in TOOLS.items() if shutil.which(cmd) is None]
    if missing and shutil.which("apt-get") is None:
        return f"building the image needs the Debian packages {', '.join(missing)} and there is no apt-get"
    return None


def ensure_tools() -> None:
    missing = [pkg for cmd, pkg in TOOLS.items() if shutil.which(cmd) is None]
    if missing:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]
        if subprocess.run(install, env=env, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
            _run(*install)


def _exists(name: str) -> bool:
    return subprocess.run(["buildah", "inspect", "--type", "image", name], capture_output=True).returncode == 0


def _recipe() -> str:
    return hashlib.sha256(json.dumps([SUITE, MIRROR, BASE_PACKAGES, BASE_PURGE]).encode()).hexdigest()[:12]


def is_local_base(tag: str) -> bool:
    """Is `tag` in buildah's store the stand-in this module makes (its label names the recipe)?"""
    if not _exists(_qualified(tag)):
        return False
    labels = json.loads(_run("buildah", "inspect", "--type", "image", _qualified(tag)))["OCIv1"]["config"]
    return bool((labels.get("Labels") or {}).get(BASE_LABEL) == _recipe())


def base(tag: str) -> float:
    """The stand-in for `tag` (the Dockerfile's FROM) in buildah's store; seconds it took (0: there)."""
    if is_local_base(tag):
        return 0.0
    label = f"{BASE_LABEL}={_recipe()}"
    started = time.monotonic()
    cache_dir().mkdir(parents=True, exist_ok=True)
    rootfs = cache_dir() / "base-rootfs.tar"
    hooks = [
        f'--customize-hook=chroot "$1" dpkg --purge --force-depends {" ".join(BASE_PURGE)}',
        '--customize-hook=rm -rf "$1"/usr/lib/python3*/EXTERNALLY-MANAGED "$1"/var/lib/apt/lists/* "$1"/var/cache/*',
    ]
    excludes = [f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("doc", "man", "info", "locale")]
    _run(
        "mmdebstrap",
        "--variant=minbase",
        f"--include={','.join(BASE_PACKAGES)}",
        '--aptopt=Apt::Install-Recommends "false"',
        *excludes,
        *hooks,
        SUITE,
        str(rootfs),
        f"deb {MIRROR} {SUITE} main",
    )
    container = _run("buildah", "from", "scratch").strip()
    try:
        mount = _run("buildah", "mount", container).strip()
        _run("tar", "-C", mount, "-xf", str(rootfs))
        _run(
            "buildah",
            "config",
            "--env",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--env",
            "LANG=C.UTF-8",
            "--cmd",
            "python3",
            "--label",
            label,
            container,
        )
        _run("buildah", "commit", "-q", container, _qualified(tag))
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True)
        rootfs.unlink(missing_ok=True)
    return time.monotonic() - started


def _qualified(name: str) -> str:
    """The name as containerd and the kubelet spell it (docker.io/library/ for a bare name)."""
    first = name.split("/", 1)[0]
    if "/" not in name:
        return f"docker.io/library/{name}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{name}"
    return name


@dataclass(frozen=True)
class Built:
    archive: Path
    size: int  # bytes: the archive, i.e. the image's layers uncompressed, as `docker save` writes them
    base_seconds: float
    build_seconds: float


def build() -> Built:
    """The Dockerfile built into `IMAGE`, saved as an archive in the cache."""
    ensure_tools()
    facts = dockerfile()
    base_seconds = sum(base(tag) for tag in sorted(set(facts.bases)))
    started = time.monotonic()
    _run(
        "buildah",
        "bud",
        "--isolation=chroot",
        "--pull-never",
        "--layers",
        f"--volume={CA_BUNDLE}:{CA_BUNDLE}:ro",  # the machine's CA bundle, for pip's downloads
        "-t",
        _qualified(IMAGE),
        "-f",
        str(DOCKERFILE),
        str(REPO),
    )
    archive = archive_path()
    archive.unlink(missing_ok=True)
    _run("buildah", "push", "-q", _qualified(IMAGE), f"docker-archive:{archive}:{_qualified(IMAGE)}")
    return Built(archive, archive.stat().st_size, base_seconds, time.monotonic() - started)


def inspect(name: str = IMAGE) -> dict[str, object]:
    """The image's OCI config (User, Entrypoint, Cmd, ...), as buildah stored it."""
    config: dict[str, object] = json.loads(_run("buildah", "inspect", "--type", "image", _qualified(name)))
    return config


def load(directory: Path, archive: Path) -> list[str]:
    """Import the archive into the containerd of each node of the cluster in `directory`."""
    names = realnodes.recorded_nodes(directory)
    if not names:
        raise ImageError(f"no real nodes in {directory}; start them with 'scripts/cluster up --nodes N'")
    with ThreadPoolExecutor(max_workers=len(names)) as pool:  # each node's containerd unpacks its own copy
        list(pool.map(lambda name: realnodes.import_image(directory, name, archive), names))
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/image",
        description=(
            f"Build {IMAGE} from the Dockerfile (buildah, a base made from Debian packages: no registry needed) "
            "and load it into the containerd of each real node of the cluster in $NETQOS_CLUSTER_DIR. Root."
        ),
    )
    parser.add_argument("command", choices=["build", "load"], nargs="?", default="load", help="load: build, then load")
    args = parser.parse_args(argv)
    reason = unavailable_reason()
    if reason:
        print(f"scripts/image: {reason}", file=sys.stderr)
        return 1
    try:
        built = build()
        print(
            f"image {IMAGE}: {built.size / 1e6:.1f} MB (uncompressed), base {built.base_seconds:.1f} s, "
            f"build {built.build_seconds:.1f} s, archive {built.archive}",
            file=sys.stderr,
        )
        if args.command == "load":
            started = time.monotonic()
            names = load(default_directory(), built.archive)
            print(f"loaded into {', '.join(names)} in {time.monotonic() - started:.1f} s", file=sys.stderr)
    except (ImageError, realnodes.NodesError) as err:
        print(f"scripts/image {args.command}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
