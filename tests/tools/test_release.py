"""scripts/release: a release a user installs without cloning. The wheel installs with pip into a
fresh virtual environment and provides `netqos-webhook --version`; the sdist carries the license;
the packaged chart's version is the app's and the repository index lists it; SHA256SUMS covers
every artifact. The image part (scripts/image build, root, minutes) is left out with --no-image;
its SBOM is read here from a small `docker save` archive made in a temporary directory, with the
layers and whiteouts a real one has."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from harness import release
from tests.fixtures import REPO
from webhook import __version__

WHEEL = f"netqos_webhook-{__version__}-py3-none-any.whl"
SDIST = f"netqos_webhook-{__version__}.tar.gz"
CHART = f"netqos-webhook-{__version__}.tgz"


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [str(REPO / "scripts" / "release"), "--no-image", "--chart-url", "https://charts.example.com", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_one_command_builds_every_artifact_and_their_checksums(dist: Path) -> None:
    assert sorted(p.name for p in dist.iterdir()) == sorted([WHEEL, SDIST, CHART, "index.yaml", "SHA256SUMS"])
    sums = dict(reversed(line.split("  ")) for line in (dist / "SHA256SUMS").read_text().splitlines())
    assert sums == {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in dist.iterdir() if p.name != "SHA256SUMS"
    }


def test_the_wheel_installs_with_pip_into_a_fresh_venv_and_provides_the_cli(dist: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", str(dist / WHEEL)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    done = subprocess.run(
        [str(venv / "bin" / "netqos-webhook"), "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, f"netqos-webhook {__version__}\n")


def test_the_wheel_and_sdist_carry_the_apache_license(dist: Path) -> None:
    with zipfile.ZipFile(dist / WHEEL) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(f"netqos_webhook-{__version__}.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert f"netqos_webhook-{__version__}.dist-info/licenses/LICENSE" in names
    assert not [n for n in names if n.startswith(("harness/", "tests/"))]  # the product only
    with tarfile.open(dist / SDIST) as sdist:
        license_file = sdist.extractfile(f"netqos_webhook-{__version__}/LICENSE")
        assert license_file is not None and license_file.read() == (REPO / "LICENSE").read_bytes()


def test_the_packaged_chart_is_the_apps_version_and_the_index_lists_it(dist: Path) -> None:
    with tarfile.open(dist / CHART) as chart:
        member = chart.extractfile("netqos-webhook/Chart.yaml")
        assert member is not None
        packaged = yaml.safe_load(member)
    assert (packaged["version"], packaged["appVersion"]) == (__version__, __version__)
    index = yaml.safe_load((dist / "index.yaml").read_text())
    [entry] = index["entries"]["netqos-webhook"]
    assert (entry["version"], entry["appVersion"]) == (__version__, __version__)
    assert entry["urls"] == [f"https://charts.example.com/{CHART}"]
    assert entry["digest"] == hashlib.sha256((dist / CHART).read_bytes()).hexdigest()


def test_a_directory_that_holds_this_versions_artifacts_is_refused(dist: Path) -> None:
    done = subprocess.run(
        [str(REPO / "scripts" / "release"), "--no-image", str(dist)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(f"scripts/release: {dist} already holds ")


# --- the SBOM, from a `docker save` archive of two layers ------------------------------------------

DPKG_STATUS = """Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u10
Description: GNU C Library
 a continuation line: not a field

Package: perl-base
Status: deinstall ok config-files
Architecture: amd64
Version: 5.36.0-7

Package: tzdata
Status: install ok installed
Architecture: all
Version: 2025b-0+deb12u1
"""
OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
SITE = "usr/local/lib/python3.12/site-packages"


def metadata(name: str, version: str, license_expression: str | None = None) -> bytes:
    lines = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}"]
    lines += [f"License-Expression: {license_expression}"] if license_expression else []
    return ("\n".join(lines) + "\n\nA description.\n").encode()


def layer(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def docker_archive(path: Path, layers: list[dict[str, bytes]]) -> Path:
    config = json.dumps({"architecture": "amd64", "os": "linux"}).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    names = [f"layer{i}/layer.tar" for i in range(len(layers))]
    manifest = json.dumps([{"Config": config_name, "RepoTags": ["netqos-webhook:x"], "Layers": names}]).encode()
    with tarfile.open(path, "w") as archive:
        for name, data in [
            ("manifest.json", manifest),
            (config_name, config),
            *zip(names, map(layer, layers), strict=True),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_the_sbom_lists_every_installed_debian_package_and_python_distribution_as_the_layers_stack(
    tmp_path: Path,
) -> None:
    base = {
        "etc/os-release": OS_RELEASE.encode(),
        "var/lib/dpkg/status": DPKG_STATUS.encode(),
        f"./{SITE}/flask-3.1.0.dist-info/METADATA": metadata("Flask", "3.1.0"),
        f"{SITE}/pip-24.3.1.dist-info/METADATA": metadata("pip", "24.3.1"),
        f"{SITE}/old_thing-1.0.dist-info/METADATA": metadata("old_thing", "1.0"),
        "usr/share/doc/x/METADATA": b"Name: not-a-dist-info\n",
    }
    upgrade = {  # pip upgraded in the next layer, old_thing removed, the app installed
        f"{SITE}/.wh.pip-24.3.1.dist-info": b"",
        f"{SITE}/pip-25.0.dist-info/METADATA": metadata("pip", "25.0"),
        f"{SITE}/.wh.old_thing-1.0.dist-info": b"",
        f"{SITE}/netqos_webhook-0.1.0.dist-info/METADATA": metadata("netqos-webhook", "0.1.0", "Apache-2.0"),
    }
    archive = docker_archive(tmp_path / "image.tar", [base, upgrade])
    sbom = release.cyclonedx(archive)
    assert (sbom["bomFormat"], sbom["specVersion"]) == ("CycloneDX", "1.5")
    assert sbom["metadata"]["component"]["hashes"][0]["content"] == release.image_id_of(archive).split(":")[1]
    assert [(c["name"], c["version"], c["purl"], c.get("licenses")) for c in sbom["components"]] == [
        ("libc6", "2.36-9+deb12u10", "pkg:deb/debian/libc6@2.36-9%2Bdeb12u10?arch=amd64&distro=debian-12", None),
        ("tzdata", "2025b-0+deb12u1", "pkg:deb/debian/tzdata@2025b-0%2Bdeb12u1?arch=all&distro=debian-12", None),
        ("Flask", "3.1.0", "pkg:pypi/flask@3.1.0", None),
        ("netqos-webhook", "0.1.0", "pkg:pypi/netqos-webhook@0.1.0", [{"expression": "Apache-2.0"}]),
        ("pip", "25.0", "pkg:pypi/pip@25.0", None),
    ]


def test_an_opaque_whiteout_empties_its_directory_for_the_sbom(tmp_path: Path) -> None:
    base = {f"{SITE}/six-1.16.0.dist-info/METADATA": metadata("six", "1.16.0")}
    archive = docker_archive(tmp_path / "image.tar", [base, {f"{SITE}/.wh..wh..opq": b""}])
    assert release.components(release.image_files(archive)) == []
