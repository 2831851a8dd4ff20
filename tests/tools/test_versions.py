"""One version everywhere a user meets it: the package (webhook/__init__.py), the installed CLI's
`--version`, the chart's version and appVersion, the image the chart and deploy/base run, the
Dockerfile's build command, and the newest CHANGELOG entry. And one range of Kubernetes releases:
the chart's kubeVersion starts at the oldest release the harness tests (harness/gobuild.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable

import pytest
import yaml

from harness.gobuild import RELEASES
from tests.fixtures import REPO
from webhook import __version__

CHART = REPO / "deploy" / "helm" / "netqos-webhook"


def cli_version() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "--version"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    return done.stdout.strip().removeprefix("netqos-webhook ")


def chart(field: str) -> Callable[[], str]:
    return lambda: str(yaml.safe_load((CHART / "Chart.yaml").read_text())[field])


def chart_image_tag() -> str:
    """values.yaml's image.tag, or what the chart's image helper defaults it to: the appVersion."""
    tag = yaml.safe_load((CHART / "values.yaml").read_text())["image"]["tag"]
    helper = (CHART / "templates" / "_helpers.tpl").read_text()
    assert "(default .Chart.AppVersion $image.tag)" in helper
    return str(tag) if tag else chart("appVersion")()


def base_image_tag() -> str:
    deployment = yaml.safe_load((REPO / "deploy" / "base" / "deployment.yaml").read_text())
    [container] = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "webhook"]
    image: str = container["image"]
    return image.removeprefix("netqos-webhook:")


def dockerfile_tags() -> str:
    tags = set(re.findall(r"netqos-webhook:(\S+)", (REPO / "Dockerfile").read_text()))
    return ",".join(sorted(tags))


def changelog_newest() -> str:
    return re.findall(r"^## \[?(\d+\.\d+\.\d+[^\] ]*)", (REPO / "CHANGELOG.md").read_text(), re.MULTILINE)[0]


@pytest.mark.parametrize(
    ("where", "read"),
    [
        ("netqos-webhook --version", cli_version),
        ("Chart.yaml version", chart("version")),
        ("Chart.yaml appVersion", chart("appVersion")),
        ("the chart's image tag (values.yaml, default appVersion)", chart_image_tag),
        ("deploy/base/deployment.yaml's image tag", base_image_tag),
        ("the Dockerfile's `docker build -t` tags", dockerfile_tags),
        ("CHANGELOG.md's newest entry", changelog_newest),
    ],
)
def test_every_place_states_the_package_version(where: str, read: Callable[[], str]) -> None:
    assert read() == __version__, where


def test_the_charts_kubernetes_range_starts_at_the_oldest_tested_release() -> None:
    oldest = min(RELEASES, key=lambda minor: tuple(map(int, minor.split("."))))
    assert chart("kubeVersion")() == f">={oldest}.0-0"
