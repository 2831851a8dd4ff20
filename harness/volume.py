"""A directory laid out as the kubelet lays out a mounted ConfigMap or Secret, and its atomic update.

DIR/..2025_01_01_00_00_00.000000001/policy.yaml   the data of one version
DIR/..data -> ..2025_01_01_00_00_00.000000001     swapped by rename(2) on update
DIR/policy.yaml -> ..data/policy.yaml             what the webhook is given
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path


class MountedVolume:
    """The files of one ConfigMap or Secret; `update` replaces all of them at once."""

    def __init__(self, directory: Path, files: dict[str, bytes]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._current: Path | None = None
        self.update(files)
        for name in files:
            os.symlink(f"..data/{name}", self.directory / name)

    def path(self, name: str) -> Path:
        return self.directory / name

    def update(self, files: dict[str, bytes]) -> None:
        """Write a new version and switch `..data` to it in one rename, as the kubelet does."""
        version = self.directory / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{time.monotonic_ns()}"
        version.mkdir()
        for name, data in files.items():
            (version / name).write_bytes(data)
        tmp = self.directory / "..data_tmp"
        os.symlink(version.name, tmp)
        os.replace(tmp, self.directory / "..data")
        if self._current is not None:
            shutil.rmtree(self._current)
        self._current = version
