"""The package installs as scripts/venv installs it (pip, editable) without a warning, and the
installed command runs the repository's code from any directory. A release (`python -m build`:
the sdist, and the wheel built from it) ships the product only: no test harness, tests,
benchmarks, Go sources or bytecode."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures import REPO
from webhook import __version__


def test_the_editable_install_prints_no_warning_and_imports_the_checkout(tmp_path: Path) -> None:
    # A copy of what the install reads, so the build's egg-info lands in tmp_path, not the checkout.
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, project / name)
    shutil.copytree(REPO / "webhook", project / "webhook", ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # pip from the test's environment, installing into the new one: scripts/venv's flags, minus
    # the dependencies (the build itself, in pip's isolated environment, is what is checked).
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--disable-pip-version-check"]
        + ["--no-deps", "-e", str(project)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    output = done.stdout + done.stderr
    assert "Warning" not in output and "warning" not in output, output[-3000:]
    imported = subprocess.run(
        [str(python), "-c", "import webhook; print(webhook.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert imported.stdout.strip() == str(project / "webhook" / "__init__.py")


# --- what a release ships ----------------------------------------------------------------------

# (what must not be shipped, does this archive member belong to it, a member that does)
NOT_SHIPPED: list[tuple[str, Callable[[str], bool], str]] = [
    ("the test harness", lambda name: name.split("/")[0] == "harness", "harness/image.py"),
    ("a test tree", lambda name: bool({"tests", "test"} & set(name.split("/")[:-1])), "tests/unit/test_policy.py"),
    ("the benchmarks", lambda name: name.split("/")[0] == "benchmarks", "benchmarks/bench.py"),
    (
        "Go sources",
        lambda name: name.endswith(".go") or name.split("/")[-1] in ("go.mod", "go.sum"),
        "harness/go/go.mod",
    ),
    (
        "bytecode",
        lambda name: "__pycache__" in name.split("/") or name.endswith(".pyc"),
        "webhook/__pycache__/cli.cpython-312.pyc",
    ),
]
IDS = [row[0] for row in NOT_SHIPPED]


def checkout_files() -> list[str]:
    """The files a clone of the working tree has: tracked or new, not ignored, not deleted."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        timeout=60,
    ).stdout.split("\0")
    return [name for name in listed if name and (REPO / name).is_file()]


def build_release(project: Path, out: Path) -> dict[str, list[str]]:
    """`python -m build` of `project` (the sdist, then the wheel from it, as a release is built):
    the members of each, the sdist's without its top directory."""
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(project)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    with tarfile.open(sdist) as archive:
        in_sdist = [name.partition("/")[2] for name in archive.getnames() if "/" in name]
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = archive.namelist()
    return {"sdist": in_sdist, "wheel": in_wheel}


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The sdist and the wheel of a copy of the checkout (the build writes into its project)."""
    project = tmp_path_factory.mktemp("release") / "project"
    for name in checkout_files():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, project / name)
    return build_release(project, project.parent / "dist")


@pytest.mark.parametrize("what, belongs", [row[:2] for row in NOT_SHIPPED], ids=IDS)
@pytest.mark.parametrize("kind", ["sdist", "wheel"])
def test_the_release_ships_none_of(
    release: dict[str, list[str]], kind: str, what: str, belongs: Callable[[str], bool]
) -> None:
    found = [name for name in release[kind] if belongs(name)]
    assert not found, f"{what} in the {kind}: {found[:10]}"


def test_the_wheel_holds_the_webhook_package_and_its_metadata_only(release: dict[str, list[str]]) -> None:
    assert {name.split("/")[0] for name in release["wheel"]} == {"webhook", f"netqos_webhook-{__version__}.dist-info"}
    assert "webhook/cli.py" in release["wheel"]


def test_the_sdist_holds_the_package_and_what_builds_it(release: dict[str, list[str]]) -> None:
    tops = {name.split("/")[0] for name in release["sdist"]}
    assert tops == {
        "webhook",
        "netqos_webhook.egg-info",
        "pyproject.toml",
        "README.md",
        "LICENSE",
        "PKG-INFO",
        "setup.cfg",
    }


@pytest.mark.parametrize("what, belongs, planted", NOT_SHIPPED, ids=IDS)
def test_each_rule_recognises_what_it_forbids(what: str, belongs: Callable[[str], bool], planted: str) -> None:
    assert belongs(planted), f"{planted} is {what}"
    assert not belongs("webhook/cli.py")
