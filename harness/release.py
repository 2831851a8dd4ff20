"""One command builds a release a user installs without cloning (`scripts/release [DIR]`, default
dist/), every artifact named by the package version (webhook/__init__.py):

- `netqos_webhook-<v>-py3-none-any.whl` and `netqos_webhook-<v>.tar.gz`: PyPA's `build` (pinned,
  in a virtual environment of its own in the cache) in an isolated environment, as `pip install`
  and `pipx install` take them;
- `netqos-webhook-<v>.tgz` and `index.yaml`: `helm package` of deploy/helm/netqos-webhook and
  `helm repo index` of the directory (scripts/helm provides helm);
- unless `--no-image`: `netqos-webhook-<v>.tar`, the image from `scripts/image build` as a
  `docker save` archive (`docker load -i`), its digest beside it (`.tar.sha256`, and the image ID,
  the digest of its config, in `.image-id`), and `netqos-webhook-<v>.cdx.json`, a CycloneDX SBOM of
  every Debian package (the image's dpkg status) and Python distribution (its `*.dist-info`) in it;
- `SHA256SUMS` over all of them.

The SBOM is read from the archive's layers in order, as a container runtime stacks them: a later
layer's file replaces an earlier one's, and its whiteouts (`.wh.<name>`, `.wh..wh..opq`) remove them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import email.parser
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from webhook import __version__

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "deploy" / "helm" / "netqos-webhook"
NAME = "netqos-webhook"
BUILD = "build==1.6.1"  # PyPA's build frontend, in the tools environment
DPKG_STATUS = "var/lib/dpkg/status"
DIST_INFO = re.compile(r".*/[^/]+\.dist-info/METADATA")


class ReleaseError(RuntimeError):
    """A step of the release failed; the message names the step and what to do."""


def _run(*command: str | Path, cwd: Path = REPO, timeout: float = 1800) -> str:
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise ReleaseError(f"{' '.join(str(c) for c in command[:3])} exited {done.returncode}: {' | '.join(tail)}")
    return done.stdout


def tools_python() -> Path:
    """The Python of a virtual environment in the cache that holds `BUILD`, made once."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "netqos-webhook" / "release-tools"
    venv = base / BUILD.replace("==", "-")
    python = venv / "bin" / "python"
    base.mkdir(parents=True, exist_ok=True)
    with (base / ".lock").open("w") as lock:  # one maker at a time; a second finds it made
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".complete").exists():
            shutil.rmtree(venv, ignore_errors=True)
            _run(sys.executable, "-m", "venv", venv)
            _run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", BUILD)
            (venv / ".complete").touch()
    return python


def python_artifacts(out: Path) -> list[Path]:
    """The sdist, and the wheel built from it (as `python -m build` does), in `out`."""
    before = set(out.iterdir())
    _run(tools_python(), "-m", "build", "--outdir", out, REPO)
    made = sorted(set(out.iterdir()) - before)
    names = {f"netqos_webhook-{__version__}.tar.gz", f"netqos_webhook-{__version__}-py3-none-any.whl"}
    if {p.name for p in made} != names:
        raise ReleaseError(f"python -m build made {[p.name for p in made]}, not {sorted(names)}")
    return made


def _helm(*args: str | Path) -> str:
    return _run(REPO / "scripts" / "helm", *args, timeout=600)


def chart_artifacts(out: Path, url: str | None) -> list[Path]:
    """The packaged chart and the repository index of `out` (with `url` as where it is served)."""
    _helm("package", CHART, "--destination", out)
    chart = out / f"{NAME}-{__version__}.tgz"
    if not chart.exists():
        raise ReleaseError(f"helm package did not make {chart.name}; is Chart.yaml's version {__version__}?")
    _helm("repo", "index", out, *(["--url", url] if url else []))
    return [chart, out / "index.yaml"]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def image_artifacts(out: Path) -> list[Path]:
    """The image built by scripts/image, its digests and its SBOM."""
    from harness import image  # only here: it reads the Dockerfile and the cache

    _run(REPO / "scripts" / "image", "build", timeout=3600)
    archive = out / f"{NAME}-{__version__}.tar"
    shutil.copyfile(image.archive_path(), archive)
    checksum = archive.with_name(archive.name + ".sha256")
    checksum.write_text(f"{sha256(archive)}  {archive.name}\n")
    image_id = archive.with_name(f"{NAME}-{__version__}.image-id")
    image_id.write_text(image_id_of(archive) + "\n")
    sbom = out / f"{NAME}-{__version__}.cdx.json"
    sbom.write_text(json.dumps(cyclonedx(archive), indent=2) + "\n")
    return [archive, checksum, image_id, sbom]


# --- the SBOM -------------------------------------------------------------------------------------


def _manifest(archive: tarfile.TarFile) -> dict[str, Any]:
    member = archive.extractfile("manifest.json")
    if member is None:
        raise ReleaseError("the image archive has no manifest.json: not a `docker save` archive")
    manifests: list[dict[str, Any]] = json.load(member)
    return manifests[0]


def image_id_of(path: Path) -> str:
    """The image ID: sha256 of its config, as `docker images --digests` shows it."""
    with tarfile.open(path) as archive:
        config = archive.extractfile(_manifest(archive)["Config"])
        if config is None:
            raise ReleaseError(f"{path}: its config is missing")
        return "sha256:" + hashlib.sha256(config.read()).hexdigest()


def _wanted(path: str) -> bool:
    return path == DPKG_STATUS or path == "etc/os-release" or DIST_INFO.fullmatch("/" + path) is not None


