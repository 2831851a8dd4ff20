"""The release a user upgrades from: the chart and the image of one fixed earlier revision
(`REVISION`), taken from git, never from the working tree.

- `source()`: the revision's tree (`git archive`) unpacked into a directory;
- `build()`: its image, built from its own Dockerfile with its own tree as the context and tagged
  `IMAGE` (distinct from the working tree's `harness.image.IMAGE`), saved as an archive in the
  image cache. The revision never changes, so an archive already there is the image: the second
  run builds nothing;
- `CHART`: where the revision's chart is inside `source()`'s directory.

No release has been tagged, so the baseline is a commit, not a version: both it and the working
tree say 0.1.0, and the image tag names the commit to keep the two images apart.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from pathlib import Path

from harness import image
from webhook import __version__

# The last commit before the harness left the product package and the release work began: its chart
# (certificates from `netqos-webhook register`) and its image are what an installed user runs today.
REVISION = "c2aa356"
IMAGE = f"netqos-webhook:{__version__}-{REVISION}"
CHART = Path("deploy/helm/netqos-webhook")  # inside the revision's tree


def source(into: Path, revision: str = REVISION) -> Path:
    """The revision's tree unpacked into `into` (made if missing); returns `into`."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", revision], cwd=image.REPO, capture_output=True, timeout=120
    )
    if archive.returncode != 0:
        raise image.ImageError(
            f"git archive {revision} exited {archive.returncode}: {archive.stderr.decode(errors='replace').strip()}; "
            "the baseline needs the repository's history (a full clone, not a shallow one)"
        )
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def build(revision: str = REVISION, name: str = IMAGE) -> image.Built:
    """The revision's image as an archive in the image cache, built from its own Dockerfile and
    tree unless the archive is there already (a revision's image never changes)."""
    archive = image.cache_dir() / f"{name.replace(':', '-')}.tar"
    if archive.is_file():
        return image.Built(archive, archive.stat().st_size, 0.0, 0.0)
    with tempfile.TemporaryDirectory(prefix="netqos-baseline-") as scratch:
        tree = source(Path(scratch), revision)
        return image.build(tree / "Dockerfile", name, context=tree)