def _whiteout(files: dict[str, bytes], path: PurePosixPath) -> None:
    """Apply a whiteout: `.wh..wh..opq` empties its directory, `.wh.NAME` removes NAME (and below)."""
    directory = "" if str(path.parent) == "." else str(path.parent)
    if path.name == ".wh..wh..opq":
        prefix = f"{directory}/" if directory else ""
    else:
        gone = f"{directory}/{path.name[4:]}" if directory else path.name[4:]
        files.pop(gone, None)
        prefix = gone + "/"
    for name in [n for n in files if n.startswith(prefix)]:
        del files[name]


def image_files(path: Path) -> dict[str, bytes]:
    """The files the SBOM reads (dpkg status, os-release, dist-info METADATA) as the image shows them."""
    files: dict[str, bytes] = {}
    with tarfile.open(path) as archive:
        for layer_name in _manifest(archive)["Layers"]:
            layer_file = archive.extractfile(layer_name)
            if layer_file is None:
                raise ReleaseError(f"{path}: layer {layer_name} is missing")
            with tarfile.open(fileobj=layer_file, mode="r:*") as layer:
                for member in layer:
                    name = PurePosixPath(member.name.removeprefix("./"))
                    if name.name.startswith(".wh."):
                        _whiteout(files, name)
                        continue
                    key = str(name)
                    if member.isfile() and _wanted(key):
                        data = layer.extractfile(member)
                        files[key] = data.read() if data is not None else b""
    return files


@dataclass(frozen=True)
class Component:
    kind: str  # "deb" or "pypi"
    name: str
    version: str
    purl: str
    license: str | None = None


def debian_packages(status: str, distro: str) -> Iterator[Component]:
    """The installed packages of a dpkg status file."""
    for paragraph in status.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in paragraph.splitlines() if ": " in line and not line.startswith(" ")
        )
        if "Package" not in fields or not fields.get("Status", "").endswith(" installed"):
            continue
        name, version, arch = fields["Package"], fields.get("Version", ""), fields.get("Architecture", "")
        qualifiers = "&".join(q for q in (f"arch={arch}" if arch else "", f"distro={distro}" if distro else "") if q)
        purl = f"pkg:deb/debian/{name}@{quote(version, safe='')}{'?' + qualifiers if qualifiers else ''}"
        yield Component("deb", name, version, purl)


def python_distribution(metadata: str) -> Component:
    headers = email.parser.HeaderParser().parsestr(metadata)
    name, version = headers.get("Name", ""), headers.get("Version", "")
    normalised = re.sub(r"[-_.]+", "-", name).lower()
    return Component(
        "pypi", name, version, f"pkg:pypi/{normalised}@{quote(version, safe='')}", headers.get("License-Expression")
    )


def _distro(os_release: str) -> str:
    fields = dict(line.split("=", 1) for line in os_release.splitlines() if "=" in line)
    ident, version = fields.get("ID", "").strip('"'), fields.get("VERSION_ID", "").strip('"')
    return f"{ident}-{version}" if ident and version else ""


def components(files: dict[str, bytes]) -> list[Component]:
    distro = _distro(files.get("etc/os-release", b"").decode(errors="replace"))
    found = list(debian_packages(files.get(DPKG_STATUS, b"").decode(errors="replace"), distro))
    found += [
        python_distribution(data.decode(errors="replace"))
        for path, data in files.items()
        if DIST_INFO.fullmatch("/" + path)
    ]
    return sorted(found, key=lambda c: (c.kind, c.name.lower(), c.version))


def cyclonedx(archive: Path) -> dict[str, Any]:
    """A CycloneDX 1.5 SBOM (JSON) of the image archive."""

    def entry(c: Component) -> dict[str, Any]:
        item: dict[str, Any] = {"type": "library", "bom-ref": c.purl, "name": c.name, "version": c.version}
        item["purl"] = c.purl
        if c.license:
            item["licenses"] = [{"expression": c.license}]
        return item

    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{uuid.uuid4()}",
        "version": 1,
        "metadata": {
            "timestamp": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "scripts/release"}]},
            "component": {
                "type": "container",
                "bom-ref": f"{NAME}:{__version__}",
                "name": NAME,
                "version": __version__,
                "hashes": [{"alg": "SHA-256", "content": image_id_of(archive).removeprefix("sha256:")}],
            },
        },
        "components": [entry(c) for c in components(image_files(archive))],
    }


# --- the command ----------------------------------------------------------------------------------


def release(out: Path, image: bool, url: str | None) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    stale = [p.name for p in out.iterdir() if __version__ in p.name or p.name in ("index.yaml", "SHA256SUMS")]
    if stale:
        raise ReleaseError(f"{out} already holds {', '.join(sorted(stale))}: give an empty directory or remove them")
    made = python_artifacts(out) + chart_artifacts(out, url)
    if image:
        made += image_artifacts(out)
    sums = out / "SHA256SUMS"
    sums.write_text("".join(f"{sha256(p)}  {p.name}\n" for p in made))
    return [*made, sums]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/release", description=f"Build release {__version__}'s artifacts into a directory."
    )
    parser.add_argument("directory", nargs="?", type=Path, default=REPO / "dist", help="default: dist/")
    parser.add_argument("--no-image", action="store_true", help="skip the image, its digests and its SBOM (root)")
    parser.add_argument("--chart-url", help="where the chart repository will be served (index.yaml's URLs)")
    args = parser.parse_args(argv)
    try:
        made = release(args.directory.resolve(), not args.no_image, args.chart_url)
    except (ReleaseError, subprocess.TimeoutExpired) as err:
        print(f"scripts/release: {err}", file=sys.stderr)
        return 1
    for path in made:
        print(f"{path}  {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
